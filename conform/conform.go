package conform

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/sim"
	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
)

// PinnedCommit is the tt-metal commit offcard's contract follows.
const PinnedCommit = "622c6fb9"

// MinCorrelation is the least Pearson correlation between sim's and the
// device's output of a math op.
const MinCorrelation = 0.999

// Bounds are the largest elementwise differences, in bf16 steps, allowed
// between sim (ref's kernels, canonical accumulation order) and a device
// for each math op. They were stated before measuring: a bf16 result
// rounded once from a float32 computed in another order is within 1 step
// for an elementwise op, and within a few steps after a reduction (the
// rounding of intermediate values at ref's rounding points adds one each).
var Bounds = map[string]int{
	"add":      1,
	"multiply": 2, // silu(gate)*up: silu rounded to bf16 in ref, not in a float loop
	"linear":   4,
	"rms_norm": 4,
	// x*cos + rotate(x)*sin: two products and a sum
	"rotary_embedding_hf":    2,
	"rotary_embedding_llama": 2,
	// scores, softmax (exp), weighted sum over up to 128 positions
	"paged_scaled_dot_product_attention_decode": 4,
	// the same per query row, over up to 40 positions (causal prefill)
	"scaled_dot_product_attention": 4,
	// the same per query row, over up to 128 positions read through a
	// page table (a prefill chunk after a cached prefix)
	"chunked_scaled_dot_product_attention": 4,
}

// Case is one conformance case.
type Case struct {
	Name string
	Run  func(p *Pair) error
}

// Result is a case's outcome.
type Result struct {
	Name   string
	OK     bool
	Detail string // what differed, or what was compared
}

// Options configure Run.
type Options struct {
	Lib  string
	Tthw tthw.Options
	// Only runs the cases whose name contains it (all when empty).
	Only string
}

// Report is the outcome of a run.
type Report struct {
	Lib       string
	BuildInfo map[string]string
	Facts     tthw.Facts
	Results   []Result
}

// Failed counts the failed cases.
func (r Report) Failed() int {
	n := 0
	for _, x := range r.Results {
		if !x.OK {
			n++
		}
	}
	return n
}

// Pair is a simulator and a device library opened for one case.
type Pair struct {
	Sim  *sim.Device
	Card *tthw.Device
	// TraceRegion is the trace region size the device was opened with.
	TraceRegion int64
	// detail collects what the case compared, for the report line.
	detail []string
}

// Note adds to the case's report line.
func (p *Pair) Note(format string, a ...any) { p.detail = append(p.detail, fmt.Sprintf(format, a...)) }

// Devs are the two devices, sim first.
func (p *Pair) Devs() [2]tt.Device { return [2]tt.Device{p.Sim, p.Card} }

func openPair(o Options) (*Pair, error) {
	card, err := tthw.Open(o.Lib, o.Tthw)
	if err != nil {
		return nil, err
	}
	arch := sim.Wormhole
	if card.Facts().Arch == "blackhole" {
		arch = sim.Blackhole
	}
	s, err := sim.New(sim.Options{Arch: arch, TraceRegionSize: o.Tthw.TraceRegionSize})
	if err != nil {
		card.Close()
		return nil, err
	}
	return &Pair{Sim: s, Card: card, TraceRegion: int64(o.Tthw.TraceRegionSize)}, nil
}

// Open checks that the library loads and reports what it is (a failure
// here is a usage error, not a difference).
func Open(o Options) (Report, error) {
	card, err := tthw.Open(o.Lib, o.Tthw)
	if err != nil {
		return Report{}, err
	}
	defer card.Close()
	return Report{Lib: o.Lib, BuildInfo: card.BuildInfo(), Facts: card.Facts()}, nil
}

// Run runs the cases, each on a fresh pair of devices; progress, when
// non-nil, is called after each case.
func Run(o Options, cases []Case, progress func(Result)) (Report, error) {
	rep, err := Open(o)
	if err != nil {
		return rep, err
	}
	for _, c := range cases {
		if o.Only != "" && !strings.Contains(c.Name, o.Only) {
			continue
		}
		res := runCase(o, c)
		rep.Results = append(rep.Results, res)
		if progress != nil {
			progress(res)
		}
	}
	return rep, nil
}

