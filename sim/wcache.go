package sim

import (
	"slices"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// A linear's weight is read, untilized and (for a [k, n] weight)
// transposed at every launch, though an engine writes its weights once.
// The device keeps each DRAM-interleaved weight it decoded as [n][k] rows
// (canonWeight's process-wide copy of those values), valid while no byte
// of the weight's bank range has been written since: every write to DRAM
// (host copy, op output, KV update, a replay writing through a stale
// address) that touches the range drops the entry. So a
// launch reads exactly the bytes the banks hold, as before; it only
// skips decoding them again. The entry is keyed by address, spec and
// transposition, not by tensor: a tensor allocated where a freed weight
// was, with the same spec and not yet written, holds those stale bytes on
// the card too.

type wcKey struct {
	addr uint64
	spec string
	flag bool
}

type wcItem struct {
	key wcKey
	*wcEntry
}

type wcEntry struct {
	wt     []bf16.BF16 // [n][k], read only: canonWeight's copy
	id     uint64      // canonWeight(wt)
	lo, hi uint64      // bank-local byte range [addr, addr+perBank)
	last   lastRows    // the rows of the weight's last launches
}

// wcache is the device's decoded weights, and the watch its DRAM channels
// call on every write.
type wcache struct {
	m        map[wcKey]*wcEntry
	ents     []wcItem // m's entries, for the watch to scan without a map walk
	lo, hi   uint64   // union of the entries' ranges (empty: lo >= hi)
	bankSize uint64
}

// wrote is called by a DRAM channel's mem on every write at channel offset
// a of n bytes.
func (c *wcache) wrote(a, n uint64) {
	la := a
	for la >= c.bankSize { // a channel holds one or two banks: no division
		la -= c.bankSize
	}
	if la+n > c.bankSize {
		c.drop(0, c.bankSize) // crosses into the next bank: drop all
		return
	}
	if la < c.hi && la+n > c.lo {
		c.drop(la, la+n)
	}
}

// drop forgets the entries whose range meets [lo, hi). A write between
// kept weights (an activation allocated among them) meets none and
// changes nothing.
func (c *wcache) drop(lo, hi uint64) {
	meets := func(e wcItem) bool { return e.lo < hi && e.hi > lo }
	if !slices.ContainsFunc(c.ents, meets) {
		return
	}
	c.lo, c.hi = ^uint64(0), 0
	c.ents = slices.DeleteFunc(c.ents, func(e wcItem) bool {
		if meets(e) {
			delete(c.m, e.key)
			return true
		}
		c.lo, c.hi = min(c.lo, e.lo), max(c.hi, e.hi)
		return false
	})
}

// wcMaxElems bounds the weights kept (a full-size model's weights would
// double its memory; they are decoded at every launch, as before).
const wcMaxElems = 1 << 22

// cacheable reports whether a weight buffer's decoded rows may be kept:
// DRAM interleaved (its pages at [addr, addr+perBank) of every bank), and
// small.
func cacheable(b *buffer) bool {
	return b.bt == tt.DRAM && !b.spec.Memory.Sharded() && b.spec.Volume() <= wcMaxElems
}

// linearWeight returns the weight operand of a linear as rows [n][k] (HF's
// [out, in]), the id of its contents (canonWeight; 0 for a weight not
// kept) and, for a kept one, its last rows; transposed (flag) means w is
// stored [n, k]. The slice is read only: a cached one is shared by later
// launches.
func (x *opIO) linearWeight(s *scratch, w *buffer, flag bool, k, n int) ([]bf16.BF16, uint64, *lastRows, error) {
	d := x.d
	key := wcKey{w.addr, w.key, flag}
	keep := cacheable(w) && d.wc.m != nil
	if keep {
		if e, ok := d.wc.m[key]; ok {
			return e.wt, e.id, &e.last, nil
		}
	}
	gw := w.g
	wt := s.buf(1, n*k) // a kept weight is read from its canonical copy
	if flag && gw.w == gw.wp && gw.h == gw.hp {
		if err := x.readPadded(s, w, wt); err != nil {
			return nil, 0, nil, err
		}
	} else {
		raw := s.buf(2, gw.size())
		if err := x.readPadded(s, w, raw); err != nil {
			return nil, 0, nil, err
		}
		if flag {
			for o := 0; o < n; o++ {
				r := gw.prow(o) * gw.wp
				copy(wt[o*k:(o+1)*k], raw[r:r+k])
			}
		} else {
			transpose(wt, raw, gw, k, n)
		}
	}
	if keep {
		id, canon := canonWeight(wt, n, k)
		e := &wcEntry{wt: canon, id: id, lo: w.addr, hi: w.addr + w.perBank}
		d.wc.m[key] = e
		d.wc.ents = append(d.wc.ents, wcItem{key, e})
		d.wc.lo, d.wc.hi = min(d.wc.lo, e.lo), max(d.wc.hi, e.hi)
		return e.wt, e.id, &e.last, nil
	}
	return wt, 0, nil, nil
}

// lastRows are a kept weight's output rows at its last launches on the
// device, one per input row index below lastRowsMax, each with the input
// (and bias) row it came from. A decode step feeds most rows as the step
// before did (a slot whose input did not change), and comparing a row
// with its last input costs less than the row memo's look-up
// (linmemo.go). An output row is a pure function of the weight, the bias
// and the input row, so a row whose input and bias equal the last ones
// takes the last output.
type lastRows struct {
	// recs: per row index, the input (the weight's k values), the bias
	// (nb, 0 without) and the output (the weight's n); nil: none. With k
	// and n the weight's, the length tells nb.
	recs [][]bf16.BF16
}

// lastRowsMax bounds the row indexes kept: a decode's slots (a prefill's
// later rows are new prompts' and are not looked for again).
const lastRowsMax = tt.TileSize

// get copies into dst the last output of row m when its input and bias
// were x and bias.
func (r *lastRows) get(m int, bias, x, dst []bf16.BF16) bool {
	if r == nil || m >= len(r.recs) {
		return false
	}
	rec, k, nb := r.recs[m], len(x), len(bias)
	if len(rec) != k+nb+len(dst) || !bf16.Equal(rec[:k], x) || !bf16.Equal(rec[k:k+nb], bias) {
		return false
	}
	copy(dst, rec[k+nb:])
	return true
}

// put keeps out as row m's output for input x and bias.
func (r *lastRows) put(m int, bias, x, out []bf16.BF16) {
	if r == nil || m >= lastRowsMax {
		return
	}
	for len(r.recs) <= m {
		r.recs = append(r.recs, nil)
	}
	k, nb := len(x), len(bias)
	rec := r.recs[m]
	if cap(rec) < k+nb+len(out) {
		rec = make([]bf16.BF16, k+nb+len(out))
	}
	rec = rec[:k+nb+len(out)]
	copy(rec, x)
	copy(rec[k:], bias)
	copy(rec[k+nb:], out)
	r.recs[m] = rec
}
