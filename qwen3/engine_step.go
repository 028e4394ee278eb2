package qwen3

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/tt"
)

// ErrEngineClosed is returned by an Engine used after Close.
var ErrEngineClosed = errors.New("qwen3: engine is closed")

// slotReq is one slot's part of a step.
type slotReq struct {
	active bool
	seq    SeqID
	tok    int32
	pos    int
	blocks []int32 // the blocks the position needs: Blocks[:pos/bs+1]
}

// checkTok validates a token, position and block table.
func (e *Engine) checkReq(tok int32, pos int, blocks []int32) error {
	if tok < 0 || int(tok) >= e.cfg.VocabSize {
		return fmt.Errorf("token id %d out of range [0,%d)", tok, e.cfg.VocabSize)
	}
	if pos < 0 {
		return fmt.Errorf("negative position %d", pos)
	}
	if pos >= e.ropeLen {
		return fmt.Errorf("position %d is past the engine's %d positions", pos, e.ropeLen)
	}
	need := pos/e.opt.BlockSize + 1
	if len(blocks) < need {
		return fmt.Errorf("block table of %d entries does not cover position %d (block size %d)", len(blocks), pos, e.opt.BlockSize)
	}
	for i, b := range blocks[:need] {
		if b < 0 || int(b) >= e.opt.NumBlocks {
			return fmt.Errorf("block id %d (table entry %d) out of range [0,%d)", b, i, e.opt.NumBlocks)
		}
	}
	return nil
}

// freeSlot returns the lowest slot no live sequence holds, or -1.
func (e *Engine) freeSlot(taken []bool) int {
	for s, live := range e.slotLive {
		if !live && (taken == nil || !taken[s]) {
			return s
		}
	}
	return -1
}

// Prefill runs the prompt as one multi-token program (PrefillProgram, see
// Engine.prefill) or as eager single-token decode steps (PrefillDecode).
func (e *Engine) Prefill(p Prefill) ([]Output, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	if _, live := e.seqSlot[p.Seq]; live {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d, which is already live", p.Seq)
	}
	if len(p.Tokens) == 0 {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d with an empty prompt", p.Seq)
	}
	last := len(p.Tokens) - 1
	for i, t := range p.Tokens {
		if t < 0 || int(t) >= e.cfg.VocabSize {
			return nil, fmt.Errorf("qwen3: engine: prompt position %d: token id %d out of range [0,%d)", i, t, e.cfg.VocabSize)
		}
	}
	if err := e.checkReq(p.Tokens[last], last, p.Blocks); err != nil {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d: %w", p.Seq, err)
	}
	s := e.freeSlot(nil)
	if s < 0 {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d: all %d slots in use", p.Seq, e.opt.Capacity)
	}
	blocks := p.Blocks[:last/e.opt.BlockSize+1]
	var outs []Output
	if e.opt.Prefill == PrefillDecode {
		// The whole prompt's blocks, for every prompt step: the width does
		// not change inside the prompt, and entries past a step's position
		// are never read (KChunkSize = BlockSize) except as masked chunk
		// reads.
		outs = make([]Output, len(p.Tokens))
		req := make([]slotReq, e.opt.Capacity)
		for i, t := range p.Tokens {
			req[s] = slotReq{active: true, seq: p.Seq, tok: t, pos: i, blocks: blocks}
			o, err := e.step(req, true)
			if err != nil {
				return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d, position %d: %w", p.Seq, i, err)
			}
			outs[i] = o[s]
		}
		e.stats.PrefillTokens += len(p.Tokens)
	} else {
		var err error
		if outs, err = e.prefill(s, p.Seq, p.Tokens, blocks); err != nil {
			return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d: %w", p.Seq, err)
		}
	}
	e.slotLive[s], e.slotSeq[s] = true, p.Seq
	e.seqSlot[p.Seq] = s
	return outs, nil
}

