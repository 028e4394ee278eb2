package qwen3

import (
	"fmt"
	"slices"

	"github.com/offcard/offcard/tt"
)

// The serving interfaces (serving.go) on the engine. Each call issues only
// ops ttnn has at tt-metal 622c6fb9, in the forms sim's checks table
// (tt/checks.tsv) accepts:
//
//   - PrefillFrom (a prefix-cache hit or the next chunk): with
//     Prefill: PrefillDecode, every position as an eager decode step (as
//     Prefill does then); otherwise the positions
//     Start..a-1 up to the first block boundary a = roundup(Start,
//     BlockSize) run as eager decode steps (the decode graph:
//     paged_update_cache writes one row, paged SDPA decode attends 0..pos;
//     a tile-wide write of paged_fill_cache there would overwrite the
//     cached rows of the tile, and chunked SDPA places a chunk's queries at
//     start rounded down to its q chunk, sdpa_program_factory.cpp:133,
//     reader_interleaved.cpp:260). The rest, a..end-1, runs as one chunk
//     the way models/tt_transformers/tt/generator.py does at the pin
//     (prefill_forward_single_user, _prefill_forward_trace): the chunk's
//     page table sliced from the sequence's, chunk_start_block = a /
//     BlockSize up to the chunk's block count (zero-padded), uploaded as a
//     [1, n] tensor; per layer paged_fill_cache of K and V through that
//     slice with batch_idx 0 (attention.py forward_prefill), and
//     chunked_scaled_dot_product_attention over the paged caches through
//     the sequence's own [1, W] table (tt_transformers/tt/attention.py:1068-1091). An eager
//     engine passes the chunk start as the integer (the legacy overload,
//     transformer/sdpa/sdpa.cpp:93-127; a a multiple of the 32-row q chunk, the default
//     without a program config); a captured engine passes it in an INT32
//     [1] device tensor (the flexible overload, transformer/sdpa/sdpa.cpp:129-163, what
//     tt_transformers' traced prefill uses), its table padded to a
//     multiple of 8 blocks (the stick-size check,
//     sdpa_program_factory.cpp:141; generator.py _pad_or_create_page_table
//     pads the same way). The chunk is not captured: prefill passes run
//     eagerly (as Prefill does), and afterwards the decode inputs are left
//     as a decode step at the chunk's last position would leave them
//     (seedDecode), so the next decode (eager or a replay of a live trace)
//     continues from the call's positions.
//   - Verify (k tokens at Pos..Pos+k-1): k rounds of the decode graph,
//     round j running position Pos+j of every entry with more than j
//     tokens, each through the table grown before the step to cover
//     Pos+k-1, every round at the width of the batch's longest entry
//     (so the last rounds, where shorter entries sat out, keep the
//     table). Rounds run eagerly (cold or
//     warm; never captured, as a prefill is not: a verify's slots and
//     positions are not the decode trace's), and a live decode trace
//     stays live for the next decode. A single launch carrying the k rows of one
//     sequence is not used: paged_update_cache's users
//     read-modify-write whole tiles concurrently, so two rows of one tile
//     in one launch lose one (the race sim models), and chunked SDPA needs
//     its start on a q-chunk boundary.
//   - CopyBlocks: per copy, per layer, for K and V: ttnn.slice of block Src
//     (box [Src,0,0,0]..[Src+1, kv_heads, BlockSize, head_dim], the tile
//     path, slice.cpp), then ttnn.fill_cache of that [1, kv_heads,
//     BlockSize, head_dim] tensor into block Dst (batch_idx Dst,
//     update_idx 0: kv_cache.cpp:42-49; a paged cache's block is
//     fill_cache's batch), then the slice freed. vLLM's copy_blocks does
//     the same copy (a gather of the source blocks written over the
//     destination blocks).

var _ ServingDecoder = (*Engine)(nil)

