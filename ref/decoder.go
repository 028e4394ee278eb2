package ref

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// Options configure a Decoder.
type Options struct {
	// BlockSize is the number of positions per KV block (0 means 32).
	BlockSize int
	// NumBlocks is the number of KV blocks the cache holds (0 means 64).
	// Block ids in tables must lie in [0, NumBlocks).
	NumBlocks int
	// Threads is the number of goroutines a matrix-vector product is split
	// over (0 means GOMAXPROCS). Results do not depend on it.
	Threads int
	// Products, when set, is told each matrix job of a forward pass once it
	// is done: the matrices that shared the inputs (q, k and v together;
	// gate and up together; o, down and lm_head each alone), each as Hugging
	// Face stores it (len(ws[m])/cols rows of cols values); the inputs,
	// widened from bf16; and outs[m][b], matrix m's output row for input b
	// (MatRows' bits). Everything passed belongs to the decoder and is valid
	// during the call only; Products must not change it.
	Products func(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16)
}

// Default option values.
const (
	DefaultBlockSize = 32
	DefaultNumBlocks = 64
)

// ErrClosed is returned by a Decoder used after Close.
var ErrClosed = errors.New("ref: decoder is closed")

// Decoder is the bf16 CPU oracle: a qwen3.Decoder over a paged CPU KV cache
// (KVStore) that runs every position through the kernels of this package in
// one fixed decomposition. It is safe for use by one goroutine at a time
// (calls are serialised by a mutex).
type Decoder struct {
	mu     sync.Mutex
	w      *qwen3.Weights
	cfg    qwen3.Config
	bs     int
	kv     *KVStore
	pool   *pool
	closed bool
	live   map[qwen3.SeqID]bool

	eps   float32
	scale float32

	slots []*slot // activation buffers, one per batch entry (grown on demand)

	// the current layer's attention job, its stored method value, and one
	// scratch per pool part (grown on demand)
	attn   attnJob
	attnFn func(part, parts int)
	scr    []attnScratch

	// the current per-slot job and its stored method value
	sj      slotJob
	slotsFn func(part, parts int)

	// the current matrix job and its stored method value (no allocation per
	// dispatch)
	job   matJob
	jobFn func(part, parts int)
	// per weight matrix (keyed by its first element) and number of chunks,
	// the cached ranges of its chunks
	ranges map[rangeKey][]partRange

	products func(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16)
	prodWs   [3][]bf16.BF16
	prodOuts [3][][]bf16.BF16
}

var _ qwen3.Decoder = (*Decoder)(nil)

// slot holds one batch entry's activations.
type slot struct {
	x, a, o   []bf16.BF16 // residual stream, normed input, projection out [hidden]
	xf        []float32   // widened matmul input, max(hidden, qdim, inter)
	q, attn   []bf16.BF16 // [qdim]
	k, v      []bf16.BF16 // [kvdim]
	gate, up  []bf16.BF16 // [inter]
	logits    []bf16.BF16 // [vocab]
	cos, sin  []bf16.BF16 // [headDim]
	tok       int
	pos       int
	blocks    []int32
	seq       qwen3.SeqID
	outLogits []float32
	outToken  int32
}

// matSpec is one matrix of a job: rows of w written into dsts[b].
type matSpec struct {
	w    []bf16.BF16
	rows int
	dsts [][]bf16.BF16
	// ranges[c] is the expRange of chunk c's rows, filled by the worker
	// that first runs the chunk (see partRange).
	ranges []partRange
}

// rangeKey names a split of a weight matrix into chunks.
type rangeKey struct {
	w      *bf16.BF16
	chunks int
}

// partRange caches the expRange of one chunk of a weight matrix.
type partRange struct {
	r     expRange
	known bool
}

// matJob is up to three matrices with the same input width, each split
// into chunks of contiguous rows (chunkRows). The pool's parts take the
// (matrix, chunk) items in order from a shared counter, so a part that
// finishes early takes more; every row is computed the same way whoever
// computes it, so the result does not depend on who takes which chunk.
type matJob struct {
	mats   [3]matSpec
	nm     int
	cols   int
	xs     [][]float32
	xr     expRange // union of the inputs' ranges
	chunks int      // per matrix
	next   atomic.Int64
}