// Decode runs one step for each entry of batch. A sequence not live yet
// takes the lowest free slot. Live sequences not in the batch are inactive
// for this step (cur_pos -1). Every entry is validated before anything is
// written.
func (e *Engine) Decode(batch []Step) ([]Output, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	if len(batch) == 0 {
		return nil, nil
	}
	req := make([]slotReq, e.opt.Capacity)
	taken := make([]bool, e.opt.Capacity)
	slots := make([]int, len(batch))
	for i, st := range batch {
		for _, o := range batch[:i] {
			if o.Seq == st.Seq {
				return nil, fmt.Errorf("qwen3: engine: sequence %d appears twice in one decode batch", st.Seq)
			}
		}
		if err := e.checkReq(st.Token, st.Pos, st.Blocks); err != nil {
			return nil, fmt.Errorf("qwen3: engine: decode of sequence %d: %w", st.Seq, err)
		}
		s, live := e.seqSlot[st.Seq]
		if !live {
			if s = e.freeSlot(taken); s < 0 {
				return nil, fmt.Errorf("qwen3: engine: decode of sequence %d: all %d slots in use", st.Seq, e.opt.Capacity)
			}
		}
		taken[s] = true
		slots[i] = s
		req[s] = slotReq{active: true, seq: st.Seq, tok: st.Token, pos: st.Pos,
			blocks: st.Blocks[:st.Pos/e.opt.BlockSize+1]}
	}
	outs, err := e.step(req, false)
	if err != nil {
		return nil, fmt.Errorf("qwen3: engine: decode: %w", err)
	}
	res := make([]Output, len(batch))
	for i, st := range batch {
		s := slots[i]
		res[i] = outs[s]
		e.slotLive[s], e.slotSeq[s] = true, st.Seq
		e.seqSlot[st.Seq] = s
	}
	return res, nil
}

// Finish frees the sequence's slot. The KV cache is not touched (the blocks
// belong to the caller).
func (e *Engine) Finish(seq SeqID) error {
	if e.closed {
		return ErrEngineClosed
	}
	s, live := e.seqSlot[seq]
	if !live {
		return fmt.Errorf("qwen3: engine: finish of sequence %d, which is not live", seq)
	}
	delete(e.seqSlot, seq)
	e.slotLive[s] = false
	return nil
}

// Reset releases the live trace (freeing the page tables it retired) and
// forgets everything the regime depends on: the compiled widths and the
// host's record of the device inputs. The next step is cold and re-seeds
// every input. Live sequences and the KV cache are kept.
func (e *Engine) Reset() error {
	if e.closed {
		return ErrEngineClosed
	}
	err := e.dropTrace()
	clear(e.warm)
	clear(e.prefillWarm)
	e.mirror = false
	e.ptHost = nil
	e.stats.Resets++
	return err
}

// dropTrace releases the live trace, if any, and frees the page tables
// retired for it.
func (e *Engine) dropTrace() error {
	if e.trace == nil {
		return nil
	}
	id, owned := e.trace.id, e.trace.owned
	e.trace = nil
	err := e.dev.Release(id)
	e.stats.Releases++
	for _, t := range owned {
		err = errors.Join(err, e.dev.Free(t))
	}
	keep := e.retired[:0]
	for _, r := range e.retired {
		if r.trace == id {
			err = errors.Join(err, e.dev.Free(r.t))
			e.stats.RetiredFreed++
			continue
		}
		keep = append(keep, r)
	}
	e.retired = keep
	e.stats.RetiredLive = len(e.retired)
	return err
}

// ptSpec is the page table's spec at width w.
func (e *Engine) ptSpec(w int) tt.Spec {
	return dramRM(tt.INT32, e.opt.Capacity, w)
}

// setWidth allocates a page table of width w and supersedes the current
// one: retired while the live trace addresses it, freed otherwise.
func (e *Engine) setWidth(w int) error {
	t, err := e.dev.Allocate(e.ptSpec(w))
	if err != nil {
		return fmt.Errorf("allocate page table [%d,%d]: %w", e.opt.Capacity, w, err)
	}
	if old := e.pt; old != nil {
		e.stats.PageTableReallocs++
		if e.trace != nil && e.trace.pt == old.ID {
			e.retired = append(e.retired, retiredPT{t: *old, trace: e.trace.id})
			e.stats.Retired++
			e.stats.RetiredLive = len(e.retired)
		} else if err := e.dev.Free(*old); err != nil {
			return fmt.Errorf("free page table: %w", err)
		}
	}
	e.pt, e.ptW, e.ptHost = &t, w, nil
	return nil
}