// PrefillFrom computes positions p.Start..p.Start+len(p.Tokens)-1 over the
// cached positions below Start (see above for the ops). Start 0 is
// Prefill.
func (e *Engine) PrefillFrom(p PrefillFrom) ([]Output, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	if p.Start < 0 {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d from negative position %d", p.Seq, p.Start)
	}
	if p.Start == 0 {
		return e.Prefill(Prefill{Seq: p.Seq, Tokens: p.Tokens, Blocks: p.Blocks})
	}
	if len(p.Tokens) == 0 {
		return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d from %d with no tokens", p.Seq, p.Start)
	}
	end := p.Start + len(p.Tokens)
	for i, t := range p.Tokens {
		if err := e.checkReq(t, p.Start+i, p.Blocks); err != nil {
			return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d from %d: %w", p.Seq, p.Start, err)
		}
	}
	s, live := e.seqSlot[p.Seq]
	if !live {
		if s = e.freeSlot(nil); s < 0 {
			return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d: all %d slots in use", p.Seq, e.opt.Capacity)
		}
	}
	bs := e.opt.BlockSize
	blocks := p.Blocks[:(end-1)/bs+1]
	a := min(end, (p.Start+bs-1)/bs*bs)
	if e.opt.Prefill == PrefillDecode {
		a = end
	}
	outs := make([]Output, 0, len(p.Tokens))
	req := make([]slotReq, e.opt.Capacity)
	for pos := p.Start; pos < a; pos++ {
		req[s] = slotReq{active: true, seq: p.Seq, tok: p.Tokens[pos-p.Start], pos: pos, blocks: blocks}
		o, err := e.step(req, true)
		if err != nil {
			return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d, position %d: %w", p.Seq, pos, err)
		}
		outs = append(outs, o[s])
	}
	e.stats.PrefillTokens += a - p.Start
	if a < end {
		o, err := e.chunk(s, p.Seq, a, p.Tokens[a-p.Start:], blocks)
		if err != nil {
			return nil, fmt.Errorf("qwen3: engine: prefill of sequence %d, chunk from %d: %w", p.Seq, a, err)
		}
		outs = append(outs, o...)
	}
	e.slotLive[s], e.slotSeq[s] = true, p.Seq
	e.seqSlot[p.Seq] = s
	return outs, nil
}

// chunkKeyTensor is prefillKey.start for the tensor form (its programs do
// not depend on the start).
const chunkKeyTensor = -1

