package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// The compute ops. Each reads its inputs' bytes from the simulated memory
// at the addresses its launch carries, computes with the ref kernels in the
// decomposition ref.Decoder uses, and writes its outputs' bytes back
// (tilized for TILE tensors; TILE padding elements are written as zero).
// Validation messages are offcard's own unless the semantics notes quote
// ttnn's text.

// runCompute runs the ops of this file, sdpa.go, fill.go, plusone.go,
// prefill.go and serving_ops.go;
// handled is false for any other op. outs are an Allocating op's outputs.
func (d *Device) runCompute(op tt.Op, outs []tt.Tensor) (handled bool, err error) {
	switch o := op.(type) {
	case *tt.Embedding:
		return true, d.embedding(*o)
	case *tt.RMSNorm:
		return true, d.rmsNorm(*o, outs[0])
	case *tt.Linear:
		return true, d.linear(*o)
	case *tt.NLPCreateQKVHeadsDecode:
		return true, d.createHeads(*o, outs)
	case *tt.NLPCreateQKVHeads:
		return true, d.createHeadsPrefill(*o, outs)
	case *tt.RotaryEmbeddingHF:
		if o.Prefill {
			return true, d.rotaryPrefill(*o, outs[0])
		}
		return true, d.rotary(rotaryArgs{name: o.Name(), in: o.Input, cos: o.Cos, sin: o.Sin, out: outs[0]})
	case *tt.RotaryEmbeddingLlama:
		return true, d.rotary(rotaryArgs{name: o.Name(), in: o.Input, cos: o.Cos, sin: o.Sin, trans: &o.TransMat, out: outs[0]})
	case *tt.ToMemoryConfig:
		return true, d.toMemoryConfig(*o, outs[0])
	case *tt.ConcatHeads:
		return true, d.concatHeads(*o)
	case *tt.NLPConcatHeads:
		return true, d.concatHeadsPrefill(*o, outs[0])
	case *tt.SDPA:
		return true, d.sdpaPrefill(*o, outs[0])
	case *tt.Add:
		return true, d.eltwise(o.Name(), o.A, o.B, o.Output, false)
	case *tt.SiluMul:
		return true, d.eltwise(o.Name(), o.Gate, o.Up, o.Output, true)
	case *tt.Argmax:
		return true, d.argmax(*o)
	case *tt.PlusOne:
		return true, d.plusOne(*o)
	case *tt.PagedSDPADecode:
		return true, d.sdpaDecode(*o, outs[0])
	case *tt.PagedFillCache:
		return true, d.fillCache(*o)
	case *tt.ChunkedSDPA:
		return true, d.chunkedSDPA(*o, outs[0])
	case *tt.FillCache:
		return true, d.fillCacheOp(*o)
	case *tt.Slice:
		return true, d.sliceOp(*o, outs[0])
	}
	return false, nil
}