// write copies a host tensor to the device, counting it.
func (e *Engine) write(st *StepStats, t tt.Tensor, h tt.HostTensor) error {
	if err := e.dev.WriteHost(t, h); err != nil {
		return err
	}
	st.HostWrites++
	return nil
}

// step runs one device step over all slots (req[s].active marks the
// step's users) and returns one Output per slot (zero for inactive slots).
// It is the sequence below, each a named stage:
//
//  1. pageTable: the width policy over the active slots and the host's
//     rows of the table (a new tensor on a width change);
//  2. regime: cold, warm, capture or replay, from the engine's own state
//     (releasing a trace the step can no longer replay);
//  3. writeInputs: the page table when its rows changed, cur_pos and the
//     rope index on every non-replay step, the tokens when they differ;
//  4. run: the graph eagerly, or captured then executed, or replayed;
//     then advance the host's mirror by the graph's plus_one;
//  5. results: logits and next tokens read back; verify when asked;
//  6. account: the step's stats into the engine's.
func (e *Engine) step(req []slotReq, eagerOnly bool) ([]Output, error) {
	var st StepStats
	table, err := e.pageTable(&st, req)
	if err != nil {
		return nil, err
	}
	active := make([]bool, len(req))
	for s, r := range req {
		active[s] = r.active
	}
	if err := e.regime(&st, active, eagerOnly); err != nil {
		return nil, err
	}
	if err := e.writeInputs(&st, req, table); err != nil {
		return nil, err
	}
	if err := e.run(&st, active); err != nil {
		e.mirror = false
		return nil, err
	}
	e.plusOneRan()
	outs, err := e.results(&st, req)
	if err != nil {
		e.mirror = false
		return nil, err
	}
	if e.opt.Verify {
		if err := e.verify(); err != nil {
			return nil, err
		}
	}
	e.account(st, eagerOnly)
	return outs, nil
}

// pageTable applies the width policy to the active slots' block counts
// (allocating a new page table on any width change) and returns the
// table's host rows: each active slot's blocks padded with PagePad, and
// PagePad for every inactive slot.
func (e *Engine) pageTable(st *StepStats, req []slotReq) ([]int32, error) {
	C := e.opt.Capacity
	longest := e.longestFloor
	for _, r := range req {
		if r.active {
			longest = max(longest, len(r.blocks))
		}
	}
	w, err := kvpage.Width(e.opt.Width, longest)
	if err != nil {
		return nil, err
	}
	if e.pt == nil || w != e.ptW {
		if err := e.setWidth(w); err != nil {
			return nil, err
		}
	}
	st.Width = e.ptW
	table := make([]int32, C*e.ptW)
	for s, r := range req {
		row := table[s*e.ptW : (s+1)*e.ptW]
		if !r.active {
			for i := range row {
				row[i] = PagePad
			}
			continue
		}
		if err := kvpage.PadRow(row, r.blocks, PagePad); err != nil {
			return nil, err
		}
	}
	return table, nil
}

// regime sets st.Regime from the engine's own state. In captured mode a
// live trace is released first when it no longer fits the step (another
// page table, another set of active slots, or recapture_every reached).
func (e *Engine) regime(st *StepStats, active []bool, eagerOnly bool) error {
	switch {
	case e.opt.Mode == ModeCaptured && !eagerOnly && !e.noRegion:
		if e.trace != nil && (e.trace.pt != e.pt.ID || !slices.Equal(e.trace.active, active) ||
			(e.opt.RecaptureEvery > 0 && e.trace.steps >= e.opt.RecaptureEvery)) {
			if err := e.dropTrace(); err != nil {
				return err
			}
		}
		switch {
		case e.trace != nil:
			st.Regime = RegimeReplay
		case e.warm[e.ptW]:
			st.Regime = RegimeCapture
		default:
			st.Regime = RegimeCold
		}
	case e.warm[e.ptW]:
		st.Regime = RegimeWarm
	default:
		st.Regime = RegimeCold
	}
	return nil
}