// chunk runs tokens at positions start.. (start a multiple of the block
// size, > 0) as one chunk of a chunked prefill (see above) in slot s.
func (e *Engine) chunk(s int, seq SeqID, start int, toks []int32, blocks []int32) ([]Output, error) {
	var st StepStats
	bs := e.opt.BlockSize
	end := start + len(toks)
	flex := e.opt.Mode == ModeCaptured
	// The sequence's table for chunked SDPA: the blocks covering 0..end-1,
	// padded with PagePad (to a multiple of 8 blocks for the tensor form).
	w := (end-1)/bs + 1
	if flex {
		// The tensor form's program hash leaves the page table out
		// (sdpa_device_operation.cpp:399-400), so the program compiled at
		// the first chunk's width would serve every later one: one width,
		// the cache's blocks padded to a multiple of 8, for every chunk.
		w = (e.opt.NumBlocks + 7) / 8 * 8
	}
	row := make([]int32, w)
	for i := range row {
		row[i] = PagePad
	}
	copy(row, blocks[:(end-1)/bs+1])
	// The chunk's slice for paged_fill_cache: chunk_start_block =
	// start/bs, the chunk's block count, zero-padded.
	first, n := start/bs, (len(toks)+bs-1)/bs
	slice := make([]int32, n)
	copy(slice, blocks[first:min(len(blocks), first+n)])
	var tmp []tt.Tensor
	defer func() { e.freeTensors(tmp) }()
	upload := func(spec tt.Spec, h tt.HostTensor) (tt.Tensor, error) {
		t, err := e.dev.Allocate(spec)
		if err != nil {
			return t, err
		}
		tmp = append(tmp, t)
		return t, e.write(&st, t, h)
	}
	sdpaPT, err := upload(dramRM(tt.INT32, 1, w), tt.HostInt32([]int{1, w}, tt.RowMajor, row))
	if err != nil {
		return nil, fmt.Errorf("chunk page table: %w", err)
	}
	fillPT, err := upload(dramRM(tt.INT32, 1, n), tt.HostInt32([]int{1, n}, tt.RowMajor, slice))
	if err != nil {
		return nil, fmt.Errorf("chunk page-table slice: %w", err)
	}
	plan := prefillPlan{start: start, fillPT: fillPT, chunkPT: &sdpaPT}
	key := prefillKey{t: len(toks), w: n, start: start, sdpaW: w}
	if flex {
		cs, err := upload(dramRM(tt.INT32, 1), tt.HostInt32([]int{1}, tt.RowMajor, []int32{int32(start)}))
		if err != nil {
			return nil, fmt.Errorf("chunk start: %w", err)
		}
		plan.chunkStart = &cs
		key.start = chunkKeyTensor
	}
	st.Regime = RegimeCold
	if e.prefillWarm[key] {
		st.Regime = RegimeWarm
	}
	outs, err := e.prefillForward(&st, seq, toks, plan)
	if err != nil {
		return nil, err
	}
	if err := e.seedDecode(&st, s, end, uint32(outs[len(outs)-1].Token)); err != nil {
		e.mirror = false
		return nil, err
	}
	e.prefillWarm[key] = true
	if e.opt.Verify {
		if err := e.verify(); err != nil {
			return nil, err
		}
	}
	e.account(st, true)
	e.stats.PrefillTokens += len(toks)
	return outs, nil
}

// Verify runs k tokens per entry at positions Pos..Pos+k-1 as k rounds of
// decode steps (see above). Every entry is validated before anything is
// written.
func (e *Engine) Verify(batch []VerifyStep) ([][]Output, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	taken := make([]bool, e.opt.Capacity)
	slots := make([]int, len(batch))
	rounds := 0
	for i, st := range batch {
		for _, o := range batch[:i] {
			if o.Seq == st.Seq {
				return nil, fmt.Errorf("qwen3: engine: sequence %d appears twice in one verify batch", st.Seq)
			}
		}
		if len(st.Tokens) == 0 {
			return nil, fmt.Errorf("qwen3: engine: verify of sequence %d with no tokens", st.Seq)
		}
		for j, t := range st.Tokens {
			if err := e.checkReq(t, st.Pos+j, st.Blocks); err != nil {
				return nil, fmt.Errorf("qwen3: engine: verify of sequence %d: %w", st.Seq, err)
			}
		}
		s, live := e.seqSlot[st.Seq]
		if !live {
			if s = e.freeSlot(taken); s < 0 {
				return nil, fmt.Errorf("qwen3: engine: verify of sequence %d: all %d slots in use", st.Seq, e.opt.Capacity)
			}
		}
		taken[s] = true
		slots[i] = s
		rounds = max(rounds, len(st.Tokens))
	}
	outs := make([][]Output, len(batch))
	for i, st := range batch {
		outs[i] = make([]Output, len(st.Tokens))
	}
	bs := e.opt.BlockSize
	for _, st := range batch {
		e.longestFloor = max(e.longestFloor, (st.Pos+len(st.Tokens)-1)/bs+1)
	}
	defer func() { e.longestFloor = 0 }()
	for j := range rounds {
		req := make([]slotReq, e.opt.Capacity)
		for i, st := range batch {
			if j < len(st.Tokens) {
				last := st.Pos + len(st.Tokens) - 1
				req[slots[i]] = slotReq{active: true, seq: st.Seq, tok: st.Tokens[j], pos: st.Pos + j, blocks: st.Blocks[:last/bs+1]}
			}
		}
		res, err := e.step(req, true)
		if err != nil {
			return nil, fmt.Errorf("qwen3: engine: verify round %d: %w", j, err)
		}
		for i, st := range batch {
			if j < len(st.Tokens) {
				outs[i][j] = res[slots[i]]
			}
		}
	}
	for i, st := range batch {
		s := slots[i]
		e.slotLive[s], e.slotSeq[s] = true, st.Seq
		e.seqSlot[st.Seq] = s
	}
	// An entry with fewer tokens sat out the last rounds: leave the page
	// table and decode inputs as one decode step of every entry at its last
	// position would (as Prefill leaves them after a prompt).
	if len(batch) > 1 && slices.ContainsFunc(batch, func(v VerifyStep) bool { return len(v.Tokens) < rounds }) {
		var st StepStats
		req := make([]slotReq, e.opt.Capacity)
		seeds := make([]slotSeed, len(batch))
		for i, v := range batch {
			last := v.Pos + len(v.Tokens) - 1
			req[slots[i]] = slotReq{active: true, seq: v.Seq, tok: v.Tokens[len(v.Tokens)-1], pos: last, blocks: v.Blocks[:last/bs+1]}
			seeds[i] = slotSeed{slots[i], last + 1, uint32(outs[i][len(v.Tokens)-1].Token)}
		}
		table, err := e.pageTable(&st, req)
		if err == nil {
			err = e.writePageTable(&st, table)
		}
		if err == nil {
			err = e.seedSlots(&st, seeds)
		}
		if err != nil {
			e.mirror = false
			return nil, fmt.Errorf("qwen3: engine: verify: re-seed the decode inputs: %w", err)
		}
	}
	return outs, nil
}

