package sim

import "github.com/offcard/offcard/tt"

// linear with TransposeB under the multi-core program config: ttnn::linear
// transposes b itself first. bound_matmul (operations/matmul/matmul.cpp:
// 209-253) runs ttnn::transpose(b, -1, -2, b.memory_config()) whenever the
// config it picked is none of the reuse configs (1D, 2D, MultiCoreReuse),
// and passes the transposed tensor to ttnn::prim::matmul with transpose_b
// false. The transposed tensor is a local of bound_matmul: allocated in
// b's memory config before the transpose program, released when
// bound_matmul returns, after the matmul is enqueued. Inside a trace
// capture both programs are recorded with its address baked in, and the
// address is free again once the call returns: a tensor allocated there
// after the capture is overwritten by every replay's transpose (strict
// mode names it, checkReplay).

// linearTransposingB is linear(o) for a call whose config is the
// multi-core one and o.TransposeB: the weight transposed into a hidden
// tensor, the linear on it, the hidden tensor freed.
func (d *Device) linearTransposingB(o tt.Linear) error {
	w := o.Weight.Spec
	shape := append([]int(nil), w.Shape...)
	r := len(shape)
	shape[r-2], shape[r-1] = shape[r-1], shape[r-2]
	t, err := d.allocate(tt.Spec{Shape: shape, DType: w.DType, Layout: w.Layout, Memory: w.Memory})
	if err != nil {
		return err
	}
	if d.capturing {
		d.hiddenRefs = d.operandRefs(d.hiddenRefs, nil, []tt.Tensor{t})
	}
	defer d.Free(t) //nolint:errcheck // t is live: Free cannot fail
	if err := d.transposeWH(o.Weight, t); err != nil {
		return err
	}
	o.Weight, o.TransposeB = t, false
	return d.linear(o)
}

// transposeWH is ttnn::prim::transpose's WH program of a TILE interleaved
// tensor into out.
func (d *Device) transposeWH(in, out tt.Tensor) error {
	const name = "transpose"
	return d.launchOp(name, attrKey{}, []*tt.Tensor{&in, &out}, func(bs []*buffer) error { return nil },
		opLaunch{run: execTransposeWH, cbs: transposeWHCBs})
}

// execTransposeWH writes the padded view of bufs[0] transposed into
// bufs[1]: the card transposes whole tiles and their order, padding
// included.
func execTransposeWH(l *opLaunch, x *opIO, s *scratch) error {
	in, out := l.bufs[0], l.bufs[1]
	gi := in.g
	src := s.buf(0, gi.size())
	if err := x.readPadded(s, in, src); err != nil {
		return err
	}
	dst := s.buf(1, out.g.size())
	for o := 0; o < gi.outer; o++ {
		a, b := src[o*gi.hp*gi.wp:], dst[o*gi.hp*gi.wp:]
		for i := 0; i < gi.hp; i++ {
			for j := 0; j < gi.wp; j++ {
				b[j*gi.hp+i] = a[i*gi.wp+j]
			}
		}
	}
	return x.writePadded(s, out, dst, nil)
}

// transposeWHCBs: transpose_wh_program_factory.cpp's CBs for a TILE input
// (operations/data_movement/transpose/device/transpose_wh_program_factory.cpp:166-189):
// c_0 and c_16 of two tiles each, on the whole compute grid (total_cores,
// :158).
func transposeWHCBs(d *Device, bs []*buffer) simpleProgram {
	t := tileBytes(bs[0].spec.DType)
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * t}, {indices: []int{16}, size: 2 * t}}, d.wholeGrid())
}