// chunksPerPart is the number of chunks per pool part a matrix is split
// into for a batch of more than one on more than one thread, and
// chunksPerPartB1 for a batch of one; one thread takes one chunk. The
// parts take chunks as they finish, so a part that is held up (a shared
// machine) no longer holds up the step. A batch of one streams the
// weights at memory speed and loses in the breaks of its runs what it
// gains in balance if the chunks are small: at the qwen3-0.6b shape on two
// threads, four chunks a part decoded about 2% faster than one over eleven
// alternating pairs (seven won, three lost).
const (
	chunksPerPart   = 8
	chunksPerPartB1 = 4
)

// chunkRows is the row range of chunk c of n over rows rows: the bounds
// are multiples of four rows (the row kernels' block) but for the end.
func chunkRows(rows, c, n int) (lo, hi int) {
	lo = rows * c / n &^ 3
	hi = rows
	if c+1 < n {
		hi = rows * (c + 1) / n &^ 3
	}
	return lo, hi
}

func (d *Decoder) runJob(part, parts int) {
	j := &d.job
	for {
		it := int(j.next.Add(1) - 1)
		if it >= j.nm*j.chunks {
			return
		}
		s := &j.mats[it/j.chunks]
		c := it % j.chunks
		lo, hi := chunkRows(s.rows, c, j.chunks)
		if lo == hi {
			continue
		}
		pr := &s.ranges[c]
		if !pr.known {
			pr.r, pr.known = bf16Range(s.w[lo*j.cols:hi*j.cols]), true
		}
		matRowsF(s.dsts, s.w, j.xs, j.cols, lo, hi, exactProducts(pr.r, j.xr))
	}
}

// New makes a Decoder for w. It starts a worker pool; call Close to stop it.
func New(w *qwen3.Weights, opt Options) (*Decoder, error) {
	if w == nil {
		return nil, errors.New("ref: nil weights")
	}
	cfg := w.Config
	if err := checkWeights(w); err != nil {
		return nil, err
	}
	if opt.BlockSize < 0 || opt.NumBlocks < 0 || opt.Threads < 0 {
		return nil, fmt.Errorf("ref: negative option in %+v", opt)
	}
	if opt.BlockSize == 0 {
		opt.BlockSize = DefaultBlockSize
	}
	if opt.NumBlocks == 0 {
		opt.NumBlocks = DefaultNumBlocks
	}
	if opt.Threads == 0 {
		opt.Threads = runtime.GOMAXPROCS(0)
	}
	kv, err := NewKVStore(cfg.NumHiddenLayers, opt.NumBlocks, opt.BlockSize, cfg.NumKeyValueHeads, cfg.HeadDim)
	if err != nil {
		return nil, err
	}
	d := &Decoder{
		w: w, cfg: cfg, bs: opt.BlockSize, kv: kv,
		live:     map[qwen3.SeqID]bool{},
		ranges:   map[rangeKey][]partRange{},
		eps:      float32(cfg.RMSNormEps),
		scale:    AttnScale(cfg.HeadDim),
		products: opt.Products,
	}
	d.jobFn = d.runJob
	d.attnFn = d.runAttn
	d.slotsFn = d.runSlots
	d.scr = make([]attnScratch, opt.Threads)
	d.growSlots(1)
	d.growAttn(min(opt.NumBlocks*opt.BlockSize, max(cfg.MaxPositionEmbeddings, 1)))
	d.pool = newPool(opt.Threads)
	return d, nil
}

