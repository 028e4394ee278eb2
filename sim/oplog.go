package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/offcard/offcard/tt"
)

// Observability (issue item 9): an op log and an observer callback, and
// Peek, a debugging read that is not a host transfer.

// Regime says how an op reached the device.
type Regime uint8

// Regimes.
const (
	// Eager: Run executed the op.
	Eager Regime = iota + 1
	// Capture: Run recorded the op into the trace being captured; nothing
	// executed and device memory is unchanged (§5.2).
	Capture
	// Replay: Execute ran the op's recorded launch at its recorded
	// addresses (§5.2).
	Replay
)

func (r Regime) String() string {
	switch r {
	case Eager:
		return "eager"
	case Capture:
		return "capture"
	case Replay:
		return "replay"
	}
	return "Regime(" + strconv.Itoa(int(r)) + ")"
}

// Touch is one tensor an op reads or writes, at the address the launch
// used: for a replay, the address baked at capture, whoever owns it now.
type Touch struct {
	Tensor tt.TensorID // the tensor the op named (at capture, for a replay)
	Write  bool        // the op writes it (an output, or updated in place)
	Buffer tt.BufferType
	Addr   uint64
	Bytes  uint64 // bytes reserved in each bank (DRAM bank or L1 core)
}

// OpEvent is one op as the device saw it.
type OpEvent struct {
	Seq    int // 1, 2, ... in device order, over every regime
	Op     string
	Regime Regime
	Trace  tt.TraceID // the trace captured or replayed (ids start at 0); 0 when eager
	// Args are the op's key non-tensor arguments, e.g.
	// "update_idxs=t3 page_table=t4" or "eps=1e-06".
	Args    string
	Touched []Touch
}

// String is one readable line, e.g.
// "#12 replay(trace 1) paged_update_cache update_idxs=t3 page_table=t4 | r t5@DRAM:0x2000 w t9@DRAM:0x4000".
func (e OpEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %v", e.Seq, e.Regime)
	if e.Regime != Eager {
		fmt.Fprintf(&b, "(trace %d)", e.Trace)
	}
	b.WriteString(" " + e.Op)
	if e.Args != "" {
		b.WriteString(" " + e.Args)
	}
	b.WriteString(" |")
	for _, t := range e.Touched {
		rw := "r"
		if t.Write {
			rw = "w"
		}
		fmt.Fprintf(&b, " %s t%d@%v:%#x", rw, t.Tensor, t.Buffer, t.Addr)
	}
	return b.String()
}

// observing reports whether op events are wanted.
func (d *Device) observing() bool { return d.opt.LogOps || d.opt.OnOp != nil }

// brief reports whether events need no Args and Touched (OnOpBrief and
// no LogOps).
func (d *Device) brief() bool { return d.opt.OnOpBrief && !d.opt.LogOps }

// emit numbers an event, logs it (Options.LogOps) and calls Options.OnOp.
func (d *Device) emit(e OpEvent) {
	d.opSeq++
	e.Seq = d.opSeq
	if d.opt.LogOps {
		d.oplog = append(d.oplog, e)
	}
	if d.opt.OnOp != nil {
		d.opt.OnOp(e)
	}
}

// OpLog returns the logged op events (Options.LogOps), in order.
func (d *Device) OpLog() []OpEvent { return append([]OpEvent(nil), d.oplog...) }

// ResetOpLog forgets the logged op events (the sequence numbers go on).
func (d *Device) ResetOpLog() { d.oplog = d.oplog[:0] }

// touches lists an op's operands (ins, then outs) with their current
// placement; a tensor named twice appears once (written if either use
// writes).
func (d *Device) touches(ins, outs []tt.Tensor) []Touch {
	fp := footprint{refs: d.operandRefs(make([]operandRef, 0, len(ins)+len(outs)), ins, outs)}
	return fp.touches()
}

// operandRefs appends touches' list to dst, as footprint references.
func (d *Device) operandRefs(dst []operandRef, ins, outs []tt.Tensor) []operandRef {
	add := func(t tt.Tensor, write bool) {
		for i := range dst {
			if dst[i].id == t.ID {
				dst[i].write = dst[i].write || write
				return
			}
		}
		b, ok := d.bufs.get(t.ID)
		if !ok {
			return
		}
		dst = append(dst, operandRef{id: b.id, bt: b.bt, addr: b.addr, perBank: d.allocatorOf(b.bt).allocSize(b.perBank), write: write})
	}
	for _, t := range ins {
		add(t, false)
	}
	for _, t := range outs {
		add(t, true)
	}
	return dst
}

func tid(t *tt.Tensor) string {
	if t == nil {
		return "none"
	}
	return "t" + strconv.FormatUint(uint64(t.ID), 10)
}

