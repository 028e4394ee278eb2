package proptest

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// oracle is the runner's ref.Decoder with a memo of trajectories shared by
// every run in the process: what ref computes for a sequence at position p
// (its output and the keys and values it writes) depends only on the
// weights and the tokens fed at positions 0..p (ref's numerics contract:
// never on the batch, the block table or the other sequences). Schedules
// of a campaign admit the same prompts again and again (a prompt is a
// function of its sequence id, salt and length), so most positions are
// answered from the memo: the output is the memo's and the keys and values
// are written into ref's cache where ref would write them, so the cache
// audit and later computed positions see exactly what ref would hold.
// Positions not in the memo are computed by ref (one sequence's prefill
// position by position, as ref.Decoder.Prefill does; a decode's missing
// sequences as one batch) and added to it.
type oracle struct {
	d    *ref.Decoder
	memo *trajMemo
	cfg  qwen3.Config
	bs   int
	// at is each live sequence's node for its last fed position (nil:
	// off the memo, every later position is computed).
	at   map[qwen3.SeqID]*trajNode
	live map[qwen3.SeqID]bool
	// written: the cache rows the calls since the last takeWritten may
	// have written (block*bs + row).
	written []int
	// padTiles: the engine under test prefills with paged_fill_cache
	// (qwen3.PrefillProgram), which writes the prompt's last tile whole.
	padTiles bool
	// share, when set, is told ref's matrix products (rowShare).
	share func(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16)
}

// useOracleMemo turns the memo on; tests turn it off to show it changes
// nothing.
var useOracleMemo = true

// maxMemoNodes bounds the memo (about 2.5 KiB a node for the tiny model);
// past it positions are computed and not remembered.
const maxMemoNodes = 1 << 15

// trajMemo is the trie of token sequences fed to ref for one set of
// weights; a node is one position.
type trajMemo struct {
	mu    sync.Mutex
	root  trajNode
	nodes int
}

type trajNode struct {
	tok int32
	pos int
	out qwen3.Output // Seq is not meaningful; Logits nil (see logits)
	// logits are out's logits as bf16 (exact: ref's logits are widened
	// bf16), half the memory of the float32 ones in a memo that lives as
	// long as the process.
	logits []bf16.BF16
	k, v   []bf16.BF16 // [layer][kvHeads*headDim]
	kids   []*trajNode
}

func (n *trajNode) child(tok int32) *trajNode {
	for _, c := range n.kids {
		if c.tok == tok {
			return c
		}
	}
	return nil
}

var memos sync.Map // *qwen3.Weights -> *trajMemo

// memoHits and memoMisses count positions answered by the memo and
// computed by ref (for tests and benchmarks).
var memoHits, memoMisses atomic.Int64

func memoStats() (hits, misses int64) { return memoHits.Load(), memoMisses.Load() }

func newOracle(w *qwen3.Weights, opt ref.Options) (*oracle, error) {
	m, _ := memos.LoadOrStore(w, &trajMemo{root: trajNode{pos: -1}})
	o := &oracle{memo: m.(*trajMemo), cfg: w.Config,
		at: map[qwen3.SeqID]*trajNode{}, live: map[qwen3.SeqID]bool{}}
	opt.Products = o.products
	d, err := ref.New(w, opt)
	if err != nil {
		return nil, err
	}
	o.d, o.bs = d, d.BlockSize()
	return o, nil
}

func (o *oracle) products(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16) {
	if o.share != nil {
		o.share(ws, cols, xs, outs)
	}
}

func (o *oracle) Close()           { o.d.Close() }
func (o *oracle) KV() *ref.KVStore { return o.d.KV() }

// note records the cache row position pos of blocks may be written (the
// calls below write at most these; takeWritten hands them out).
func (o *oracle) note(blocks []int32, pos int) {
	if i := pos / o.bs; pos >= 0 && i < len(blocks) && blocks[i] >= 0 && int(blocks[i]) < o.d.KV().NumBlocks() {
		o.written = append(o.written, int(blocks[i])*o.bs+pos%o.bs)
	}
}

// takeWritten returns the cache rows (block*blockSize + row) ref may have
// written since the last take, and forgets them.
func (o *oracle) takeWritten() []int {
	w := o.written
	o.written = nil
	return w
}