// operands resolves live buffers for ts (nil entries stay nil).
func (d *Device) operands(op string, ts ...*tt.Tensor) ([]*buffer, error) {
	out := make([]*buffer, len(ts))
	for i, t := range ts {
		if t == nil {
			continue
		}
		b, err := d.operandOf(op, *t)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// record is a recorded launch of l with snapshots of its operands: pieces
// of the device's capture slabs, so a capture allocates a few times per
// many launches. A piece lives as long as the trace holding it (and keeps
// its slab alive with it).
func (d *Device) record(l *opLaunch, bs []*buffer) *opLaunch {
	const slab = 64
	if len(d.recSlab) == 0 {
		d.recSlab = make([]opLaunch, slab)
	}
	rec := &d.recSlab[0]
	d.recSlab = d.recSlab[1:]
	*rec = *l
	n := len(bs)
	if len(d.snapPtrs) < n {
		d.snapPtrs = make([]*buffer, max(n, 4*slab))
	}
	if len(d.snapBufs) < n {
		d.snapBufs = make([]buffer, max(n, 4*slab))
	}
	ptrs, copies := d.snapPtrs[:n:n], d.snapBufs[:n:n]
	d.snapPtrs, d.snapBufs = d.snapPtrs[n:], d.snapBufs[n:]
	for i, b := range bs {
		ptrs[i] = nil
		if b != nil {
			copies[i] = *b
			ptrs[i] = &copies[i]
		}
	}
	rec.bufs = ptrs
	return rec
}

type execFn func(l *opLaunch, x *opIO, s *scratch) error

// opLaunch is a compute op's launch: its operand snapshots (addresses
// included), its attributes and its kernel.
type opLaunch struct {
	op   string
	bufs []*buffer
	eps  float32
	f    float32
	n    int
	flag bool
	run  execFn
	// leave, when set, writes what the program's CBs leave in L1 under
	// stale L1 (cbleft.go), in place of leaveInputs.
	leave func(d *Device, l *opLaunch, s *scratch)
	// cbs, when set, lays out the program's CBs at a program-cache miss:
	// the static CB region's end and the core range of its first CB.
	cbs func(d *Device, bs []*buffer) simpleProgram
	// bind, when set, binds CBs to their tensors' buffers at the same
	// miss, which can fail (circular_buffer_config.cpp:193-222): a failed
	// build caches no program.
	bind func(d *Device, name string, bs []*buffer) error
}

func (l *opLaunch) exec(d *Device) error {
	s := getScratch()
	defer putScratch(s)
	x := &s.io
	*x = opIO{d: d, op: l.op}
	if err := l.run(l, x, s); err != nil {
		return err
	}
	if d.opt.L1 == L1Stale {
		if l.leave != nil {
			l.leave(d, l, s)
		} else {
			d.leaveInputs(l.bufs, s)
		}
	}
	return nil
}

// Stale-L1 model (Options.L1 == L1Stale): how much of each core's CB
// region a compute program leaves written, on how many cores.
const (
	staleBytesPerCore = 32 << 10
	staleCores        = 16
)

// leaveInputs leaves a compute program's input pages in L1 as its reader
// kernels stream them through circular buffers: inputs in order from the
// CB base, page p of the stream on core p % staleCores, bounded by
// staleBytesPerCore and by the lowest L1 buffer.
func (d *Device) leaveInputs(bufs []*buffer, s *scratch) {
	cores := min(staleCores, d.opt.NumCores)
	limit := min(d.opt.L1UnreservedBase+staleBytesPerCore, d.l1a.lowestUsed())
	var off [staleCores]uint64 // next free byte of each core's CB region
	for i := range off {
		off[i] = alignUp(d.opt.L1UnreservedBase, d.arch.dramAlign)
	}
	k := 0 // pages streamed so far
	for _, b := range bufs {
		if b == nil {
			continue
		}
		pg := s.pageBuf(int(b.pageSize))
		for p := 0; p < b.numPages; p++ {
			core := k % cores
			at := off[core]
			if at+b.pageSize > limit {
				return
			}
			off[core] = alignUp(at+b.pageSize, d.arch.dramAlign)
			m, a := d.memAt(d.pageLoc(b, p))
			if !m.in(a, b.pageSize) {
				return
			}
			m.read(a, pg)
			d.l1[core].write(at, pg)
			k++
		}
	}
}

func (d *Device) launchOp(name string, attrs attrKey, ts []*tt.Tensor, validate func(bs []*buffer) error, l opLaunch) error {
	bs := d.opBufs[:0]
	for _, t := range ts {
		if t == nil {
			bs = append(bs, nil)
			continue
		}
		b, err := d.operandOf(name, *t)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	d.opBufs = bs[:0]
	return d.runSimple(name, attrs, bs, func() error { return validate(bs) }, &l)
}

// ---- embedding ----

// embedding is ttnn::embedding as the contract calls it: layout = the
// Output's layout, memory_config = the Output's, optional_output_tensor =
// Output (ttnn/cpp/ttnn/operations/embedding/embedding.cpp). Input ids
// (UINT32, or BFLOAT16 holding integral values, ROW_MAJOR, any shape;
// n = volume), Weight BF16 ROW_MAJOR [vocab, hidden] (rank >= 2; each page
// one row), Output BF16.
//
// What the card writes depends on the program factory the wrapper picks
// (embedding.cpp:46-58 at 622c6fb9: fused_tilized only when the ids'
// padded last dim and the table's width are multiples of 32 and the
// layout asked for is TILE; embedding_device_operation.cpp
// select_program_factory):
//   - fused (TILE output, aligned): embeddings_fused_program_factory.cpp
//     tilizes each group of 32 ids into one tile row of the output, every
//     id included (a caller pads its ids to 32 as tt_transformers' model.py
//     prepare_inputs_decode does: "Necessary padding to be full tile sized
//     when on device"). The output's padded rows must be the ids' count.
//   - row-major (any other case): embeddings_rm_program_factory.cpp
//     writes row i of the result as one stick of output.padded_shape()[-1]
//     elements at page i of the Output through its accessor. Into a
//     ROW_MAJOR output that is the logical row; into a TILE output the
//     stick lands at the start of tile page i (and past the tensor's pages
//     when there are more ids than tiles): the card's bytes, not the
//     tilized rows. The wrapper's closing to_layout (embedding.cpp:75) asks
//     for the Output's own layout, so it returns its input: no hidden
//     allocation, in a capture or out of one.
//
// The ttnn device op takes the optional output's spec unchecked
// (compute_output_specs); the volume checks below are sim's own, so a
// caller whose Output does not hold what the factory writes is told so.
// An id past the table reads whatever its page address holds (no check
// on the device), like the card.
func (d *Device) embedding(o tt.Embedding) error {
	const name = "embedding"
	return d.launchOp(name, attrKey{}, []*tt.Tensor{&o.Input, &o.Weight, &o.Output}, func(bs []*buffer) error {
		in, w, out := bs[0], bs[1], bs[2]
		// ttnn/cpp/ttnn/operations/embedding/device/embedding_device_operation.cpp
		// validate_on_program_cache_miss, in its order. (ttnn's wrapper
		// converts TILE weights to ROW_MAJOR first, embedding.cpp; the
		// contract takes ROW_MAJOR weights, so sim refuses TILE weights with
		// the device op's text.)
		if w.spec.Layout != tt.RowMajor {
			return opErr(name, "Weights tensor layout must be ROW_MAJOR but got %v", w.spec.Layout)
		}
		if in.spec.DType != tt.UINT32 && in.spec.DType != tt.BF16 {
			return opErr(name, "Input must be UINT32 or BFLOAT16")
		}
		if w.spec.DType != tt.BF16 {
			return opErr(name, "Weights tensor must have BFLOAT16 dtype")
		}
		if in.spec.Memory.Sharded() {
			return opErr(name, "Embedding does not currently support sharded inputs")
		}
		if w.spec.Memory.Sharded() {
			return opErr(name, "Embedding does not currently support sharded weights")
		}
		if err := wantLayout(name, "Input tensor", in, tt.RowMajor); err != nil {
			return err
		}
		if len(w.spec.Shape) < 2 {
			return contractErr(name, "Weight tensor must be [vocab, hidden], got shape %v", w.spec.Shape)
		}
		if err := wantBF16(name, "Output tensor", out); err != nil {
			return err
		}
		n := in.spec.Volume()
		if embedFused(in, w, out) {
			if g := out.g; g.w != w.spec.Width() || g.outer*g.hp != n {
				return contractErr(name, "Output tensor shape %v does not hold the %d tiled rows of %d the fused kernel writes", out.spec.Shape, n, w.spec.Width())
			}
			return nil
		}
		if want := n * w.spec.Width(); out.spec.Volume() != want {
			return contractErr(name, "Output tensor shape %v does not hold %d rows of %d", out.spec.Shape, n, w.spec.Width())
		}
		return nil
	}, opLaunch{run: execEmbedding, cbs: embeddingCBs})
}

// embedFused is embedding.cpp's fused_tilized for the contract's call
// (layout = the Output's layout): a TILE output, ids whose last dim is a
// multiple of 32 and a table whose width is.
func embedFused(in, w, out *buffer) bool {
	return out.spec.Layout == tt.Tile && in.spec.Width()%tt.TileSize == 0 && w.spec.Width()%tt.TileSize == 0
}

func execEmbedding(l *opLaunch, x *opIO, s *scratch) error {
	in, w, out := l.bufs[0], l.bufs[1], l.bufs[2]
	x.checkReads = true // ids and table rows
	var ids []uint32
	if in.spec.DType == tt.BF16 {
		v := s.buf(1, in.spec.Volume())
		if err := x.readLogical(s, 2, in, v); err != nil {
			return err
		}
		ids = s.u32(len(v))
		for i, f := range v {
			ids[i] = uint32(f.Float32())
		}
	} else {
		var err error
		if ids, err = readAllWords(x, s, in); err != nil {
			return err
		}
	}
	g := out.g
	hidden := w.spec.Width()
	pg := s.pageBuf(int(w.pageSize))
	if out.spec.Layout == tt.Tile && !embedFused(in, w, out) {
		// embeddings_rm_program_factory.cpp: stick i at page i of the
		// TILE output, g.wp elements (the output's padded last dim).
		stick := make([]byte, 2*g.wp)
		for i, id := range ids {
			if err := x.pageIO(w, int(id), pg, false); err != nil {
				return err
			}
			clear(stick)
			copy(stick, pg[:min(len(pg), 2*hidden)])
			if err := x.pageIO(out, i, stick, true); err != nil {
				return err
			}
		}
		x.checkReads = false
		return nil
	}
	dst := s.buf(0, g.size())
	clear(dst)
	fused := out.spec.Layout == tt.Tile
	for i, id := range ids {
		if err := x.pageIO(w, int(id), pg, false); err != nil {
			return err
		}
		row := bf16.FromBytes(pg)
		if fused { // id i is padded row i: the tiles in page order
			copy(dst[i*g.wp:i*g.wp+hidden], row[:hidden])
			continue
		}
		// Logical element i*hidden+j of the output.
		for j := 0; j < hidden; {
			e := i*hidden + j
			lr, c := e/g.w, e%g.w
			n := min(hidden-j, g.w-c)
			o := g.prow(lr)*g.wp + c
			copy(dst[o:o+n], row[j:j+n])
			j += n
		}
	}
	x.checkReads = false
	return x.writePadded(s, out, dst, nil)
}

// readAllWords reads every logical element of a 4-byte ROW_MAJOR tensor.
func readAllWords(x *opIO, s *scratch, b *buffer) ([]uint32, error) {
	n := b.spec.Volume()
	w := b.spec.Width()
	words := s.u32(n)
	for p := 0; p < b.numPages && p*w < n; p++ {
		if err := x.readWords(s, b, p, words[p*w:min((p+1)*w, n)]); err != nil {
			return nil, err
		}
	}
	return words, nil
}

// ---- rms_norm ----

// rmsNorm: Input and Output BF16 with the same logical shape [..., n] (any
// layout); Weight BF16 with n elements (ttnn's [1,1,n/32,32] ROW_MAJOR, or
// any shape of that volume). Each logical row: ref.RMSNorm.
func (d *Device) rmsNorm(o tt.RMSNorm, output tt.Tensor) error {
	const name = "rms_norm"
	return d.launchOp(name, attrKey{uint64(math.Float32bits(o.Epsilon))}, []*tt.Tensor{&o.Input, &o.Weight, &output}, func(bs []*buffer) error {
		in, w, out := bs[0], bs[1], bs[2]
		// layernorm_device_operation.cpp (rms_norm is layernorm's RMS
		// mode), in its order, after the wrapper's check (wrapperCheck).
		if d := in.spec.DType; d != tt.FP32 && d != tt.BF16 { // (or BFLOAT8_B, which tt has no name for)
			return opErr(name, "Input tensor must be FLOAT32, BFLOAT16, or BFLOAT8_B, got: %v", d)
		}
		// The gamma rules: a TILE gamma's width and tile height; a
		// ROW_MAJOR gamma's rows of one tile width covering the input's
		// padded width; then its dtype.
		ap, wp := in.spec.PaddedShape(), w.spec.PaddedShape()
		if w.spec.Layout == tt.Tile {
			if ap[len(ap)-1] != wp[len(wp)-1] || w.spec.Width() < in.spec.Width() {
				return opErr(name, "Input and gamma padded widths must match and gamma logical width must be >= input logical width (otherwise valid input columns would be multiplied by gamma padding). Got input: logical[-1]=%d padded[-1]=%d vs gamma: logical[-1]=%d padded[-1]=%d",
					in.spec.Width(), ap[len(ap)-1], w.spec.Width(), wp[len(wp)-1])
			}
			if wp[len(wp)-2] != tt.TileSize {
				return opErr(name, "Gamma tensor height must equal tile height (%d), got: %d", tt.TileSize, wp[len(wp)-2])
			}
			return contractErr(name, "a TILE gamma is not modelled: tt.RMSNorm takes a ROW_MAJOR [1, 1, n/32, 32] weight")
		}
		if vol := w.spec.Volume(); wp[len(wp)-1] != tt.TileSize || vol/tt.TileSize != ap[len(ap)-1]/tt.TileSize {
			return opErr(name, "Gamma's last padded dim needs to equal tile width and gamma's volume needs to align with last padded dim of input. Error with gamma.value().padded_shape(): %s, tile_width: %d, gamma.value().physical_volume(): %d, a.padded_shape(): %s",
				ttShape(wp), tt.TileSize, vol, ttShape(ap))
		}
		if d := w.spec.DType; d != tt.FP32 && d != tt.BF16 {
			return opErr(name, "Gamma tensor must be FLOAT32 or BFLOAT16, got: %v", d)
		}
		if in.spec.Memory.Layout == tt.HeightSharded {
			return opErr(name, "Height sharded inputs are not supported.")
		}
		// ttnn accepts FLOAT32 and BFLOAT8_B input and FLOAT32 gamma; the
		// simulator computes BF16 only.
		for _, c := range []struct {
			what string
			b    *buffer
		}{{"Input tensor", in}, {"Weight tensor", w}, {"Output tensor", out}} {
			if err := wantBF16(name, c.what, c.b); err != nil {
				return err
			}
		}
		if !shapeEqual(in.spec.Shape, out.spec.Shape) {
			return contractErr(name, "Output shape %v != input shape %v", out.spec.Shape, in.spec.Shape)
		}
		if w.spec.Volume() < in.g.w {
			return contractErr(name, "Weight tensor has %d elements, want at least %d (the last dim)", w.spec.Volume(), in.g.w)
		}
		return nil
	}, opLaunch{eps: o.Epsilon, run: execRMSNorm, leave: leaveRMSNormLaunch, cbs: rmsNormProgramCBs})
}

func execRMSNorm(l *opLaunch, x *opIO, s *scratch) error {
	in, w, out := l.bufs[0], l.bufs[1], l.bufs[2]
	gi, go_ := in.g, out.g
	src := s.buf(0, gi.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	wt := s.buf(1, w.spec.Volume()) // the padded width's weights; the first n are used
	if err := x.readLogical(s, 2, w, wt); err != nil {
		return err
	}
	wt = wt[:gi.w]
	dst := s.buf(3, go_.size())
	n := gi.w
	for r := 0; r < gi.rows(); r++ {
		a, b := gi.prow(r)*gi.wp, go_.prow(r)*go_.wp
		ref.RMSNorm(dst[b:b+n], src[a:a+n], wt, l.eps)
	}
	return x.writeRows(s, out, dst)
}

// ---- linear ----

// linear: Input BF16 [1,1,M,K]; Weight BF16 [1,1,K,N], or with TransposeB
// [1,1,N,K] (Hugging Face's [out,in] rows); optional Bias with N elements;
// Output BF16 [1,1,M,N]. Output[m][n] = R(ref.Dot(weight row n, x_m)) —
// ref.MatVec bit for bit; with a bias, R(Dot + bias[n]). Any layouts.
func (d *Device) linear(o tt.Linear) error {
	const name = "linear"
	// The program config is an attribute of the device operation, chosen
	// from the L1 free now (matmul_cfg.go).
	cfg := d.linearConfigOf(&o)
	if cfg.kind == mmMultiCore && o.TransposeB && o.Weight.Spec.Layout == tt.Tile && !o.Weight.Spec.Memory.Sharded() {
		return d.linearTransposingB(o) // b transposed first (linear_transpose.go)
	}
	return d.launchOp(name, attrKey{b2u(o.TransposeB), cfg.key()}, []*tt.Tensor{&o.Input, &o.Weight, &o.Output, o.Bias}, func(bs []*buffer) error {
		in, w, out, bias := bs[0], bs[1], bs[2], bs[3]
		if in.spec.DType != tt.BF16 && in.spec.DType != tt.FP32 {
			return opErr(name, "Unsupported data format") // is_floating_point
		}
		for _, c := range []struct {
			what string
			b    *buffer
		}{{"Input tensor", in}, {"Weight tensor", w}, {"Output tensor", out}, {"Bias tensor", bias}} {
			if c.b == nil {
				continue
			}
			if err := wantBF16(name, c.what, c.b); err != nil {
				return err
			}
		}
		// matmul_device_operation.cpp validate_on_program_cache_miss.
		if in.spec.Layout != tt.Tile || w.spec.Layout != tt.Tile {
			return opErr(name, "Inputs to matmul must be tilized")
		}
		gi, gw, gout := in.g, w.g, out.g
		if gi.outer != 1 || gw.outer != 1 {
			return contractErr(name, "Input and Weight must be [1,1,M,K] and [1,1,K,N] (no batch), got %v and %v", in.spec.Shape, w.spec.Shape)
		}
		k, n := gw.h, gw.w
		if o.TransposeB {
			k, n = n, k
		}
		// ttnn/cpp/ttnn/operations/matmul/device/matmul_device_operation.cpp
		// validate_matmul_matrix_dimensions.
		if gi.w != k {
			return opErr(name, "The width of the first tensor must be equal to the height of the second tensor. Mismatch: width=%d height=%d", gi.w, k)
		}
		if gout.w != n || gout.rows() != gi.rows() {
			return contractErr(name, "Output shape %v, want %d rows of %d", out.spec.Shape, gi.rows(), n)
		}
		if bias != nil && biasFused(in, w, bias) {
			// The bias checks of validate_on_program_cache_miss (operations/matmul/device/matmul_device_operation.cpp:1001-1033)
			// on the fused path; the tile check before them holds (32x32 tiles only).
			bp, np := bias.g.wp, 0
			if o.TransposeB {
				np = gw.hp
			} else {
				np = gw.wp
			}
			switch {
			case bias.spec.Layout != tt.Tile:
				return opErr(name, "Unsupported input layout")
			case bp != np:
				return opErr(name, "Unsupported bias shape: padded last dimension of bias, %d, not equal to second input's padded last dimension, %d.", bp, np)
			case bias.g.w < n:
				return opErr(name, "Unsupported bias shape: last dimension of bias, %d, not equal to or greater than second input's last dimension, %d.", bias.g.w, n)
			}
		}
		if bias != nil && bias.spec.Volume() != n {
			return contractErr(name, "Bias tensor has %d elements, want %d", bias.spec.Volume(), n)
		}
		if err := d.linearWeightChecks(name, cfg, w); err != nil {
			return err
		}
		return linearOutputChecks(name, cfg, out)
	}, opLaunch{flag: o.TransposeB, run: execLinear, cbs: linearPrograms[b2u(o.TransposeB)]})
}

// biasFused reports whether ttnn::linear gives the bias to the matmul
// device op (get_post_process_bias, operations/matmul/matmul.cpp:100-155, with
// no program config and no core grid, and the parameters' output config
// DRAM interleaved, as the contract's call passes none): an unbatched bias
// whose padded second-last dim is one tile, and an input that is sharded or
// an input and weight both DRAM interleaved. Otherwise ttnn adds it after
// the matmul with ttnn::add (sim computes the same sum; the add's checks
// are not modelled).
func biasFused(in, w, bias *buffer) bool {
	sh := bias.spec.Shape
	for i := 0; i+2 < len(sh); i++ {
		if sh[i] > 1 {
			return false // is_input_batched
		}
	}
	hp := bias.g.hp
	if len(sh) < 2 {
		hp = 1
	}
	if hp != tt.TileSize {
		return false
	}
	dramIL := func(b *buffer) bool { return b.spec.Memory.Buffer == tt.DRAM && !b.spec.Memory.Sharded() }
	return in.spec.Memory.Sharded() || (dramIL(in) && dramIL(w))
}

func execLinear(l *opLaunch, x *opIO, s *scratch) error {
	in, w, out, bias := l.bufs[0], l.bufs[1], l.bufs[2], l.bufs[3]
	gi, gout := in.g, out.g
	k := gi.w
	n := gout.w
	src := s.buf(0, gi.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	// wt: the weight as rows [n][k] (HF's [out, in]); wid its contents' id
	// (0: none, the rows are not remembered).
	wt, wid, last, err := x.linearWeight(s, w, l.flag, k, n)
	if err != nil {
		return err
	}
	var bv []bf16.BF16
	if bias != nil {
		bv = s.buf(3, n)
		if err := x.readLogical(s, 4, bias, bv); err != nil {
			return err
		}
	}
	dst := s.buf(5, gout.size())
	// The rows to compute: those neither the weight's last rows nor the
	// memo (linmemo.go) hold.
	var rm *rowMemo
	if wid != 0 {
		rm = x.d.rowMemo()
	}
	rows := gi.rows()
	todo := s.u32(rows)[:0]
	keys := s.u32x(2 * rows)
	for m := 0; m < rows; m++ {
		a := gi.prow(m) * gi.wp
		xr, out := src[a:a+k], dst[gout.prow(m)*gout.wp:][:n]
		if wid != 0 {
			if last.get(m, bv, xr, out) {
				x.d.linFound++
				continue
			}
			key := rowKey(wid, bv, xr)
			keys[2*m], keys[2*m+1] = uint32(key), uint32(key>>32)
			if rm.get(key, wid, bv, xr, out) {
				x.d.linFound++
				last.put(m, bv, xr, out)
				continue
			}
		}
		todo = append(todo, uint32(m))
	}
	x.d.linComputed += len(todo)
	// Widen the input rows once: ref.MatRows and ref.DotWidened take them so.
	xf := s.floats(len(todo) * k)
	for i, m := range todo {
		a := gi.prow(int(m)) * gi.wp
		bf16.ToFloat32s(xf[i*k:(i+1)*k], src[a:a+k])
	}
	if bv == nil {
		dsts, xs := s.rowsOut(len(todo)), s.rowsIn(len(todo))
		for i, m := range todo {
			dsts[i] = dst[gout.prow(int(m))*gout.wp:][:n]
			xs[i] = xf[i*k : (i+1)*k]
		}
		ref.MatRows(dsts, wt[:n*k], xs, k)
	} else {
		for o := 0; o < n; o++ {
			wo := wt[o*k : (o+1)*k : (o+1)*k]
			for i, m := range todo {
				v := ref.DotWidened(wo, xf[i*k:(i+1)*k]) + bv[o].Float32()
				dst[gout.prow(int(m))*gout.wp+o] = bf16.FromFloat32(v)
			}
		}
	}
	if wid != 0 {
		for _, m := range todo {
			a := gi.prow(int(m)) * gi.wp
			key := uint64(keys[2*m]) | uint64(keys[2*m+1])<<32
			rm.put(key, wid, bv, src[a:a+k], dst[gout.prow(int(m))*gout.wp:][:n])
			last.put(int(m), bv, src[a:a+k], dst[gout.prow(int(m))*gout.wp:][:n])
		}
	}
	return x.writeRows(s, out, dst)
}

// transpose writes the [k][n] logical matrix held in the padded view raw
// (geometry g) into dst as [n][k], in 32x32 blocks.
func transpose(dst, raw []bf16.BF16, g geom, k, n int) {
	const bsz = 32
	for i0 := 0; i0 < k; i0 += bsz {
		for j0 := 0; j0 < n; j0 += bsz {
			for i := i0; i < min(i0+bsz, k); i++ {
				r := raw[g.prow(i)*g.wp:]
				for j := j0; j < min(j0+bsz, n); j++ {
					dst[j*k+i] = r[j]
				}
			}
		}
	}
}

// ---- nlp_create_qkv_heads_decode ----

// checkCreateHeadsDecode is validate_on_program_cache_miss of
// nlp_create_qkv_heads_decode (ttnn/cpp/ttnn/operations/experimental/
// transformer/nlp_create_qkv_heads_decode/device/
// nlp_create_qkv_heads_decode_device_operation.cpp), in its order, for what
// the contract can express (interleaved input, overlap_qk_coregrid true,
// the output grid the contract allocates).
func checkCreateHeadsDecode(o tt.NLPCreateQKVHeadsDecode) error {
	const name = "nlp_create_qkv_heads_decode"
	s := o.Input.Spec
	if s.DType != tt.FP32 && s.DType != tt.BF16 {
		return opErr(name, "Unsupported data format")
	}
	if s.Layout != tt.Tile {
		return opErr(name, "Only tile layout is supported for input tensor")
	}
	sh := s.Shape
	const numUsersSupported = 32
	if sh[3]%tt.TileSize != 0 || sh[2] > numUsersSupported || sh[1] != 1 || sh[0] != 1 {
		return opErr(name, "Unsupported input shape = %s", ttShape(sh))
	}
	if s.Memory.Sharded() && s.Memory.Layout != tt.WidthSharded {
		return opErr(name, "Current input memory layout is %v. It must be width sharded", s.Memory.Layout)
	}
	if o.NumHeads < o.NumKVHeads {
		return opErr(name, "num_q_heads=%d must be greater than or equal to num_kv_heads=%d", o.NumHeads, o.NumKVHeads)
	}
	return nil
}

// createHeads: Input BF16 [1,1,B,(NumHeads+2*NumKVHeads)*D]; Q BF16
// [1,B,Hq,D] with Hq >= NumHeads (32 when padded logically, or NumHeads with
// the tile padding); K and V [1,B,Hkv,D] with Hkv >= NumKVHeads. Row (b,h) of
// Q is columns h*D.. of user b's row; K follows the Q heads, V the K heads.
// Logical rows past the real heads are written as zero.
func (d *Device) createHeads(o tt.NLPCreateQKVHeadsDecode, outs []tt.Tensor) error {
	const name = "nlp_create_qkv_heads_decode"
	return d.launchOp(name, attrKey{uint64(o.NumHeads), uint64(o.NumKVHeads)}, []*tt.Tensor{&o.Input, &outs[0], &outs[1], &outs[2]}, func(bs []*buffer) error {
		in := bs[0]
		if o.NumHeads <= 0 || o.NumKVHeads <= 0 {
			return contractErr(name, "num_heads (%d) and num_kv_heads (%d) must be positive", o.NumHeads, o.NumKVHeads)
		}
		for i, b := range bs {
			if err := wantBF16(name, []string{"Input tensor", "Q", "K", "V"}[i], b); err != nil {
				return err
			}
		}
		gi := in.g
		q := bs[1].spec
		if err := wantRank(name, "Q", bs[1], 4); err != nil {
			return err
		}
		dh := q.Shape[3]
		if gi.w != (o.NumHeads+2*o.NumKVHeads)*dh {
			return contractErr(name, "Input width %d != (num_heads + 2*num_kv_heads) * head_dim = %d", gi.w, (o.NumHeads+2*o.NumKVHeads)*dh)
		}
		for i, b := range bs[1:] {
			heads := o.NumHeads
			if i > 0 {
				heads = o.NumKVHeads
			}
			if err := wantRank(name, "output", b, 4); err != nil {
				return err
			}
			sh := b.spec.Shape
			if sh[0] != 1 || sh[1] != gi.rows() || sh[2] < heads || sh[3] != dh {
				return contractErr(name, "Output shape %v, want [1, %d, >=%d, %d]", sh, gi.rows(), heads, dh)
			}
		}
		return nil
	}, opLaunch{n: o.NumHeads, f: float32(o.NumKVHeads), run: execCreateHeads, cbs: createHeadsDecodeCBs})
}

func execCreateHeads(l *opLaunch, x *opIO, s *scratch) error {
	in := l.bufs[0]
	gi := in.g
	src := s.buf(0, gi.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	nh, nkv := l.n, int(l.f)
	col := 0
	for i, out := range l.bufs[1:] {
		heads := nh
		if i > 0 {
			heads = nkv
		}
		g := out.g
		dst := s.buf(1, g.size())
		dh := g.w
		for b := 0; b < gi.rows(); b++ {
			a := gi.prow(b)*gi.wp + col
			for h := 0; h < heads; h++ {
				r := g.prow(b*g.h+h) * g.wp
				copy(dst[r:r+dh], src[a+h*dh:a+(h+1)*dh])
			}
		}
		if err := x.writeRows(s, out, dst); err != nil {
			return err
		}
		col += heads * dh
	}
	return nil
}

// ---- rotary_embedding_hf / rotary_embedding_llama (decode) ----

type rotaryArgs struct {
	name              string
	in, cos, sin, out tt.Tensor
	trans             *tt.Tensor // llama only
}

// rotary: Input and Output BF16 [1,B,H,D] (same shape); Cos and Sin BF16
// with B*D logical elements (e.g. [1,B,1,D] or [1,1,B,D]), user b's row at
// b*D. Each logical row (b,h): rotary_embedding_hf is ref.Rope (rotate_half,
// pairs i and i+D/2) with user b's cos/sin; rotary_embedding_llama rotates
// with the transformation matrix (each 32-wide column tile of x times
// TransMat, exact in float32 for tt_transformers' ±1 matrix) and rounds as
// ref.Rope does: R(R(x·cos) + R(rot·sin)).
func (d *Device) rotary(o rotaryArgs) error {
	name := o.name
	ts := []*tt.Tensor{&o.in, &o.cos, &o.sin, &o.out, o.trans} // not appended to: o stays on the stack
	if o.trans == nil {
		ts = ts[:4]
	}
	llama := o.trans != nil
	return d.launchOp(name, attrKey{b2u(llama)}, ts, func(bs []*buffer) error {
		if llama {
			if err := checkRopeLlamaDecode(bs[0].spec, bs[1].spec, bs[2].spec, bs[4].spec, bs[3].spec.Memory); err != nil {
				return err
			}
		}
		for i, b := range bs {
			if err := wantBF16(name, []string{"Input tensor", "Cos", "Sin", "Output tensor", "Trans mat"}[i], b); err != nil {
				return err
			}
		}
		in, out := bs[0], bs[3]
		if err := wantRank(name, "Input tensor", in, 4); err != nil {
			return err
		}
		// Decode mode (ttnn/cpp/ttnn/operations/experimental/transformer/
		// rotary_embedding_hf/device/rotary_embedding_hf_device_operation.cpp,
		// and rotary_embedding_llama's): all TILE, input height-sharded one
		// user per core, cos/sin sharded with the same shape, [1, B, 1, D].
		if !llama {
			if err := checkRopeHFDecode(in.spec, bs[1].spec, bs[2].spec); err != nil {
				return err
			}
		}
		// What the contract's decode form needs beyond ttnn's checks (and,
		// for rotary_embedding_llama, whose decode checks are not modelled:
		// the table lists them as left out).
		for i, b := range bs {
			if b.spec.Layout != tt.Tile {
				return contractErr(name, "%s must be TILE layout", []string{"Input tensor", "Cos", "Sin", "Output tensor", "Trans mat"}[i])
			}
		}
		if in.spec.Memory.Layout != tt.HeightSharded {
			return contractErr(name, "Input tensor must be HEIGHT_SHARDED in decode mode")
		}
		if !bs[1].spec.Equal(bs[2].spec) {
			return contractErr(name, "Cos and sin must have the same spec: %v vs %v", bs[1].spec, bs[2].spec)
		}
		if !bs[1].spec.Memory.Sharded() {
			return contractErr(name, "Cos and sin must be sharded in decode mode")
		}
		if cs := bs[1].spec.Shape; len(cs) != 4 || cs[0] != 1 || cs[1] != in.spec.Shape[1] || cs[2] != 1 || cs[3] != in.spec.Shape[3] {
			return contractErr(name, "Cos and sin must be [1, %d, 1, %d] in decode mode, got %v", in.spec.Shape[1], in.spec.Shape[3], cs)
		}
		if !shapeEqual(in.spec.Shape, out.spec.Shape) {
			return contractErr(name, "Output shape %v != input shape %v", out.spec.Shape, in.spec.Shape)
		}
		sh := in.spec.Shape
		if sh[3]%2 != 0 {
			return contractErr(name, "head_dim %d must be even", sh[3])
		}
		want := sh[0] * sh[1] * sh[3]
		if bs[1].spec.Volume() != want || bs[2].spec.Volume() != want {
			return contractErr(name, "Cos/Sin must hold %d users of %d, got shapes %v and %v", sh[0]*sh[1], sh[3], bs[1].spec.Shape, bs[2].spec.Shape)
		}
		if llama {
			if tm := bs[4].spec; len(tm.Shape) != 4 || tm.Shape[2]%tt.TileSize != 0 || tm.Shape[3] != tt.TileSize || tm.Layout != tt.Tile {
				return contractErr(name, "Transformation matrix must be [1, 1, 32·k, 32] TILE, got %v", tm)
			}
		}
		return nil
	}, opLaunch{flag: llama, run: execRotary, cbs: rotaryDecodePrograms[b2u(llama)], bind: rotaryBound})
}

// checkRopeLlamaDecode is rotary_embedding_llama's
// validate_on_program_cache_miss in decode mode (ttnn/cpp/ttnn/operations/
// experimental/transformer/rotary_embedding_llama/device/
// rotary_embedding_llama_device_operation.cpp), in its order.
func checkRopeLlamaDecode(in, cs, sn, tm tt.Spec, out tt.MemoryConfig) error {
	const name = "rotary_embedding_llama"
	if len(in.Shape) != 4 || len(tm.Shape) != 4 {
		return contractErr(name, "Input tensor and trans mat must be rank 4, got shapes %v and %v", in.Shape, tm.Shape)
	}
	switch {
	case in.Layout != tt.Tile:
		return opErr(name, "input tensor to rotary embedding must be tilized")
	case cs.Layout != tt.Tile:
		return opErr(name, "cos tensor to rotary embedding must be tilized")
	case sn.Layout != tt.Tile:
		return opErr(name, "sin tensor to rotary embedding must be tilized")
	case tm.Layout != tt.Tile:
		return opErr(name, "transformation matrix to rotary embedding must be tilized")
	}
	hd := in.Width()
	switch {
	case hd > 256:
		return opErr(name, "Head dim must be less than 256")
	case in.DType != tt.BF16 || cs.DType != tt.BF16 || sn.DType != tt.BF16 || tm.DType != tt.BF16:
		return opErr(name, "All input tensors must have dtype = bfloat16")
	case in.Memory.Layout != out.Layout:
		return opErr(name, "Input tensor and output tensor must have same memory layout")
	case !shapeEqual(cs.Shape, sn.Shape):
		return opErr(name, "Cos and Sin dims must match")
	case hd%tt.TileSize != 0:
		return opErr(name, "Head dim must be a multiple of TILE_WIDTH in decode mode")
	case in.Shape[0] != 1:
		return opErr(name, "rotary_embedding_llama currently only supports sharded inputs in decode mode, and therefore, seq_len (in dim 0) must be 1.")
	case in.Memory.Layout != tt.HeightSharded:
		return opErr(name, "Sharded inputs for RoPE must be HEIGHT_SHARDED.")
	case cs.Memory.Layout != tt.HeightSharded:
		return opErr(name, "cos tensor for RoPE must be HEIGHT_SHARDED.")
	case sn.Memory.Layout != tt.HeightSharded:
		return opErr(name, "sin tensor for RoPE must be HEIGHT_SHARDED.")
	case tm.Memory.Layout != tt.HeightSharded:
		return opErr(name, "transformation matrix for RoPE must be HEIGHT_SHARDED.")
	case len(cs.Shape) < 2 || in.Shape[1] != cs.Shape[1]:
		return opErr(name, "Cos and Sin must have the same batch size as the input")
	case cs.Memory.Shard.Shape[0] != tt.TileSize:
		return opErr(name, "In decode mode, RoPE only supports n_heads (shard_shape[0]) less than equal to TILE_HEIGHT")
	case len(tm.Shape) != 4 || tm.Shape[0] != 1 || tm.Shape[1] != 1:
		return opErr(name, "Transformation matrix must have 1st & 2nd dim equal to 1")
	case tm.Memory.Shard.Shape[0] != tt.TileSize:
		return opErr(name, "Transformation matrix must have 3rd dim equal to TILE_HEIGHT")
	case tm.Memory.Shard.Shape[1] != tt.TileSize:
		return opErr(name, "Transformation matrix must have 4th dim equal to TILE_WIDTH")
	}
	return nil
}

// checkRopeHFDecode is rotary_embedding_hf's validate_on_program_cache_miss
// in decode mode (ttnn/cpp/ttnn/operations/experimental/transformer/
// rotary_embedding_hf/device/rotary_embedding_hf_device_operation.cpp), in
// its order.
func checkRopeHFDecode(in, cs, sn tt.Spec) error {
	const name = "rotary_embedding_hf"
	switch {
	case in.Layout != tt.Tile:
		return opErr(name, "Input must be tilized")
	case cs.Layout != tt.Tile:
		return opErr(name, "Cos must be tilized")
	case sn.Layout != tt.Tile:
		return opErr(name, "Sin must be tilized")
	}
	if len(cs.Shape) != 4 || len(sn.Shape) != 4 {
		return contractErr(name, "Cos and sin must be rank 4, got %v and %v", cs.Shape, sn.Shape)
	}
	x := in.PaddedDim(3)
	if x != tt.TileSize && x%(2*tt.TileSize) != 0 {
		return opErr(name, "Input X dim (%d) must be either %d (single tile) or divisible by %d (rotate_half midpoint must align with a tile boundary).", x, tt.TileSize, 2*tt.TileSize)
	}
	cp, sp := cs.PaddedShape(), sn.PaddedShape()
	switch {
	case cs.DType != sn.DType:
		return opErr(name, "Cos and Sin dtypes must match")
	case !shapeEqual(cp, sp):
		return opErr(name, "Cos and Sin shapes must match")
	case cp[0] != 1 || cp[3] != x:
		return opErr(name, "Cos dims must match input dims")
	case !in.Memory.Sharded():
		return opErr(name, "Input must be sharded in decode mode")
	case in.Memory.Layout != tt.HeightSharded:
		return opErr(name, "Input must be HEIGHT_SHARDED in decode mode")
	case !cs.Memory.Sharded():
		return opErr(name, "Cos must be sharded in decode mode")
	case !sn.Memory.Sharded():
		return opErr(name, "Sin must be sharded in decode mode")
	case cp[1] != in.PaddedDim(1):
		return opErr(name, "Cos batch dim must match input")
	case sp[1] != in.PaddedDim(1):
		return opErr(name, "Sin batch dim must match input")
	}
	return nil
}

func execRotary(l *opLaunch, x *opIO, s *scratch) error {
	in, cb, sb, out := l.bufs[0], l.bufs[1], l.bufs[2], l.bufs[3]
	gi, gout := in.g, out.g
	src := s.buf(0, gi.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	dh := gi.w
	cos := s.buf(1, cb.spec.Volume())
	if err := x.readLogical(s, 3, cb, cos); err != nil {
		return err
	}
	sin := s.buf(2, sb.spec.Volume())
	if err := x.readLogical(s, 3, sb, sin); err != nil {
		return err
	}
	var tm []bf16.BF16
	tmUser := -1 // the user whose core's matrix tm holds
	dst := s.buf(4, gout.size())
	for r := 0; r < gi.rows(); r++ {
		// The cos/sin row: decode mode, the user's (row / heads); prefill
		// mode (l.n == rotaryPrefillRows), the row's position in its head.
		u := r / gi.h
		if l.n == rotaryPrefillRows {
			u = r % gi.h
		}
		a, b := gi.prow(r)*gi.wp, gout.prow(r)*gout.wp
		if l.flag {
			if u != tmUser {
				var err error
				if tm, err = transMatOnCore(x, s, in, l.bufs[4], u); err != nil {
					return err
				}
				tmUser = u
			}
			ropeLlama(dst[b:b+dh], src[a:a+dh], cos[u*dh:(u+1)*dh], sin[u*dh:(u+1)*dh], tm)
			continue
		}
		ref.Rope(dst[b:b+dh], src[a:a+dh], cos[u*dh:(u+1)*dh], sin[u*dh:(u+1)*dh])
	}
	return x.writeRows(s, out, dst)
}

// TransMatOffCore: rotary_embedding_llama's transformation-matrix CB is
// bound to the matrix buffer's address on every core of the input's grid
// (rotary_embedding_llama_sharded_program_factory.cpp:114-126), so each
// user's core reads the tile at that address in its own L1; a core outside
// the matrix's shard grid reads whatever its L1 holds there.
// tt_transformers repeats the matrix over the batch grid, [1,1,32·B,32]
// sharded [32,32] (models/tt_transformers/tt/rope.py:829-849).
const TransMatOffCore FindingClass = "trans-mat-off-core"

// transMatOnCore is the 32x32 matrix user u's core reads: the tile at the
// matrix buffer's address in the L1 of the core that holds u's input shard.
func transMatOnCore(x *opIO, s *scratch, in, tm *buffer, u int) ([]bf16.BF16, error) {
	d := x.d
	core := d.shardCore(in.spec.Memory.Shard, u*in.g.hp/in.spec.Memory.Shard.Shape[0])
	page := s.bytesN(3, int(tm.pageSize))
	if err := d.l1IO(x.op, core, tm.addr, page, false); err != nil {
		return nil, err
	}
	g := tm.spec.Memory.Shard
	if d.opt.Strict && !d.onGrid(g, core) {
		d.find(Finding{Class: TransMatOffCore, Op: x.op, Core: core, User: u, Index: -1, Tensor: tm.id, Addr: tm.addr,
			Detail: fmt.Sprintf("user %d's core %d reads the transformation matrix at L1 %#x, but the matrix is sharded on %s: the tile there is that core's own L1", u, core, tm.addr, coreRangeSet(g, d.gridX()))})
	}
	m := s.buf(5, tt.TileSize*tt.TileSize)
	untilizeTileRows(m, tt.TileSize, bf16.FromBytes(page), tt.TileSize)
	return m, nil
}

// rotaryPrefillRows in a rotary launch's n selects prefill mode's cos/sin
// rows (execRotary).
const rotaryPrefillRows = 1

// ropeLlama is rotary_embedding_llama on one head row: rot = x·T per
// 32-wide column tile (float32 sums in column order), then
// dst = R(R(x·cos) + R(R(rot)·sin)).
func ropeLlama(dst, x, cos, sin, tm []bf16.BF16) {
	const n = tt.TileSize
	var rot [n]float32
	for t0 := 0; t0+n <= len(x); t0 += n {
		for j := 0; j < n; j++ {
			var acc float32
			for i := 0; i < n; i++ {
				if v := tm[i*n+j]; v != 0 {
					acc += x[t0+i].Float32() * v.Float32()
				}
			}
			rot[j] = bf16.FromFloat32(acc).Float32()
		}
		for j := 0; j < n; j++ {
			k := t0 + j
			a := bf16.FromFloat32(x[k].Float32() * cos[k].Float32()).Float32()
			b := bf16.FromFloat32(rot[j] * sin[k].Float32()).Float32()
			dst[k] = bf16.FromFloat32(a + b)
		}
	}
}

// ---- to_memory_config ----

// toMemoryConfig copies Input's pages into Output (the same spec in another
// memory config): a data move, values unchanged.
func (d *Device) toMemoryConfig(o tt.ToMemoryConfig, output tt.Tensor) error {
	const name = "to_memory_config"
	return d.launchOp(name, attrKey{}, []*tt.Tensor{&o.Input, &output}, func(bs []*buffer) error {
		in, out := bs[0], bs[1]
		if !shapeEqual(in.spec.Shape, out.spec.Shape) || in.spec.DType != out.spec.DType || in.spec.Layout != out.spec.Layout {
			return contractErr(name, "Output spec %v does not match input spec %v", out.spec, in.spec)
		}
		return nil
	}, opLaunch{run: execCopy, cbs: toMemoryConfigCBs})
}

func execCopy(l *opLaunch, x *opIO, s *scratch) error {
	in, out := l.bufs[0], l.bufs[1]
	pg := s.pageBuf(int(in.pageSize))
	for p := 0; p < in.numPages; p++ {
		if err := x.pageIO(in, p, pg, false); err != nil {
			return err
		}
		if err := x.pageIO(out, p, pg, true); err != nil {
			return err
		}
	}
	return nil
}

// ---- nlp_concat_heads_decode ----

// concatHeads: Input BF16 [1,B,H,D] (H >= NumHeads); Output BF16
// [1,1,B,NumHeads*D]; Output[b] = Input[b,0] ‖ ... ‖ Input[b,NumHeads-1].
func (d *Device) concatHeads(o tt.ConcatHeads) error {
	const name = "nlp_concat_heads_decode"
	return d.launchOp(name, attrKey{uint64(o.NumHeads)}, []*tt.Tensor{&o.Input, &o.Output}, func(bs []*buffer) error {
		in, out := bs[0], bs[1]
		// ttnn/cpp/ttnn/operations/experimental/transformer/
		// nlp_concat_heads_decode/device/
		// nlp_concat_heads_decode_device_operation.cpp, in its order; the
		// program factory then reads the output's shard spec (an
		// interleaved output throws std::bad_optional_access).
		if err := wantRank(name, "Input tensor", in, 4); err != nil {
			return err
		}
		if in.spec.DType != tt.FP32 && in.spec.DType != tt.BF16 {
			return opErr(name, "Unsupported data format")
		}
		if in.spec.Layout != tt.Tile {
			return opErr(name, "Input tensor layout must be TILE but got %v", in.spec.Layout)
		}
		sh := in.spec.Shape
		if sh[0] != 1 {
			return opErr(name, "seqlen=1 for decode")
		}
		if sh[1] > 32 {
			return opErr(name, "currently only support less than 32 users")
		}
		if p := in.spec.PaddedDim(2); p%32 != 0 {
			return opErr(name, "padded heads must be a multiple of TILE_HEIGHT (32), got %d", p)
		}
		if in.spec.PaddedDim(2) < o.NumHeads {
			return opErr(name, "head_dim must be multiple of TILE_WIDTH")
		}
		if !in.spec.Memory.Sharded() {
			return opErr(name, "Input tensor must be sharded")
		}
		if in.spec.Memory.Layout != tt.HeightSharded {
			return opErr(name, "Input tensor memory layout must be HEIGHT_SHARDED but got %v", in.spec.Memory.Layout)
		}
		shard := in.spec.Memory.Shard
		// Shard spec shape[1] == padded shape[-1] (:50) holds: tt.Spec's
		// Validate requires a height shard as wide as the tensor.
		if h := in.spec.PaddedDim(2); shard.Shape[0] != h {
			return opErr(name, "Shard spec shape[0] (%d) must match input tensor padded shape[-2] (%d)", shard.Shape[0], h)
		}
		if shard.NumCores != sh[1] {
			return opErr(name, "Input core grid num_cores must be equal to num users")
		}
		// ttnn::prim::nlp_concat_heads_decode (the same file, :133-140)
		// takes the sub-core-grid path when the input's shard grid is more
		// than one range or does not start at core (0,0); without sub-core
		// grids (the contract has none) that path refuses. So on the card
		// the users' grid must be one rectangle from (0,0): at most a row
		// of the worker grid, or whole rows (Blackhole, 13 wide: 32 users
		// are refused).
		if rs := shardRanges(shard, d.gridX()); len(rs) > 1 || rs[0][0].x != 0 || rs[0][0].y != 0 {
			return opErr(name, "Subcoregrids must be provided if on_subcoregrids is true")
		}
		if err := wantBF16(name, "Input tensor", in); err != nil {
			return err
		}
		if err := wantBF16(name, "Output tensor", out); err != nil {
			return err
		}
		if !out.spec.Memory.Sharded() {
			return opErr(name, "bad optional access") // std::bad_optional_access::what()
		}
		if o.NumHeads <= 0 {
			return contractErr(name, "num_heads %d out of range for input shape %v", o.NumHeads, sh)
		}
		g := out.g
		if g.rows() != sh[0]*sh[1] || g.w != o.NumHeads*sh[3] {
			return contractErr(name, "Output shape %v, want [1, 1, %d, %d]", out.spec.Shape, sh[0]*sh[1], o.NumHeads*sh[3])
		}
		return nil
	}, opLaunch{n: o.NumHeads, run: execConcat})
}

func execConcat(l *opLaunch, x *opIO, s *scratch) error {
	in, out := l.bufs[0], l.bufs[1]
	gi, gout := in.g, out.g
	src := s.buf(0, gi.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	dst := s.buf(1, gout.size())
	dh := gi.w
	for b := 0; b < gout.rows(); b++ {
		o := gout.prow(b) * gout.wp
		for h := 0; h < l.n; h++ {
			a := gi.prow(b*gi.h+h) * gi.wp
			copy(dst[o+h*dh:o+(h+1)*dh], src[a:a+dh])
		}
	}
	return x.writeRows(s, out, dst)
}

// ---- add, mul(silu) ----

// eltwise: A, B and Output BF16 with the same shape and layout; computed
// page by page over the raw elements (padding included): ref.Add, or
// ref.SiluMul(A, B) for mul with a SILU activation on A.
func (d *Device) eltwise(name string, a, b, out tt.Tensor, silu bool) error {
	// The wrapper, before any device operation (so before launch's
	// allocation check): the contract always passes an output tensor,
	// which ttnn refuses for two ROW_MAJOR operands
	// (ttnn/cpp/ttnn/operations/eltwise/binary/binary.cpp:531-535).
	if a.Spec.Layout == tt.RowMajor && b.Spec.Layout == tt.RowMajor {
		return opErr(name, "Optional output tensor with Row Major input is not supported right now for Elementwise operations")
	}
	return d.launchOp(name, attrKey{b2u(silu)}, []*tt.Tensor{&a, &b, &out}, func(bs []*buffer) error {
		for i, x := range bs {
			if err := wantBF16(name, []string{"Input tensor a", "Input tensor b", "Output tensor"}[i], x); err != nil {
				return err
			}
		}
		for _, x := range bs[1:] {
			if !shapeEqual(x.spec.Shape, bs[0].spec.Shape) || x.spec.Layout != bs[0].spec.Layout {
				return contractErr(name, "Tensors must have the same shape and layout: %v vs %v", bs[0].spec, x.spec)
			}
		}
		return nil
	}, opLaunch{flag: silu, run: execEltwise, cbs: binaryNGCBs[b2u(silu)]})
}

func execEltwise(l *opLaunch, x *opIO, s *scratch) error {
	a, b, out := l.bufs[0], l.bufs[1], l.bufs[2]
	n := int(a.pageSize)
	pa := s.pageBuf(3 * n)
	pb, po := pa[n:2*n], pa[2*n:3*n]
	pa = pa[:n]
	vo := bf16.FromBytes(po)
	// used: the rows of page p that hold logical rows (a speed hint for
	// eltwisePage, which computes or checks every element either way).
	g := a.g
	used := func(p int) int { return g.tileRowsUsed(p / (g.wp / tt.TileSize)) }
	for p := 0; p < a.numPages; p++ {
		// Views of the input pages: the output is written only after
		// both are read, so an in-place add reads its input whole.
		ra, err := x.pageView(a, p, pa)
		if err != nil {
			return err
		}
		rb, err := x.pageView(b, p, pb)
		if err != nil {
			return err
		}
		eltwisePage(vo, ra, rb, l.flag, used(p))
		if err := x.pageIO(out, p, bf16Bytes(po, vo), true); err != nil {
			return err
		}
	}
	return nil
}

// eltwisePage is ref.Add (silu false) or ref.SiluMul over one page of
// inputs pa and pb (little-endian bf16 bytes) into vo, bit for bit. Add
// runs over the whole page: its vector kernel costs less than looking for
// zeros. SiluMul gathers from a table, so it takes a tile page in runs:
// used is how many of its rows hold logical rows (tt.TileSize, or a page
// that is not a whole tile: all of it is computed), and a run of the
// padding rows below them, face by face, where both inputs hold +0 (bits
// 0x0000) is cleared without the kernel: R(R(silu(+0))·+0) = +0. A decode
// activation's tiles hold their users in the first rows and zeros below.
// used only splits the work: padding that is not +0 is computed.
func eltwisePage(vo []bf16.BF16, pa, pb []byte, silu bool, used int) {
	const face = tt.FaceSize * tt.FaceSize
	n := len(vo)
	pa, pb = pa[:2*n], pb[:2*n]
	if !silu || used >= tt.TileSize || n != 4*face {
		eltwiseRun(vo, pa, pb, silu)
		return
	}
	// The page's runs of logical rows and of padding, face by face,
	// adjacent runs of a kind merged (at most 8 runs).
	var runs [8]struct {
		lo, hi int
		pad    bool
	}
	k := 0
	add := func(lo, hi int, pad bool) {
		if lo == hi {
			return
		}
		if k > 0 && runs[k-1].pad == pad && runs[k-1].hi == lo {
			runs[k-1].hi = hi
			return
		}
		runs[k].lo, runs[k].hi, runs[k].pad = lo, hi, pad
		k++
	}
	for f := range 4 {
		lo, hi := f*face, (f+1)*face
		d := lo + max(0, min(tt.FaceSize, used-f/2*tt.FaceSize))*tt.FaceSize // the face's logical rows end here
		add(lo, d, false)
		add(d, hi, true)
	}
	for _, r := range runs[:k] {
		a, b := pa[2*r.lo:2*r.hi], pb[2*r.lo:2*r.hi]
		if r.pad && isZero(a) && isZero(b) {
			clear(vo[r.lo:r.hi])
		} else {
			eltwiseRun(vo[r.lo:r.hi], a, b, silu)
		}
	}
}

// eltwiseRun is ref.Add or ref.SiluMul of the bf16 bytes a and b into vo.
func eltwiseRun(vo []bf16.BF16, a, b []byte, silu bool) {
	if len(vo) == 0 {
		return
	}
	if silu {
		ref.SiluMul(vo, bf16.FromBytes(a), bf16.FromBytes(b))
	} else {
		ref.Add(vo, bf16.FromBytes(a), bf16.FromBytes(b))
	}
}

// ---- argmax ----

// argmax: Input BF16 [..., V] (any layout): for each logical row r, the
// first index of the largest value (NaN never wins; all-NaN gives 0), as
// qwen3.Argmax over the widened row. Output UINT32 (or INT32) ROW_MAJOR with
// at least rows elements: element r gets row r's index; later elements are
// left as they are.
func (d *Device) argmax(o tt.Argmax) error {
	const name = "argmax"
	return d.launchOp(name, attrKey{}, []*tt.Tensor{&o.Input, &o.Output}, func(bs []*buffer) error {
		in, out := bs[0], bs[1]
		// ttnn/cpp/ttnn/operations/reduction/argmax/device/
		// argmax_device_operation.cpp validate_on_program_cache_miss, in
		// its order (the preallocated output's checks).
		if in.spec.Memory.Sharded() {
			return opErr(name, "Only INTERLEAVED memory layout is supported for inputs, got %v", in.spec.Memory.Layout)
		}
		if err := wantBF16(name, "Input tensor", in); err != nil {
			return err
		}
		if out.spec.DType != tt.UINT32 {
			return opErr(name, "Only UINT32 is supported for outputs, got %v", out.spec.DType)
		}
		if out.spec.Memory.Sharded() {
			return opErr(name, "Only INTERLEAVED memory layout is supported for outputs, got %v", out.spec.Memory.Layout)
		}
		if out.spec.Layout != tt.RowMajor {
			return opErr(name, "Output tensor must have ROW_MAJOR layout, got %v", out.spec.Layout)
		}
		if out.spec.Volume() < in.g.rows() {
			return contractErr(name, "Output tensor %v holds fewer than %d indices", out.spec.Shape, in.g.rows())
		}
		return nil
	}, opLaunch{run: execArgmax, cbs: argmaxCBs})
}

func execArgmax(l *opLaunch, x *opIO, s *scratch) error {
	in, out := l.bufs[0], l.bufs[1]
	g := in.g
	src := s.buf(0, g.size())
	if err := x.readRows(s, in, src); err != nil {
		return err
	}
	rows := g.rows()
	idx := s.u32(rows)
	for r := range idx {
		a := g.prow(r) * g.wp
		idx[r] = argmaxBF16(src[a : a+g.w])
	}
	w := out.spec.Width()
	pg := s.pageBuf(int(out.pageSize))
	for p := 0; p*w < rows; p++ {
		if (p+1)*w > rows { // partial page: keep the rest
			if err := x.pageIO(out, p, pg, false); err != nil {
				return err
			}
		}
		for i := p * w; i < min((p+1)*w, rows); i++ {
			binary.LittleEndian.PutUint32(pg[4*(i-p*w):], idx[i])
		}
		if err := x.pageIO(out, p, pg, true); err != nil {
			return err
		}
	}
	return nil
}

// argmaxBF16 is qwen3.Argmax over the widened values: the first of the
// largest, NaN never wins, -0 ties +0, all NaN gives 0. It compares the
// bits as sign-magnitude integers (the order of the non-NaN values, both
// zeros 0), 2.4x faster than widening (512 values: 508 ns against 1240).
func argmaxBF16(v []bf16.BF16) uint32 {
	best, bk := 0, int32(math.MinInt32)
	for i, b := range v {
		k := int32(b & 0x7FFF)
		switch {
		case k > 0x7F80: // NaN
			continue
		case b&0x8000 != 0:
			k = -k
		}
		if k > bk {
			best, bk = i, k
		}
	}
	return uint32(best)
}