func checkWeights(w *qwen3.Weights) error {
	c := w.Config
	if c.HiddenSize <= 0 || c.IntermediateSize <= 0 || c.NumHiddenLayers <= 0 ||
		c.NumAttentionHeads <= 0 || c.NumKeyValueHeads <= 0 || c.HeadDim <= 0 || c.VocabSize <= 0 {
		return fmt.Errorf("ref: bad model shape %+v", c)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("ref: %d attention heads not a multiple of %d kv heads", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("ref: odd head_dim %d", c.HeadDim)
	}
	h, q, kv, in, v := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.VocabSize
	chk := func(name string, got, want int) error {
		if got != want {
			return fmt.Errorf("ref: weight %s has %d values, want %d", name, got, want)
		}
		return nil
	}
	if err := errors.Join(chk("embed", len(w.Embed), v*h), chk("lm_head", len(w.LMHead), v*h),
		chk("norm", len(w.Norm), h)); err != nil {
		return err
	}
	if len(w.Layers) != c.NumHiddenLayers {
		return fmt.Errorf("ref: %d layers, config says %d", len(w.Layers), c.NumHiddenLayers)
	}
	for i, L := range w.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		if err := errors.Join(
			chk(p+"input_layernorm", len(L.InputNorm), h), chk(p+"q_proj", len(L.Q), q*h),
			chk(p+"k_proj", len(L.K), kv*h), chk(p+"v_proj", len(L.V), kv*h),
			chk(p+"o_proj", len(L.O), h*q), chk(p+"q_norm", len(L.QNorm), c.HeadDim),
			chk(p+"k_norm", len(L.KNorm), c.HeadDim), chk(p+"post_attention_layernorm", len(L.PostNorm), h),
			chk(p+"gate_proj", len(L.Gate), in*h), chk(p+"up_proj", len(L.Up), in*h),
			chk(p+"down_proj", len(L.Down), h*in)); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) growSlots(n int) {
	c := d.cfg
	wide := max(c.HiddenSize, c.QDim(), c.IntermediateSize)
	for len(d.slots) < n {
		d.slots = append(d.slots, &slot{
			x: make([]bf16.BF16, c.HiddenSize), a: make([]bf16.BF16, c.HiddenSize),
			o: make([]bf16.BF16, c.HiddenSize), xf: make([]float32, wide),
			q: make([]bf16.BF16, c.QDim()), attn: make([]bf16.BF16, c.QDim()),
			k: make([]bf16.BF16, c.KVDim()), v: make([]bf16.BF16, c.KVDim()),
			gate: make([]bf16.BF16, c.IntermediateSize), up: make([]bf16.BF16, c.IntermediateSize),
			logits: make([]bf16.BF16, c.VocabSize),
			cos:    make([]bf16.BF16, c.HeadDim), sin: make([]bf16.BF16, c.HeadDim),
		})
	}
	if cap(d.job.xs) < n {
		d.job.xs = make([][]float32, 0, n)
		for m := range d.job.mats {
			d.job.mats[m].dsts = make([][]bf16.BF16, 0, n)
		}
	}
}

// attnScratch is one pool part's attention buffers: one kv head's gathered
// keys and values and the probabilities, for up to len(probs) positions.
type attnScratch struct {
	kbuf, vbuf []bf16.BF16
	probs      []float32
}

func (d *Decoder) growAttn(n int) {
	for i := range d.scr {
		sc := &d.scr[i]
		if len(sc.probs) >= n {
			continue
		}
		m := max(n, 2*len(sc.probs))
		sc.kbuf = make([]bf16.BF16, m*d.cfg.HeadDim)
		sc.vbuf = make([]bf16.BF16, m*d.cfg.HeadDim)
		sc.probs = make([]float32, m)
	}
}

// attnJob is one layer's attention for every slot: the items are the
// (slot, kv head) pairs in order, split into contiguous runs, one per pool
// part. An item normalises and rotates its query heads of the slot's q,
// reads the layer's cache and writes its heads' part of the slot's attn
// and of its widened copy in xf (the next matrix's input), so items are
// independent and the result does not depend on the split.
type attnJob struct {
	slots []*slot
	layer int
}

func (d *Decoder) runAttn(part, parts int) {
	c := d.cfg
	hd, group, kvHeads := c.HeadDim, c.Group(), c.NumKeyValueHeads
	j := &d.attn
	qnorm := d.w.Layers[j.layer].QNorm
	sc := &d.scr[part]
	items := len(j.slots) * kvHeads
	for it := part * items / parts; it < (part+1)*items/parts; it++ {
		s, kvh := j.slots[it/kvHeads], it%kvHeads
		n := s.pos + 1
		if err := d.kv.Gather(j.layer, kvh, s.blocks, n, sc.kbuf, sc.vbuf); err != nil {
			panic("ref: internal error: " + err.Error()) // validated before
		}
		for g := 0; g < group; g++ {
			qh := kvh*group + g
			q, out := s.q[qh*hd:(qh+1)*hd], s.attn[qh*hd:(qh+1)*hd]
			RMSNorm(q, q, qnorm, d.eps)
			Rope(q, q, s.cos, s.sin)
			Attend(out, q, sc.kbuf, sc.vbuf, n, d.scale, sc.probs)
			bf16.ToFloat32s(s.xf[qh*hd:(qh+1)*hd], out)
		}
	}
}

// Config is the model the decoder runs.
func (d *Decoder) Config() qwen3.Config { return d.cfg }

// BlockSize is the number of positions per KV block.
func (d *Decoder) BlockSize() int { return d.bs }

// NumBlocks is the number of KV blocks of the cache.
func (d *Decoder) NumBlocks() int { return d.kv.numBlocks }

// KV exposes the decoder's paged cache (for tests that compare caches).
func (d *Decoder) KV() *KVStore { return d.kv }

// Close stops the worker pool. The decoder cannot be used afterwards.
// Close is idempotent.
func (d *Decoder) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.pool.close()
}