// writeInputs copies the step's inputs the device does not already hold:
// the page table when its rows changed; cur_pos and the rope index on
// every non-replay step (the re-seed cur_pos = seq_len - 1), and on a
// replay only when they differ; the tokens when they differ from the
// device's. Afterwards the host's mirror holds what the device holds.
func (e *Engine) writeInputs(st *StepStats, req []slotReq, table []int32) error {
	C := e.opt.Capacity
	if err := e.writePageTable(st, table); err != nil {
		return err
	}
	pos := make([]int32, C)
	rope := make([]int32, C)
	toks := make([]uint32, C)
	posDiffers, tokDiffers := !e.mirror, !e.mirror
	for s, r := range req {
		if r.active {
			pos[s], rope[s], toks[s] = int32(r.pos), int32(r.pos), uint32(r.tok)
		} else {
			// An inactive slot is skipped by the cache and attention ops;
			// its token and rope index only need to be in range, so a
			// replay leaves what the device holds (the rope index of an
			// inactive slot advances with every replay; it is re-seeded
			// to 0 at every non-replay step and before it leaves the
			// table).
			pos[s] = -1
			if e.mirror {
				toks[s] = e.devTok[s]
				if st.Regime == RegimeReplay && e.devRope[s] >= 0 && int(e.devRope[s]) < e.ropeLen {
					rope[s] = e.devRope[s]
				}
			}
		}
		if e.mirror && (pos[s] != e.devPos[s] || rope[s] != e.devRope[s]) {
			posDiffers = true
		}
		if e.mirror && toks[s] != e.devTok[s] {
			tokDiffers = true
		}
	}
	// Every non-replay step re-seeds the positions; a replay writes them
	// only when the device does not already hold them.
	if st.Regime != RegimeReplay || posDiffers {
		if err := e.writePos(st, pos, rope); err != nil {
			return err
		}
	}
	if tokDiffers {
		if err := e.writeToks(st, toks); err != nil {
			return err
		}
	}
	e.holds(pos, rope, toks)
	return nil
}

// writePos writes cur_pos and the rope index.
func (e *Engine) writePos(st *StepStats, pos, rope []int32) error {
	C := e.opt.Capacity
	if err := e.write(st, e.a.curPos, tt.HostInt32([]int{C}, tt.RowMajor, pos)); err != nil {
		return fmt.Errorf("cur_pos: %w", err)
	}
	if err := e.write(st, e.a.ropeIdx, tt.HostUint32([]int{1, 1, 1, C * tt.TileSize}, tt.RowMajor, ropeIDs(rope))); err != nil {
		return fmt.Errorf("rope index: %w", err)
	}
	st.PosWrite = true
	return nil
}

// writeToks writes the token input.
func (e *Engine) writeToks(st *StepStats, toks []uint32) error {
	padded := make([]uint32, tileUp(len(toks)))
	copy(padded, toks)
	if err := e.write(st, e.a.tok, tt.HostUint32([]int{1, 1, 1, len(padded)}, tt.RowMajor, padded)); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	st.TokenWrite = true
	return nil
}

// holds records pos, rope and toks as what the device holds (the host's
// mirror).
func (e *Engine) holds(pos, rope []int32, toks []uint32) {
	copy(e.devPos, pos)
	copy(e.devRope, rope)
	copy(e.devTok, toks)
	e.mirror = true
}

// writePageTable writes the host rows of the page table when they differ
// from what the device's table holds (decode steps and prefills).
func (e *Engine) writePageTable(st *StepStats, table []int32) error {
	C := e.opt.Capacity
	if e.ptHost == nil || !slices.Equal(table, e.ptHost) {
		if err := e.write(st, *e.pt, tt.HostInt32([]int{C, e.ptW}, tt.RowMajor, table)); err != nil {
			return fmt.Errorf("page table: %w", err)
		}
		e.ptHost = table
		st.PageTableWrite = true
	}
	return nil
}