// Prefill is ref.Decoder.Prefill; with padTiles, then the rows the
// engine's multi-token prefill writes past the prompt: paged_fill_cache
// copies whole 32-row tiles, so rows T..roundup32(T)-1 of the prompt's last
// block receive the tiles' padding rows (zeros). The oracle's store zeroes
// them too and reports them as written.
func (o *oracle) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	outs, err := o.prefill(p)
	if err != nil {
		return nil, err
	}
	if o.padTiles {
		if err := o.padPrompt(p); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// promptTileEnd is the end of the prompt's last 32-row tile: a prefill
// program's paged_fill_cache writes positions T..promptTileEnd(T)-1 too.
func promptTileEnd(T int) int { return (T + tt.TileSize - 1) / tt.TileSize * tt.TileSize }

// padPrompt zeroes (and notes) the tile padding rows past the prompt.
func (o *oracle) padPrompt(p qwen3.Prefill) error {
	return o.padRows(p.Seq, p.Blocks, len(p.Tokens))
}

// padRows zeroes (and notes) the rows end..promptTileEnd(end)-1 of blocks.
func (o *oracle) padRows(seq qwen3.SeqID, blocks []int32, end int) error {
	zero := make([]bf16.BF16, o.cfg.NumKeyValueHeads*o.cfg.HeadDim)
	for pos := end; pos < promptTileEnd(end); pos++ {
		if pos/o.bs >= len(blocks) {
			break
		}
		o.note(blocks, pos)
		for l := 0; l < o.cfg.NumHiddenLayers; l++ {
			if err := o.d.KV().Write(l, blocks, pos, zero, zero); err != nil {
				return fmt.Errorf("ref: prefill padding of sequence %d: %w", seq, err)
			}
		}
	}
	return nil
}

func (o *oracle) prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	for i := range p.Tokens {
		o.note(p.Blocks, i)
	}
	if !useOracleMemo {
		return o.d.Prefill(p)
	}
	if o.live[p.Seq] {
		return nil, fmt.Errorf("ref: prefill of sequence %d, which is already live", p.Seq)
	}
	if len(p.Tokens) == 0 {
		return nil, fmt.Errorf("ref: prefill of sequence %d with an empty prompt", p.Seq)
	}
	outs := make([]qwen3.Output, len(p.Tokens))
	o.at[p.Seq] = &o.memo.root
	for i, t := range p.Tokens {
		out, err := o.step(qwen3.Step{Seq: p.Seq, Token: t, Pos: i, Blocks: p.Blocks})
		if err != nil {
			delete(o.at, p.Seq)
			return nil, err
		}
		outs[i] = out
	}
	o.live[p.Seq] = true
	return outs, nil
}

// step runs one position of one sequence: from the memo, or by ref.
func (o *oracle) step(st qwen3.Step) (qwen3.Output, error) {
	if n := o.hit(st); n != nil {
		if err := o.writeKV(n, st); err != nil {
			return qwen3.Output{}, err
		}
		return o.output(n, st), nil
	}
	outs, err := o.d.Decode([]qwen3.Step{st})
	if err != nil {
		return qwen3.Output{}, err
	}
	o.remember(st, outs[0])
	return outs[0], nil
}

// parent is the memo node st's position follows: the root for position 0
// (ref's output and cache row there depend on the token alone, so a
// sequence a decode starts, or one fed position 0 again, is on the memo),
// else the sequence's node for position st.Pos-1; nil when the sequence is
// off the memo (it jumped, or its trajectory was not remembered).
func (o *oracle) parent(st qwen3.Step) *trajNode {
	if st.Pos == 0 {
		return &o.memo.root
	}
	if cur := o.at[st.Seq]; cur != nil && cur.pos == st.Pos-1 {
		return cur
	}
	return nil
}

// hit returns the memo's node for st, or nil; on a miss the sequence's
// position in the memo is kept for remember.
func (o *oracle) hit(st qwen3.Step) *trajNode {
	cur := o.parent(st)
	if cur == nil {
		o.at[st.Seq] = nil
		memoMisses.Add(1)
		return nil
	}
	o.memo.mu.Lock()
	n := cur.child(st.Token)
	o.memo.mu.Unlock()
	if n != nil {
		o.at[st.Seq] = n
		memoHits.Add(1)
	} else {
		memoMisses.Add(1)
	}
	return n
}

