package sim

import (
	"encoding/binary"
	"math"

	"github.com/offcard/offcard/tt"
)

// plusOne is ttnn.plus_one (§4): in place on an INT32 or UINT32 ROW_MAJOR
// tensor of rank 1..4; for each of the H rows (pages) the W = padded_shape[-1]
// values are read, incremented and written back. With SkipNegativeEntries a
// value v (read as int32) changes only if 0 <= v < INT32_MAX, so -1 stays -1;
// without it -1 becomes 0 and INT32_MAX wraps.
func (d *Device) plusOne(o tt.PlusOne) error {
	const name = "plus_one"
	return d.launchOp(name, attrKey{b2u(o.SkipNegativeEntries)}, []*tt.Tensor{&o.Input}, func(bs []*buffer) error {
		in := bs[0]
		if in.spec.DType != tt.INT32 && in.spec.DType != tt.UINT32 {
			return opErr(name, tt.MsgPlusOneDType)
		}
		if in.spec.Layout != tt.RowMajor {
			return opErr(name, "Only ROW_MAJOR layout is supported for inputs!")
		}
		if r := len(in.spec.Shape); r < 1 || r > 4 {
			return opErr(name, "must have 1 to 4 dimensions for input tensor")
		}
		return nil
	}, opLaunch{flag: o.SkipNegativeEntries, run: execPlusOne, cbs: plusOneCBs})
}

func execPlusOne(l *opLaunch, x *opIO, s *scratch) error {
	in := l.bufs[0]
	x.checkReads = true
	w := in.spec.Width()
	pg := s.pageBuf(int(in.pageSize))
	for p := 0; p < in.numPages; p++ {
		if err := x.pageIO(in, p, pg, false); err != nil {
			return err
		}
		for i := 0; i < w; i++ {
			v := int32(binary.LittleEndian.Uint32(pg[4*i:]))
			if l.flag && (v < 0 || v == math.MaxInt32) {
				continue
			}
			binary.LittleEndian.PutUint32(pg[4*i:], uint32(v)+1)
		}
		if err := x.pageIO(in, p, pg, true); err != nil {
			return err
		}
	}
	return nil
}