// run executes the step's graph in its regime: eagerly (cold, warm; the
// width is warm afterwards), captured into a new trace and executed
// (capture), or the live trace executed (replay).
func (e *Engine) run(st *StepStats, active []bool) error {
	switch st.Regime {
	case RegimeCold, RegimeWarm:
		if err := e.forward(); err != nil {
			return err
		}
		e.warm[e.ptW] = true
	case RegimeCapture:
		err := e.capture(active)
		if errors.Is(err, errNoRegion) {
			// Nothing of the step ran: run it eagerly, and from now on.
			st.Regime = RegimeWarm
			return e.forward()
		}
		if err != nil {
			return err
		}
		if err := e.dev.Execute(e.trace.id); err != nil {
			return fmt.Errorf("execute trace: %w", err)
		}
		e.trace.steps++
	case RegimeReplay:
		if err := e.dev.Execute(e.trace.id); err != nil {
			return fmt.Errorf("execute trace: %w", err)
		}
		e.trace.steps++
		e.stats.Replays++
	}
	return nil
}

// plusOneRan advances the host's mirror as the plus_one at the end of the
// graph advanced the device: cur_pos skipping -1 (and saturating), the
// rope index always.
func (e *Engine) plusOneRan() {
	for s := range e.devPos {
		if e.devPos[s] >= 0 && e.devPos[s] < math.MaxInt32 {
			e.devPos[s]++
		}
		e.devRope[s]++
	}
}

// results reads the logits and the argmax tokens back and returns one
// Output per active slot (the token is the device's greedy choice).
func (e *Engine) results(st *StepStats, req []slotReq) ([]Output, error) {
	lh, err := e.dev.ReadHost(e.a.logits)
	if err != nil {
		return nil, fmt.Errorf("read logits: %w", err)
	}
	th, err := e.dev.ReadHost(e.a.tok)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	st.HostReads += 2
	copy(e.devTok, th.Uint32s())
	outs := make([]Output, len(req))
	lv := bf16.FromBytes(lh.Data) // read only
	V := e.cfg.VocabSize
	for s, r := range req {
		if !r.active {
			continue
		}
		logits := make([]float32, V)
		bf16.ToFloat32s(logits, lv[s*V:(s+1)*V])
		outs[s] = Output{Seq: r.seq, Pos: r.pos, Token: int32(e.devTok[s]), Logits: logits}
	}
	return outs, nil
}

// account adds the step's stats to the engine's and keeps them as Last.
func (e *Engine) account(st StepStats, eagerOnly bool) {
	e.last = st
	e.stats.Steps++
	if eagerOnly {
		e.stats.PrefillSteps++
	}
	e.stats.StepsByRegime[st.Regime]++
	e.stats.HostWritesByRegime[st.Regime] += st.HostWrites
	e.stats.HostReadsByRegime[st.Regime] += st.HostReads
	e.stats.HostWrites += st.HostWrites
	e.stats.HostReads += st.HostReads
	if st.TokenWrite {
		e.stats.TokenWrites++
	}
	if st.PosWrite {
		e.stats.PosWrites++
	}
	if st.PageTableWrite {
		e.stats.PageTableWrites++
	}
}

// errNoRegion is capture's answer when the device refused the trace for
// its size (tt.TraceRegionTooSmall): the step ran nothing, and the engine
// runs eager from then on. The engine drops its trace before each capture,
// so that trace alone was larger than the region, and its bytes stay
// counted on the device (tt_metal/distributed/mesh_trace.cpp:59-60): no
// later capture fits either.
var errNoRegion = errors.New("the trace region cannot hold the decode graph")

// capture records the decode graph into a new trace.
func (e *Engine) capture(active []bool) error {
	id, err := e.dev.BeginCapture()
	if err != nil {
		return fmt.Errorf("begin trace capture: %w", err)
	}
	e.captured = e.captured[:0]
	e.capturing = true
	err = e.forward()
	e.capturing = false
	owned := append([]tt.Tensor(nil), e.captured...)
	e.captured = e.captured[:0]
	if err != nil {
		// Leave the device out of capture; the partial trace is useless.
		_ = e.dev.EndCapture(id)
		_ = e.dev.Release(id)
		e.freeTensors(owned)
		return fmt.Errorf("capture: %w", err)
	}
	if err := e.dev.EndCapture(id); err != nil {
		_ = e.dev.Release(id)
		e.freeTensors(owned)
		if tt.TraceRegionTooSmall(err) {
			e.noRegion = true
			return errNoRegion
		}
		return fmt.Errorf("end trace capture: %w", err)
	}
	e.trace = &engTrace{id: id, pt: e.pt.ID, width: e.ptW, active: active, owned: owned}
	e.stats.Captures++
	return nil
}