func (o *oracle) output(n *trajNode, st qwen3.Step) qwen3.Output {
	out := n.out
	out.Seq = st.Seq
	out.Logits = make([]float32, len(n.logits))
	bf16.ToFloat32s(out.Logits, n.logits)
	return out
}

// remember adds what ref computed for st under the sequence's node.
func (o *oracle) remember(st qwen3.Step, out qwen3.Output) {
	cur := o.parent(st)
	if cur == nil {
		o.at[st.Seq] = nil
		return
	}
	n := &trajNode{tok: st.Token, pos: st.Pos, out: out, logits: make([]bf16.BF16, len(out.Logits))}
	n.out.Seq, n.out.Logits = 0, nil
	bf16.Narrow(n.logits, out.Logits) // exact: ref's logits are widened bf16
	n.k, n.v = o.readKV(st)
	o.memo.mu.Lock()
	defer o.memo.mu.Unlock()
	if c := cur.child(st.Token); c != nil {
		o.at[st.Seq] = c // another run added it meanwhile (same bits)
		return
	}
	if o.memo.nodes >= maxMemoNodes {
		o.at[st.Seq] = nil
		return
	}
	o.memo.nodes++
	cur.kids = append(cur.kids, n)
	o.at[st.Seq] = n
}

// readKV copies the keys and values ref wrote for st, every layer.
func (o *oracle) readKV(st qwen3.Step) (k, v []bf16.BF16) {
	kvh, hd := o.cfg.NumKeyValueHeads, o.cfg.HeadDim
	per := kvh * hd
	k = make([]bf16.BF16, o.cfg.NumHiddenLayers*per)
	v = make([]bf16.BF16, len(k))
	b, row := int(st.Blocks[st.Pos/o.bs]), st.Pos%o.bs
	for l := 0; l < o.cfg.NumHiddenLayers; l++ {
		lk, lv := o.d.KV().Layer(l)
		for h := 0; h < kvh; h++ {
			off := ((b*kvh+h)*o.bs + row) * hd
			copy(k[l*per+h*hd:], lk[off:off+hd])
			copy(v[l*per+h*hd:], lv[off:off+hd])
		}
	}
	return k, v
}

// writeKV writes a memo node's keys and values where ref would.
func (o *oracle) writeKV(n *trajNode, st qwen3.Step) error {
	per := o.cfg.NumKeyValueHeads * o.cfg.HeadDim
	for l := 0; l < o.cfg.NumHiddenLayers; l++ {
		if err := o.d.KV().Write(l, st.Blocks, st.Pos, n.k[l*per:(l+1)*per], n.v[l*per:(l+1)*per]); err != nil {
			return fmt.Errorf("ref: decode of sequence %d: %w", st.Seq, err)
		}
	}
	return nil
}

// Decode is ref.Decoder.Decode: the sequences the memo knows are answered
// from it, the others computed by ref as one batch.
func (o *oracle) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	for _, st := range batch {
		o.note(st.Blocks, st.Pos)
	}
	if !useOracleMemo {
		return o.d.Decode(batch)
	}
	outs := make([]qwen3.Output, len(batch))
	var miss []qwen3.Step
	var missAt []int
	for i, st := range batch {
		for _, x := range batch[:i] {
			if x.Seq == st.Seq {
				return nil, fmt.Errorf("ref: sequence %d appears twice in one decode batch", st.Seq)
			}
		}
		if n := o.hit(st); n != nil {
			if err := o.writeKV(n, st); err != nil {
				return nil, err
			}
			outs[i] = o.output(n, st)
			continue
		}
		miss = append(miss, st)
		missAt = append(missAt, i)
	}
	if len(miss) > 0 {
		got, err := o.d.Decode(miss)
		if err != nil {
			return nil, err
		}
		for j, st := range miss {
			outs[missAt[j]] = got[j]
			o.remember(st, got[j])
		}
	}
	for _, st := range batch {
		o.live[st.Seq] = true
	}
	return outs, nil
}

