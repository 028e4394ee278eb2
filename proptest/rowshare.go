package proptest

import (
	"sync"
	"sync/atomic"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/sim"
)

// shareRows turns row sharing on; tests turn it off to show it changes
// nothing.
var shareRows = true

// rowShare hands the rows of ref's matrix products to the simulated device
// the engine under test runs on (sim.Device.RememberLinear). ref computes
// every position before the engine runs it, and a linear's output row is
// a pure function of the weight and the input row, computed by both with
// ref.MatRows: the device's launches find the rows a correct engine asks
// for instead of computing them again. A row is found only for the exact
// weight contents and input bits, so an engine that feeds anything else
// (a wrong position, a stale activation, another weight) computes it, and
// what the device writes does not change.
//
// offcard's engine fuses q_proj, k_proj and v_proj into one weight (their
// rows one after the other, as tt_transformers does) and keeps the other
// weights alone: ref's job of three matrices (q, k and v) is remembered as
// the fused weight, every other matrix as itself.
type rowShare struct {
	dev *sim.Device
	x   []bf16.BF16 // the input rows, narrowed back to bf16
	cat []bf16.BF16 // a fused output row
}

// weightKey names one of ref's weight matrices (immutable, and shared by
// every case with the same weights) by its first element, or a fused one by
// the first matrix's first element and the fused length.
type weightKey struct {
	first *bf16.BF16
	n     int
}

// weightIDs caches sim.LinearWeightID by weightKey: the id hashes the
// whole matrix, once per process instead of once per case. A key holds its
// matrix's first element, so the matrix stays allocated (its address is not
// reused for other contents) while cached; ref's weights are read only.
var weightIDs sync.Map // weightKey -> uint64

// fusedID is the id of ws's matrices (cols columns each) fused in order.
func fusedID(ws [][]bf16.BF16, cols int) uint64 {
	n := 0
	for _, w := range ws {
		n += len(w)
	}
	key := weightKey{&ws[0][0], n}
	if id, ok := weightIDs.Load(key); ok {
		return id.(uint64)
	}
	w := ws[0]
	if len(ws) > 1 {
		w = make([]bf16.BF16, 0, n)
		for _, p := range ws {
			w = append(w, p...)
		}
	}
	id := sim.LinearWeightID(w, n/cols, cols)
	weightIDs.Store(key, id)
	return id
}

// products is the oracle's ref.Options.Products.
func (r *rowShare) products(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16) {
	if cap(r.x) < len(xs)*cols {
		r.x = make([]bf16.BF16, len(xs)*cols)
	}
	x := r.x[:len(xs)*cols]
	for b, xf := range xs {
		bf16.Narrow(x[b*cols:(b+1)*cols], xf[:cols]) // exact: xf holds widened bf16 values
	}
	row := func(b int) []bf16.BF16 { return x[b*cols : (b+1)*cols] }
	if len(ws) == 3 { // q, k and v
		wid := fusedID(ws, cols)
		for b := range xs {
			r.cat = append(append(append(r.cat[:0], outs[0][b]...), outs[1][b]...), outs[2][b]...)
			r.dev.RememberLinear(wid, row(b), r.cat)
		}
		return
	}
	for m := range ws {
		wid := fusedID(ws[m:m+1], cols)
		for b := range xs {
			r.dev.RememberLinear(wid, row(b), outs[m][b])
		}
	}
}

// linComputed and linFound count the linear output rows the simulated
// devices of finished runs computed and found (sim.Device.LinearRows), for
// tests and benchmarks.
var linComputed, linFound atomic.Int64

func linRows() (computed, found int64) { return linComputed.Load(), linFound.Load() }