// verify reads the inputs back and compares them with the host's record.
func (e *Engine) verify() error {
	C := e.opt.Capacity
	rd := func(t tt.Tensor) ([]int32, error) {
		h, err := e.dev.ReadHost(t)
		e.stats.VerifyReads++
		if err != nil {
			return nil, err
		}
		return h.Int32s(), nil
	}
	checks := []struct {
		name string
		t    tt.Tensor
		want []int32
	}{
		{"cur_pos", e.a.curPos, e.devPos},
		{"rope index", e.a.ropeIdx, e.devRope},
		{"page table", *e.pt, e.ptHost},
	}
	tokWant := make([]int32, C)
	for i, t := range e.devTok {
		tokWant[i] = int32(t)
	}
	checks = append(checks, struct {
		name string
		t    tt.Tensor
		want []int32
	}{"tokens", e.a.tok, tokWant})
	for _, c := range checks {
		if c.name == "page table" && e.ptHost == nil {
			continue // nothing believed (after Reset or a new width): the next step writes it
		}
		got, err := rd(c.t)
		if err != nil {
			return fmt.Errorf("verify %s: %w", c.name, err)
		}
		switch c.name {
		case "tokens": // padded to a whole tile
			got = got[:min(len(got), C)]
		case "rope index": // 32 copies a slot (ropeIDs)
			one := make([]int32, 0, C)
			for i := 0; i < len(got); i += tt.TileSize {
				one = append(one, got[i])
			}
			got = one
		}
		if !slices.Equal(got, c.want) {
			return fmt.Errorf("verify: device %s %v, engine believes %v", c.name, got, c.want)
		}
	}
	return nil
}

// freeTensors frees device-allocated outputs (errors joined into none: a
// failed free of an op output changes nothing the engine relies on).
func (e *Engine) freeTensors(ts []tt.Tensor) {
	for _, t := range ts {
		_ = e.dev.Free(t)
	}
}

// opSlots holds one op of each type the engine runs. An op passed to
// tt.Device.Run as a value is boxed into a new interface value; passed as
// a pointer to its slot it is not, and the device keeps nothing of it once
// Run returns (tt.Device.Run), so one slot per type serves every pass.
type opSlots struct {
	Embedding               tt.Embedding
	ToMemoryConfig          tt.ToMemoryConfig
	RMSNorm                 tt.RMSNorm
	Linear                  tt.Linear
	NLPCreateQKVHeadsDecode tt.NLPCreateQKVHeadsDecode
	NLPCreateQKVHeads       tt.NLPCreateQKVHeads
	RotaryEmbeddingHF       tt.RotaryEmbeddingHF
	PagedUpdateCache        tt.PagedUpdateCache
	PagedFillCache          tt.PagedFillCache
	PagedSDPADecode         tt.PagedSDPADecode
	SDPA                    tt.SDPA
	ChunkedSDPA             tt.ChunkedSDPA
	Slice                   tt.Slice
	FillCache               tt.FillCache
	ConcatHeads             tt.ConcatHeads
	NLPConcatHeads          tt.NLPConcatHeads
	Add                     tt.Add
	SiluMul                 tt.SiluMul
	Argmax                  tt.Argmax
}

// reuse puts op into its slot and returns the slot, for fwd.run.
func reuse[T any](slot *T, op T) *T {
	*slot = op
	return slot
}

// fwd runs the ops of one forward pass and tracks the outputs the device
// allocated for them.
type fwd struct {
	e   *Engine
	tmp []tt.Tensor
	err error
}