// opArgs renders an op's key non-tensor arguments (and the roles of its
// control tensors).
func opArgs(op tt.Op) string {
	switch o := op.(type) {
	case *tt.RMSNorm:
		return fmt.Sprintf("eps=%g", o.Epsilon)
	case *tt.Linear:
		return fmt.Sprintf("transpose_b=%t bias=%s", o.TransposeB, tid(o.Bias))
	case *tt.NLPCreateQKVHeadsDecode:
		return fmt.Sprintf("num_heads=%d num_kv_heads=%d", o.NumHeads, o.NumKVHeads)
	case *tt.PagedUpdateCache:
		return ucArgsString(o.UpdateIdxs, o.UpdateIdxsList, o.PageTable, o.ShareCache, o.BatchOffset, o.FP32DestAcc)
	case *tt.PagedFusedUpdateCache:
		return ucArgsString(o.UpdateIdxs, o.UpdateIdxsList, o.PageTable, o.ShareCache, o.BatchOffset, o.FP32DestAcc)
	case *tt.PagedFillCache:
		if o.BatchIdxTensor != nil {
			return "page_table=" + tid(&o.PageTable) + " batch_idx_tensor=" + tid(o.BatchIdxTensor)
		}
		return fmt.Sprintf("page_table=%s batch_idx=%d", tid(&o.PageTable), o.BatchIdx)
	case *tt.PagedSDPADecode:
		return fmt.Sprintf("cur_pos=%s page_table=%s scale=%g k_chunk_size=%d", tid(&o.CurPos), tid(&o.PageTable), o.Scale, o.KChunkSize)
	case *tt.ConcatHeads:
		return fmt.Sprintf("num_heads=%d", o.NumHeads)
	case *tt.NLPCreateQKVHeads:
		return fmt.Sprintf("num_heads=%d num_kv_heads=%d transpose_k_heads=%t", o.NumHeads, o.KVHeads(), o.TransposeK)
	case *tt.RotaryEmbeddingHF:
		if o.Prefill {
			return "is_decode_mode=false"
		}
	case *tt.SDPA:
		s := fmt.Sprintf("is_causal=%t scale=%g q_chunk_size=%d k_chunk_size=%d", o.Causal, o.Scale, o.QChunkSize, o.KChunkSize)
		if o.ExactExp {
			s += " exp_approx_mode=false"
		}
		return s
	case *tt.PlusOne:
		return fmt.Sprintf("skip_negative_entries=%t", o.SkipNegativeEntries)
	case *tt.ChunkedSDPA:
		start := fmt.Sprintf("chunk_start_idx=%d", o.ChunkStart)
		if o.ChunkStartTensor != nil {
			start = "chunk_start_idx_tensor=" + tid(o.ChunkStartTensor)
		}
		return fmt.Sprintf("page_table=%s %s scale=%g q_chunk_size=%d k_chunk_size=%d", tid(&o.PageTable), start, o.Scale, o.QChunkSize, o.KChunkSize)
	case *tt.FillCache:
		return fmt.Sprintf("batch_idx=%d update_idx=%d", o.BatchIdx, o.UpdateIdx)
	case *tt.Slice:
		return fmt.Sprintf("begins=%v ends=%v", o.Begin, o.End)
	}
	return ""
}

func ucArgsString(idx *tt.Tensor, list []int32, pt *tt.Tensor, share bool, batchOffset int, fp32 bool) string {
	s := "update_idxs=" + tid(idx)
	if idx == nil {
		s = fmt.Sprintf("update_idxs=%v", list)
	}
	s += " page_table=" + tid(pt)
	if share {
		s += " share_cache=true"
	}
	if batchOffset != 0 {
		s += " batch_offset=" + strconv.Itoa(batchOffset)
	}
	if fp32 {
		s += " fp32_dest_acc_en=true"
	}
	return s
}

// PeekInto is an incremental Peek: it reads into dst (the tensor's host
// bytes, as Peek's Data) only the pages written since the clock value
// since, calls changed (when not nil) with the element range [lo, hi) of
// every run of host elements that may differ from what dst held, in
// increasing order, and returns the clock value to pass next time.
//   - since 0 reads every page and counts from +0 (bits 0x0000): the runs
//     of pages that hold only +0 bytes are written into dst but not told.
//   - After since > 0, dst must hold what the previous call left there:
//     the runs of the pages written since are told, but of a TILE tensor
//     only its face rows whose bytes changed (a write of one row of a KV
//     cache tile tells that row, not the rows sharing its stripe).
//
// Writes are seen where they land in memory, whatever op or host transfer
// made them.
// Like Peek it changes nothing on the device and reports no findings.
func (d *Device) PeekInto(t tt.Tensor, dst []byte, since uint64, changed func(lo, hi int)) (uint64, error) {
	b, ok := d.live(t)
	if !ok {
		return 0, fmt.Errorf("sim: peek: %v is not allocated", t)
	}
	e := b.spec.DType.Size()
	if len(dst) != b.spec.Volume()*e {
		return 0, fmt.Errorf("sim: peek: %v holds %d bytes, not %d", t, b.spec.Volume()*e, len(dst))
	}
	d.readPagesInto(b, dst, "", since, changed)
	d.clock++
	return d.clock, nil
}

// Peek returns a tensor's current contents as ReadHost would, for tests and
// debugging only: it is not a host transfer (it never fails during trace
// capture and is not counted as one), it reports no strict findings, and it
// changes nothing. It fails only for a tensor that is not allocated.
// Options.OnOp observers may call it (e.g. to check cur_pos after every op).
func (d *Device) Peek(t tt.Tensor) (tt.HostTensor, error) {
	b, ok := d.live(t)
	if !ok {
		return tt.HostTensor{}, fmt.Errorf("sim: peek: %v is not allocated", t)
	}
	h := tt.HostTensor{Shape: append([]int(nil), b.spec.Shape...), DType: b.spec.DType, Layout: b.spec.Layout,
		Data: make([]byte, b.spec.Volume()*b.spec.DType.Size())}
	return h, d.PeekTo(t, h.Data)
}

// PeekTo is Peek into dst, which must hold the tensor's logical bytes
// exactly, for an observer that peeks at every op (nothing is allocated).
func (d *Device) PeekTo(t tt.Tensor, dst []byte) error {
	b, ok := d.live(t)
	if !ok {
		return fmt.Errorf("sim: peek: %v is not allocated", t)
	}
	if len(dst) != b.spec.Volume()*b.spec.DType.Size() {
		return fmt.Errorf("sim: peek: %v holds %d bytes, not %d", t, b.spec.Volume()*b.spec.DType.Size(), len(dst))
	}
	d.readPagesInto(b, dst, "", 0, nil)
	return nil
}