func runCase(o Options, c Case) (res Result) {
	res.Name = c.Name
	p, err := openPair(o)
	if err != nil {
		res.Detail = "open: " + err.Error()
		return res
	}
	defer func() {
		lk, cerr := p.Card.Close()
		if res.OK && cerr != nil {
			res.OK, res.Detail = false, "close: "+cerr.Error()
		}
		_ = lk // a case may leave tensors live; Close frees them
	}()
	if err := c.Run(p); err != nil {
		res.Detail = err.Error()
		return res
	}
	res.OK = true
	res.Detail = strings.Join(p.detail, "; ")
	return res
}

// run executes op on d (the one place that knows Run's signature).
func run(d tt.Device, op tt.Op) error {
	outs, err := d.Run(op)
	for _, t := range outs {
		_ = d.Free(t) // conform cases run no allocating op through run
	}
	return err
}

// sameErr compares two devices' answers to the same call: both succeed, or
// both fail with the same tt-metal text, whole (its format arguments filled
// as ttnn fills them).
func sameErr(what string, es, ec error) error {
	switch {
	case es == nil && ec == nil:
		return nil
	case es == nil:
		return fmt.Errorf("%s: sim succeeds, device fails: %v", what, ec)
	case ec == nil:
		return fmt.Errorf("%s: sim fails (%v), device succeeds", what, es)
	}
	var ts, tc *tt.Error
	if !errors.As(es, &ts) {
		return fmt.Errorf("%s: sim fails outside the contract: %v", what, es)
	}
	if !errors.As(ec, &tc) {
		return fmt.Errorf("%s: device fails with no tt-metal text (%v); sim says %q", what, ec, ts.Msg)
	}
	if ts.Msg != tc.Msg {
		return fmt.Errorf("%s: sim says %q, device says %q", what, ts.Msg, tc.Msg)
	}
	return nil
}

// alloc allocates spec on both; the allocator must give the same address.
func (p *Pair) alloc(spec tt.Spec) ([2]tt.Tensor, error) {
	var ts [2]tt.Tensor
	var errs [2]error
	for i, d := range p.Devs() {
		ts[i], errs[i] = d.Allocate(spec)
	}
	if err := sameErr("allocate "+spec.String(), errs[0], errs[1]); err != nil {
		return ts, err
	}
	if errs[0] == nil && ts[0].Addr != ts[1].Addr {
		return ts, fmt.Errorf("allocate %v: sim gives address %#x, device %#x", spec, ts[0].Addr, ts[1].Addr)
	}
	return ts, errs[0]
}

func (p *Pair) free(t [2]tt.Tensor) error {
	return sameErr("free", p.Sim.Free(t[0]), p.Card.Free(t[1]))
}

func (p *Pair) write(t [2]tt.Tensor, h tt.HostTensor) error {
	return sameErr("write "+t[0].Spec.String(), p.Sim.WriteHost(t[0], h), p.Card.WriteHost(t[1], h))
}

// op runs the same op on both; mk builds it for device i's tensors.
func (p *Pair) op(name string, mk func(i int) tt.Op) error {
	return sameErr(name, run(p.Sim, mk(0)), run(p.Card, mk(1)))
}

// read reads both and returns the host tensors.
func (p *Pair) read(t [2]tt.Tensor) (tt.HostTensor, tt.HostTensor, error) {
	hs, es := p.Sim.ReadHost(t[0])
	hc, ec := p.Card.ReadHost(t[1])
	if err := sameErr("read "+t[0].Spec.String(), es, ec); err != nil {
		return hs, hc, err
	}
	return hs, hc, es
}

// exact requires the two devices to hold the same bytes in t.
func (p *Pair) exact(what string, t [2]tt.Tensor) error {
	hs, hc, err := p.read(t)
	if err != nil {
		return err
	}
	if !bytes.Equal(hs.Data, hc.Data) {
		return fmt.Errorf("%s: %s", what, firstDiff(hs, hc))
	}
	return nil
}