// checkPos validates a token at a position against the table.
func (d *Decoder) checkPos(tok int32, pos int, blocks []int32) error {
	if tok < 0 || int(tok) >= d.cfg.VocabSize {
		return fmt.Errorf("ref: token id %d out of range [0,%d)", tok, d.cfg.VocabSize)
	}
	if pos < 0 {
		return fmt.Errorf("ref: negative position %d", pos)
	}
	return d.checkTable(pos, blocks)
}

// checkTable validates that blocks covers positions 0..pos with block ids in
// range. Entries past the one holding pos are not looked at.
func (d *Decoder) checkTable(pos int, blocks []int32) error {
	need := pos/d.bs + 1
	if len(blocks) < need {
		return fmt.Errorf("ref: block table of %d entries does not cover position %d (block size %d)", len(blocks), pos, d.bs)
	}
	for i, b := range blocks[:need] {
		if b < 0 || int(b) >= d.kv.numBlocks {
			return fmt.Errorf("ref: block id %d (table entry %d) out of range [0,%d)", b, i, d.kv.numBlocks)
		}
	}
	return nil
}

// Prefill runs the prompt one position at a time through exactly the decode
// path, writing the KV of positions 0..len(Tokens)-1, and returns one Output
// per position. The sequence must not be live (prefilled or decoded and not
// finished). Inputs are validated before anything is written.
func (d *Decoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if d.live[p.Seq] {
		return nil, fmt.Errorf("ref: prefill of sequence %d, which is already live", p.Seq)
	}
	if len(p.Tokens) == 0 {
		return nil, fmt.Errorf("ref: prefill of sequence %d with an empty prompt", p.Seq)
	}
	for i, t := range p.Tokens {
		if t < 0 || int(t) >= d.cfg.VocabSize {
			return nil, fmt.Errorf("ref: prompt position %d: token id %d out of range [0,%d)", i, t, d.cfg.VocabSize)
		}
	}
	if err := d.checkTable(len(p.Tokens)-1, p.Blocks); err != nil {
		return nil, fmt.Errorf("ref: prefill of sequence %d: %w", p.Seq, err)
	}
	outs := make([]qwen3.Output, len(p.Tokens))
	for i, t := range p.Tokens {
		s := d.slots[0]
		s.tok, s.pos, s.blocks, s.seq = int(t), i, p.Blocks, p.Seq
		d.forward(d.slots[:1])
		outs[i] = qwen3.Output{Seq: p.Seq, Pos: i, Token: s.outToken, Logits: s.outLogits}
	}
	d.live[p.Seq] = true
	return outs, nil
}