// CopyBlocks copies every layer's keys and values of each Src block over
// its Dst block with slice + fill_cache (see above). Ids must lie in [0,
// NumBlocks), no block may be the Dst of two copies, and no block both a
// Src and a Dst; otherwise nothing changes.
func (e *Engine) CopyBlocks(copies []BlockCopy) error {
	if e.closed {
		return ErrEngineClosed
	}
	srcs, dsts := map[int32]bool{}, map[int32]bool{}
	for _, c := range copies {
		for _, b := range []int32{c.Src, c.Dst} {
			if b < 0 || int(b) >= e.opt.NumBlocks {
				return fmt.Errorf("qwen3: engine: block copy %d->%d: block id %d out of range [0,%d)", c.Src, c.Dst, b, e.opt.NumBlocks)
			}
		}
		if dsts[c.Dst] {
			return fmt.Errorf("qwen3: engine: block copy %d->%d: block %d is the destination of two copies", c.Src, c.Dst, c.Dst)
		}
		srcs[c.Src], dsts[c.Dst] = true, true
	}
	for _, c := range copies {
		if dsts[c.Src] {
			return fmt.Errorf("qwen3: engine: block copy %d->%d: block %d is both a source and a destination", c.Src, c.Dst, c.Src)
		}
	}
	kvh, bs, hd := e.cfg.NumKeyValueHeads, e.opt.BlockSize, e.cfg.HeadDim
	o := &e.ops
	for _, c := range copies {
		for l := range e.w.layers {
			L := &e.w.layers[l]
			for _, cache := range [2]tt.Tensor{L.kc, L.vc} {
				outs, err := e.dev.Run(reuse(&o.Slice, tt.Slice{Input: cache,
					Begin: []int{int(c.Src), 0, 0, 0}, End: []int{int(c.Src) + 1, kvh, bs, hd}}))
				if err != nil {
					return fmt.Errorf("qwen3: engine: block copy %d->%d, layer %d: slice: %w", c.Src, c.Dst, l, err)
				}
				_, err = e.dev.Run(reuse(&o.FillCache, tt.FillCache{Cache: cache, Input: outs[0], BatchIdx: int(c.Dst)}))
				e.freeTensors(outs)
				if err != nil {
					return fmt.Errorf("qwen3: engine: block copy %d->%d, layer %d: fill_cache: %w", c.Src, c.Dst, l, err)
				}
			}
		}
	}
	return nil
}