// firstDiff describes the first differing element of two host tensors.
func firstDiff(a, b tt.HostTensor) string {
	e := a.DType.Size()
	if len(a.Data) != len(b.Data) {
		return fmt.Sprintf("sim holds %d bytes, device %d", len(a.Data), len(b.Data))
	}
	n := 0
	first := -1
	for i := 0; i+e <= len(a.Data); i += e {
		if !bytes.Equal(a.Data[i:i+e], b.Data[i:i+e]) {
			if first < 0 {
				first = i / e
			}
			n++
		}
	}
	if first < 0 {
		return "equal"
	}
	return fmt.Sprintf("%d of %d elements differ; first at %s: sim %s, device %s", n, len(a.Data)/e,
		index(a.Shape, first), elem(a, first), elem(b, first))
}

func index(shape []int, flat int) string {
	idx := make([]string, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		idx[i] = fmt.Sprint(flat % shape[i])
		flat /= shape[i]
	}
	return "[" + strings.Join(idx, ",") + "]"
}

func elem(h tt.HostTensor, i int) string {
	switch h.DType {
	case tt.BF16:
		return fmt.Sprint(h.BF16s()[i].Float32())
	case tt.FP32:
		return fmt.Sprint(h.Float32s()[i])
	case tt.UINT32, tt.UINT16:
		if h.DType == tt.UINT16 {
			return fmt.Sprint(uint16(h.Data[2*i]) | uint16(h.Data[2*i+1])<<8)
		}
		return fmt.Sprint(h.Uint32s()[i])
	}
	return fmt.Sprint(h.Int32s()[i])
}

// Floor is where a math op's error stops being measured relative to the
// element itself: a bf16 step is taken at the larger of the two values and
// Floor times the output's RMS, so that an element near zero — where
// x*cos + rot*sin or an attention average cancels terms of the output's
// size, each rounded to bf16 at ref's rounding points — is measured in the
// steps of the values it was computed from, not in its own tiny steps.
// (A first measurement with 1/16 counted 6-18 such steps on the loopback's
// rotary and SDPA outputs: rounding of cancelling terms, not a bug.)
const Floor = 1.0

// steps is |a-b| in bf16 steps at max(|a|, |b|, floor).
func steps(a, b, floor float32) float64 {
	m := max(abs32(a), abs32(b), floor)
	return math.Abs(float64(a)-float64(b)) / float64(bf16.ULP(bf16.FromFloat32(m)))
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

// close requires the device's BF16 output to be within the op's bound of
// sim's, element by element (steps at max(|sim|, |device|, Floor*RMS)),
// and correlated with it.
func (p *Pair) close(op string, t [2]tt.Tensor) error {
	hs, hc, err := p.read(t)
	if err != nil {
		return err
	}
	bound, ok := Bounds[op]
	if !ok {
		return fmt.Errorf("%s: no bound stated", op)
	}
	a, b := hs.BF16s(), hc.BF16s()
	if len(a) != len(b) {
		return fmt.Errorf("%s: %d elements on sim, %d on the device", op, len(a), len(b))
	}
	af, bf := make([]float64, len(a)), make([]float64, len(b))
	var ss float64
	for i := range a {
		if a[i].IsNaN() || b[i].IsNaN() {
			return fmt.Errorf("%s: NaN at %s (sim %v, device %v)", op, index(hs.Shape, i), a[i].Float32(), b[i].Float32())
		}
		af[i], bf[i] = float64(a[i].Float32()), float64(b[i].Float32())
		ss += af[i] * af[i]
	}
	floor := float32(Floor * math.Sqrt(ss/float64(max(len(a), 1))))
	worst, at := 0.0, 0
	for i := range a {
		if s := steps(a[i].Float32(), b[i].Float32(), floor); s > worst {
			worst, at = s, i
		}
	}
	corr := stat.Correlation(af, bf, nil)
	if worst > float64(bound) {
		return fmt.Errorf("%s: %.1f bf16 steps apart at %s (sim %v, device %v), bound %d", op, worst, index(hs.Shape, at), a[at].Float32(), b[at].Float32(), bound)
	}
	if math.IsNaN(corr) || corr < MinCorrelation {
		return fmt.Errorf("%s: correlation %.6f with sim, want >= %v", op, corr, MinCorrelation)
	}
	p.Note("max %.2g steps (bound %d), r=%.6f", worst, bound, corr)
	return nil
}