// Finish is ref.Decoder.Finish.
func (o *oracle) Finish(seq qwen3.SeqID) error {
	if !useOracleMemo {
		return o.d.Finish(seq)
	}
	if !o.live[seq] {
		return fmt.Errorf("ref: finish of sequence %d, which is not live", seq)
	}
	delete(o.live, seq)
	delete(o.at, seq)
	return nil
}

// seat puts sequence seq on the memo at the node of its history hist
// (the tokens at positions 0..len(hist)-1), or off it when the memo does
// not hold that trajectory: after a prefix hit (its first positions are
// the donor's), a fork (the parent's) or a rollback (the accepted
// positions), the sequence's next position follows that node.
func (o *oracle) seat(seq qwen3.SeqID, hist []int32) {
	n := &o.memo.root
	o.memo.mu.Lock()
	for _, t := range hist {
		if n = n.child(t); n == nil {
			break
		}
	}
	o.memo.mu.Unlock()
	if len(hist) == 0 {
		n = nil
	}
	o.at[seq] = n
}

// PrefillFrom is ref.Decoder.PrefillFrom, position by position through
// the memo (ref computes a prefill from Start as single-position steps
// that read the cache below: ref/serving.go). Before a prefix hit the
// caller seats the sequence on its prefix (seat).
func (o *oracle) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	outs, err := o.prefillFrom(p)
	if err != nil {
		return nil, err
	}
	if o.padTiles && chunkRuns(p.Start, len(p.Tokens), o.bs) {
		if err := o.padRows(p.Seq, p.Blocks, p.Start+len(p.Tokens)); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// chunkRuns reports whether a PrefillFrom of n tokens from start runs a
// multi-token program (the engine's Prefill from 0, or a chunk from the
// first block boundary at or after start before its end), which writes
// the rows after its last position up to the 32-row tile's end.
func chunkRuns(start, n, bs int) bool {
	return start == 0 || (start+bs-1)/bs*bs < start+n
}

func (o *oracle) prefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	for i := range p.Tokens {
		o.note(p.Blocks, p.Start+i)
	}
	if !useOracleMemo {
		return o.d.PrefillFrom(p)
	}
	if p.Start == 0 && o.live[p.Seq] {
		return nil, fmt.Errorf("ref: prefill of sequence %d from 0, which is already live", p.Seq)
	}
	if p.Start == 0 {
		o.at[p.Seq] = &o.memo.root
	}
	outs := make([]qwen3.Output, len(p.Tokens))
	for i, t := range p.Tokens {
		out, err := o.step(qwen3.Step{Seq: p.Seq, Token: t, Pos: p.Start + i, Blocks: p.Blocks})
		if err != nil {
			return nil, err
		}
		outs[i] = out
	}
	o.live[p.Seq] = true
	return outs, nil
}

// Verify is ref.Decoder.Verify: round j is the decode batch of position
// Pos+j of every entry with more than j tokens (as ref runs it).
func (o *oracle) Verify(batch []qwen3.VerifyStep) ([][]qwen3.Output, error) {
	if !useOracleMemo {
		for _, st := range batch {
			for j := range st.Tokens {
				o.note(st.Blocks, st.Pos+j)
			}
		}
		return o.d.Verify(batch)
	}
	outs := make([][]qwen3.Output, len(batch))
	rounds := 0
	for i, st := range batch {
		outs[i] = make([]qwen3.Output, len(st.Tokens))
		rounds = max(rounds, len(st.Tokens))
	}
	for j := range rounds {
		var steps []qwen3.Step
		var at []int
		for i, st := range batch {
			if j < len(st.Tokens) {
				steps = append(steps, qwen3.Step{Seq: st.Seq, Token: st.Tokens[j], Pos: st.Pos + j, Blocks: st.Blocks})
				at = append(at, i)
			}
		}
		got, err := o.Decode(steps)
		if err != nil {
			return nil, err
		}
		for n, i := range at {
			outs[i][j] = got[n]
		}
	}
	return outs, nil
}

// CopyBlocks is ref.Decoder.CopyBlocks; every row of each destination
// block may change.
func (o *oracle) CopyBlocks(copies []qwen3.BlockCopy) error {
	if err := o.d.CopyBlocks(copies); err != nil {
		return err
	}
	for _, c := range copies {
		for row := range o.bs {
			o.written = append(o.written, int(c.Dst)*o.bs+row)
		}
	}
	return nil
}