// run runs op (after an earlier failure, nothing) and returns the outputs
// the device allocated for it.
func (f *fwd) run(op tt.Op) []tt.Tensor {
	if f.err != nil {
		return nil
	}
	outs, err := f.e.dev.Run(op)
	if err != nil {
		f.err = fmt.Errorf("%s: %w", op.Name(), err)
		return nil
	}
	if tm, ok := op.(*tt.ToMemoryConfig); ok && len(outs) == 1 && outs[0].ID == tm.Input.ID {
		return outs // ttnn returns the input itself for its own config: not an output to free
	}
	f.tmp = append(f.tmp, outs...)
	return outs
}

// one runs an op that allocates one output and returns it.
func (f *fwd) one(op tt.Op) tt.Tensor {
	outs := f.run(op)
	if len(outs) != 1 {
		if f.err == nil {
			f.err = fmt.Errorf("%s: device returned %d outputs, want 1", op.Name(), len(outs))
		}
		return tt.Tensor{}
	}
	return outs[0]
}

// free frees the outputs allocated since the from-th, eager or capturing:
// a layer's intermediates are deallocated once consumed, inside a capture
// too, as tt_transformers does (ttnn.deallocate in
// models/tt_transformers/tt/decoder.py, attention.py, mlp.py), so the
// next layer's outputs take the same addresses and a capture's L1 holds
// one layer's, not every layer's (the 0.6B shape's 28 layers do not fit).
// The trace replays through those addresses in capture order; nothing
// else is allocated on them while it lives.
func (f *fwd) free(from int) {
	f.e.freeTensors(f.tmp[from:])
	f.tmp = f.tmp[:from]
}

// release ends the pass: the outputs allocated since the first from-th
// are freed when eager, kept for the trace during capture.
func (f *fwd) release(from int) {
	if f.e.capturing {
		f.e.captured = append(f.e.captured, f.tmp[from:]...)
	} else {
		f.e.freeTensors(f.tmp[from:])
	}
	f.tmp = f.tmp[:from]
}