// Decode runs one step for each entry of batch. A sequence need not have
// been prefilled here (a sequence is just its tokens and its table; the KV
// of positions before Pos is whatever the cache holds). The batch must not
// name a sequence twice. Every entry is validated before anything is
// written; on error nothing changes.
func (d *Decoder) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	for i, st := range batch {
		for _, o := range batch[:i] {
			if o.Seq == st.Seq {
				return nil, fmt.Errorf("ref: sequence %d appears twice in one decode batch", st.Seq)
			}
		}
		if err := d.checkPos(st.Token, st.Pos, st.Blocks); err != nil {
			return nil, fmt.Errorf("ref: decode of sequence %d: %w", st.Seq, err)
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	d.growSlots(len(batch))
	for i, st := range batch {
		s := d.slots[i]
		s.tok, s.pos, s.blocks, s.seq = int(st.Token), st.Pos, st.Blocks, st.Seq
	}
	d.forward(d.slots[:len(batch)])
	outs := make([]qwen3.Output, len(batch))
	for i, st := range batch {
		s := d.slots[i]
		outs[i] = qwen3.Output{Seq: st.Seq, Pos: st.Pos, Token: s.outToken, Logits: s.outLogits}
		d.live[st.Seq] = true
	}
	return outs, nil
}

// Finish forgets a live sequence. The KV cache is not cleared (the blocks
// belong to the caller again). Finishing a sequence that is not live (never
// prefilled or decoded, or already finished) is an error.
func (d *Decoder) Finish(seq qwen3.SeqID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if !d.live[seq] {
		return fmt.Errorf("ref: finish of sequence %d, which is not live", seq)
	}
	delete(d.live, seq)
	return nil
}

// matmul runs up to three matrices of width cols over the slots' widened
// inputs (slot.xf[:cols]) on the pool. dst selects each matrix's output
// buffer of a slot.
func (d *Decoder) matmul(slots []*slot, cols int, ws [3][]bf16.BF16, dsts [3]func(*slot) []bf16.BF16) {
	j := &d.job
	j.cols = cols
	j.xs = j.xs[:0]
	j.xr = emptyRange
	for _, s := range slots {
		j.xs = append(j.xs, s.xf[:cols])
		j.xr = j.xr.union(f32Range(s.xf[:cols]))
	}
	j.nm = 0
	j.chunks = d.pool.parts
	switch {
	case d.pool.parts > 1 && len(slots) > 1:
		j.chunks = chunksPerPart * d.pool.parts
	case d.pool.parts > 1:
		j.chunks = chunksPerPartB1 * d.pool.parts
	}
	j.next.Store(0)
	for m, w := range ws {
		if w == nil {
			continue
		}
		spec := &j.mats[j.nm]
		spec.w = w
		spec.rows = len(w) / cols
		key := rangeKey{&w[0], j.chunks}
		spec.ranges = d.ranges[key]
		if spec.ranges == nil {
			spec.ranges = make([]partRange, j.chunks)
			d.ranges[key] = spec.ranges
		}
		spec.dsts = spec.dsts[:0]
		for _, s := range slots {
			spec.dsts = append(spec.dsts, dsts[m](s))
		}
		j.nm++
	}
	d.pool.run(d.jobFn)
	if d.products != nil {
		for m := range j.nm {
			d.prodWs[m], d.prodOuts[m] = j.mats[m].w, j.mats[m].dsts
		}
		d.products(d.prodWs[:j.nm], cols, j.xs, d.prodOuts[:j.nm])
	}
}

func selQ(s *slot) []bf16.BF16      { return s.q }
func selK(s *slot) []bf16.BF16      { return s.k }
func selV(s *slot) []bf16.BF16      { return s.v }
func selO(s *slot) []bf16.BF16      { return s.o }
func selGate(s *slot) []bf16.BF16   { return s.gate }
func selUp(s *slot) []bf16.BF16     { return s.up }
func selLogits(s *slot) []bf16.BF16 { return s.logits }

// slotStage names the per-slot work between two matrix jobs (see slotWork).
type slotStage int

const (
	stageInput  slotStage = iota // layer input: x (embedding, or x + o), norm, widen
	stagePost                    // x += o, post-attention norm, widen
	stageAct                     // SwiGLU of gate and up, widen
	stageFinal                   // x += o, final norm, widen
	stageLogits                  // logits widened into a fresh slice, argmax
)

// slotJob is one stage for every slot: the slots are split into contiguous
// runs, one per pool part. A slot's work reads and writes that slot only,
// so the result does not depend on the split.
type slotJob struct {
	slots []*slot
	stage slotStage
	layer int
}

func (d *Decoder) runSlots(part, parts int) {
	j := &d.sj
	n := len(j.slots)
	for i := part * n / parts; i < (part+1)*n/parts; i++ {
		d.slotWork(j.slots[i], j.stage, j.layer)
	}
}

// perSlot runs a stage for every slot: on the pool, or on the caller for a
// single slot.
func (d *Decoder) perSlot(slots []*slot, stage slotStage, layer int) {
	if len(slots) == 1 {
		d.slotWork(slots[0], stage, layer)
		return
	}
	d.sj = slotJob{slots: slots, stage: stage, layer: layer}
	d.pool.run(d.slotsFn)
	d.sj.slots = nil
}

// slotWork is one slot's work of a stage at a layer. The residual add of a
// layer's MLP is done by the stage after it (the next layer's input or the
// final norm).
func (d *Decoder) slotWork(s *slot, stage slotStage, layer int) {
	c, w := d.cfg, d.w
	switch stage {
	case stageInput:
		if layer == 0 {
			Embedding(s.x, w.Embed, s.tok)
			RopeTable(c.RopeTheta, c.HeadDim, s.pos, s.cos, s.sin)
		} else {
			Add(s.x, s.x, s.o)
		}
		RMSNorm(s.a, s.x, w.Layers[layer].InputNorm, d.eps)
		bf16.ToFloat32s(s.xf, s.a)
	case stagePost:
		Add(s.x, s.x, s.o)
		RMSNorm(s.a, s.x, w.Layers[layer].PostNorm, d.eps)
		bf16.ToFloat32s(s.xf, s.a)
	case stageAct:
		SiluMul(s.gate, s.gate, s.up)
		bf16.ToFloat32s(s.xf, s.gate)
	case stageFinal:
		Add(s.x, s.x, s.o)
		RMSNorm(s.a, s.x, w.Norm, d.eps)
		bf16.ToFloat32s(s.xf, s.a)
	case stageLogits:
		out := make([]float32, c.VocabSize)
		bf16.ToFloat32s(out, s.logits)
		s.outLogits = out
		s.outToken = qwen3.Argmax(out)
	}
}

// forward runs one position for each slot (tok, pos, blocks set and
// validated) and sets outLogits and outToken. The work between matrix
// jobs runs per slot on the pool (perSlot, and the query heads inside the
// attention job); only the key heads and the cache writes run on the
// caller, in slot order.
func (d *Decoder) forward(slots []*slot) {
	c := d.cfg
	h, qd, inter, hd := c.HiddenSize, c.QDim(), c.IntermediateSize, c.HeadDim
	w := d.w
	for l := range w.Layers {
		L := &w.Layers[l]
		d.perSlot(slots, stageInput, l)
		d.matmul(slots, h, [3][]bf16.BF16{L.Q, L.K, L.V}, [3]func(*slot) []bf16.BF16{selQ, selK, selV})
		for _, s := range slots {
			for i := 0; i < c.NumKeyValueHeads; i++ {
				kh := s.k[i*hd : (i+1)*hd]
				RMSNorm(kh, kh, L.KNorm, d.eps)
				Rope(kh, kh, s.cos, s.sin)
			}
			if err := d.kv.Write(l, s.blocks, s.pos, s.k, s.v); err != nil {
				panic("ref: internal error: " + err.Error()) // validated before
			}
			d.growAttn(s.pos + 1)
		}
		d.attn = attnJob{slots: slots, layer: l}
		d.pool.run(d.attnFn)
		d.attn.slots = nil
		d.matmul(slots, qd, [3][]bf16.BF16{L.O}, [3]func(*slot) []bf16.BF16{selO})
		d.perSlot(slots, stagePost, l)
		d.matmul(slots, h, [3][]bf16.BF16{L.Gate, L.Up}, [3]func(*slot) []bf16.BF16{selGate, selUp})
		d.perSlot(slots, stageAct, l)
		d.matmul(slots, inter, [3][]bf16.BF16{L.Down}, [3]func(*slot) []bf16.BF16{selO})
	}
	d.perSlot(slots, stageFinal, 0)
	d.matmul(slots, h, [3][]bf16.BF16{w.LMHead}, [3]func(*slot) []bf16.BF16{selLogits})
	d.perSlot(slots, stageLogits, 0)
}