// forward runs (or, during capture, records) the decode graph over all C
// slots, tt_transformers' order (§8): embedding of the tokens, and of the
// rope index into the cos/sin tables (resharded one user per core); per
// layer rms_norm, fused QKV linear, head split, q/k rms_norm over head_dim
// (to L1 interleaved and back: ttnn's rms_norm refuses height-sharded input,
// tt_transformers' norm_reshard), rotary_embedding_hf, paged_update_cache
// of K and V, paged SDPA decode (output in DRAM, resharded), concat heads, o_proj, residual add,
// rms_norm, gate and up linears, silu·mul, down linear, residual add; final
// rms_norm, lm_head, argmax into the token input, plus_one on cur_pos
// (skipping -1) and on the rope index.
//
// Each op matches one step of ref's decomposition: a fused QKV row is the
// same Dot over the same normed input as a separate q/k/v row; q_norm and
// rope act per head row as ref does per head slice.
func (e *Engine) forward() error {
	a, c, o := &e.a, e.cfg, &e.ops
	C, hd := e.opt.Capacity, c.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	f := &fwd{e: e, tmp: e.fwdTmp[:0]}
	f.run(reuse(&o.Embedding, tt.Embedding{Input: a.tok, Weight: e.w.embed, Output: a.x}))
	f.run(reuse(&o.Embedding, tt.Embedding{Input: a.ropeIdx, Weight: e.w.cos, Output: a.cos}))
	f.run(reuse(&o.Embedding, tt.Embedding{Input: a.ropeIdx, Weight: e.w.sin, Output: a.sin}))
	rowsMem := userSharded(C, 1, hd)
	cos := f.one(reuse(&o.ToMemoryConfig, tt.ToMemoryConfig{Input: a.cos, Memory: rowsMem}))
	sin := f.one(reuse(&o.ToMemoryConfig, tt.ToMemoryConfig{Input: a.sin, Memory: rowsMem}))
	keep := len(f.tmp) // cos and sin live for the whole pass
	pt := *e.pt
	// headNorm is rms_norm of a height-sharded head tensor through L1
	// interleaved, back to the head tensor's sharding.
	headNorm := func(x, w tt.Tensor) tt.Tensor {
		xi := f.one(reuse(&o.ToMemoryConfig, tt.ToMemoryConfig{Input: x, Memory: tt.L1Interleaved}))
		n := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: xi, Weight: w, Epsilon: e.eps}))
		return f.one(reuse(&o.ToMemoryConfig, tt.ToMemoryConfig{Input: n, Memory: x.Spec.Memory}))
	}
	for l := range e.w.layers {
		L := &e.w.layers[l]
		normed := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: a.x, Weight: L.inNorm, Epsilon: e.eps}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed, Weight: L.qkv, Output: a.qkv, TransposeB: true}))
		qkv := f.run(reuse(&o.NLPCreateQKVHeadsDecode, tt.NLPCreateQKVHeadsDecode{Input: a.qkv,
			NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumKeyValueHeads, Memory: userSharded(C, c.NumAttentionHeads, hd)}))
		if f.err != nil {
			break
		}
		q, k, v := qkv[0], qkv[1], qkv[2]
		qn := headNorm(q, L.qNorm)
		kn := headNorm(k, L.kNorm)
		qr := f.one(reuse(&o.RotaryEmbeddingHF, tt.RotaryEmbeddingHF{Input: qn, Cos: cos, Sin: sin}))
		kr := f.one(reuse(&o.RotaryEmbeddingHF, tt.RotaryEmbeddingHF{Input: kn, Cos: cos, Sin: sin}))
		f.run(reuse(&o.PagedUpdateCache, tt.PagedUpdateCache{Cache: L.kc, Input: kr, UpdateIdxs: &a.curPos, PageTable: &pt}))
		f.run(reuse(&o.PagedUpdateCache, tt.PagedUpdateCache{Cache: L.vc, Input: v, UpdateIdxs: &a.curPos, PageTable: &pt}))
		// GQA (more than one KV head) refuses a sharded SDPA output
		// (sdpa_decode_device_operation.cpp:403-405): DRAM interleaved,
		// then resharded one user per core for concat heads, as
		// tt_transformers does (models/tt_transformers/tt/attention.py:
		// 706-737, models/tt_transformers/tt/model_config.py:1806-1811).
		attnD := f.one(reuse(&o.PagedSDPADecode, tt.PagedSDPADecode{Q: qr, K: L.kc, V: L.vc, PageTable: pt, CurPos: a.curPos,
			Scale: scale, KChunkSize: e.opt.BlockSize, Memory: tt.DRAMInterleaved}))
		attn := f.one(reuse(&o.ToMemoryConfig, tt.ToMemoryConfig{Input: attnD, Memory: qr.Spec.Memory}))
		f.run(reuse(&o.ConcatHeads, tt.ConcatHeads{Input: attn, Output: a.cat, NumHeads: c.NumAttentionHeads}))
		f.run(reuse(&o.Linear, tt.Linear{Input: a.cat, Weight: L.o, Output: a.o, TransposeB: true}))
		f.run(reuse(&o.Add, tt.Add{A: a.x, B: a.o, Output: a.h}))
		normed2 := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: a.h, Weight: L.postNorm, Epsilon: e.eps}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed2, Weight: L.gate, Output: a.gate, TransposeB: true}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed2, Weight: L.up, Output: a.up, TransposeB: true}))
		f.run(reuse(&o.SiluMul, tt.SiluMul{Gate: a.gate, Up: a.up, Output: a.gu}))
		f.run(reuse(&o.Linear, tt.Linear{Input: a.gu, Weight: L.down, Output: a.down, TransposeB: true}))
		f.run(reuse(&o.Add, tt.Add{A: a.h, B: a.down, Output: a.x}))
		f.free(keep) // the layer's own outputs are done with, capturing or not
	}
	normed := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: a.x, Weight: e.w.norm, Epsilon: e.eps}))
	f.run(reuse(&o.Linear, tt.Linear{Input: normed, Weight: e.w.lmHead, Output: a.logits, TransposeB: true}))
	ops := make([]tt.Op, 0, 3)
	ops = append(ops,
		tt.Argmax{Input: a.logits, Output: a.tok},
		tt.PlusOne{Input: a.curPos, SkipNegativeEntries: true},
		tt.PlusOne{Input: a.ropeIdx},
	)
	for _, op := range ops {
		f.run(op)
	}
	f.release(0)
	e.fwdTmp = f.tmp[:0] // the next pass's
	return f.err
}
