package proptest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// The panel: planted foreign engines, each offcard's engine on sim behind
// the protocol with one planted behaviour, run through the protocol client
// and the tolerant judge exactly as `offcard check --engine` runs a user's
// engine. The honest ones must pass; each buggy one must fail with the
// property that names its bug. The judge (tolerances, bands, which
// observations are compared, how wire classifies faults) is what the panel
// tests: proptest/mutants' JudgeCatalog mutates it, and each judge mutant
// must turn a panel verdict (TestJudgeCatalogKilled there).
//
// The test binary serves a planted engine when panelEnv names it.
const panelEnv = "OFFCARD_PANEL_ENGINE"

// panelLogEnv names a file the planted engine appends a line to each time
// it does what makes it what it is (a flip inside the band, a token
// outside it), so the test can tell that the plant was exercised.
const panelLogEnv = "OFFCARD_PANEL_LOG"

// plant is one planted engine: its name, what it does (from the second
// decode call on, unless said), and the verdict it must get.
type plant struct {
	name string
	// prop is the property the judge must name ("" for an honest engine)
	// and detail a text the failure must contain.
	prop, detail string
	// exercised: the test requires the plant's log to be non-empty (the
	// planted behaviour happened at least once).
	exercised bool
	// timeout is the per-call timeout (0: the default).
	timeout time.Duration
	// script is the panel script to run (panelScript when "").
	script string
}

// panelScript: two sequences, the first across a block boundary at 32,
// a re-capture, a finish; captured mode, dynamic width.
const panelScript = `model tiny seed=2
device engine arch=wormhole strict
engine block=32 blocks=12 width=dynamic capacity=2 mode=captured
admit seq=0 prompt=30
admit seq=1 prompt=3
decode steps=8
recapture
decode steps=4 seqs=0
finish seq=1
decode steps=3
`

// panelFixedScript: a fixed width of 4 columns, so a row has pad columns
// past a sequence's blocks.
const panelFixedScript = `model tiny seed=2
device engine arch=wormhole strict
engine block=32 blocks=12 width=fixed:4 capacity=2 mode=captured
admit seq=0 prompt=30
admit seq=1 prompt=3
decode steps=6
finish seq=1
decode steps=2
`

// panelLongScript: more positions for the plants that wait for a
// near-tie or a mid-band token.
const panelLongScript = `model tiny seed=3
device engine arch=wormhole strict
engine block=32 blocks=16 width=dynamic capacity=3 mode=eager
admit seq=0 prompt=5
admit seq=1 prompt=9
admit seq=2 prompt=17
decode steps=40
`

// panelRefusedScript: a trace region (16 KiB) that tiny's decode graph
// (59 KiB of trace) does not fit: the device refuses the first capture and
// the engine runs eager from then on, through the recapture.
const panelRefusedScript = `model tiny seed=2
device engine arch=wormhole trace_region=16384 strict
engine block=32 blocks=12 width=dynamic capacity=2 mode=captured
admit seq=0 prompt=30
admit seq=1 prompt=3
decode steps=6
recapture
decode steps=3
`

// panel is the planted engines. Honest first.
var panel = []plant{
	{name: "honest-exact"},
	{name: "honest-inexact"},  // not exact; every logit 1..4 bf16 steps off
	{name: "honest-at-bound"}, // not exact; logits exactly the stated bound off (8 steps)
	{name: "honest-near-tie", script: panelLongScript, exercised: true}, // not exact; tokens flipped inside the band
	{name: "honest-top-k"}, // top-k logits and digests, exact
	{name: "honest-v1"},    // speaks protocol version 1
	{name: "honest-refused", script: panelRefusedScript, exercised: true}, // its device refuses the capture: eager throughout
	// Bugs of values and tokens.
	{name: "logits-past-bound", prop: PropLogits, detail: "bf16 steps (tolerance 8 steps"},
	{name: "token-past-band", prop: PropLogits, detail: "under ref:", script: panelLongScript, exercised: true},
	{name: "token-far", prop: PropLogits, detail: "far under ref"},
	{name: "exact-lie-logit", prop: PropLogits, detail: "logits differ"},
	{name: "exact-lie-token", prop: PropLogits, detail: "(the engine claims bit-exactness)", script: panelLongScript},
	{name: "top-k-lie", prop: PropLogits, detail: "(the engine claims bit-exactness)"},
	// Bugs of position, page table, KV placement, findings.
	{name: "cur-pos-ahead", prop: PropCurPos, detail: "device cur_pos is 33, the host's seq_len is 32"},
	{name: "cur-pos-behind", prop: PropCurPos, detail: "device cur_pos is 31, the host's seq_len is 32"},
	{name: "page-row-first", prop: PropPageTable, detail: "device page-table row"},
	{name: "page-row-last", prop: PropPageTable, detail: "device page-table row", script: panelFixedScript},
	{name: "page-pad", prop: PropPageTable, detail: "past the sequence's", script: panelFixedScript},
	{name: "idle-row", prop: PropPageTable, detail: "no sequence of the step uses"},
	{name: "kv-block", prop: PropKVWrite, detail: "KV written to block"},
	{name: "kv-row", prop: PropKVWrite, detail: "KV written to block"},
	{name: "kv-missing", prop: PropKVWrite, detail: "missing KV write"},
	{name: "kv-extra", prop: PropKVWrite, detail: "extra KV writes"},
	{name: "kv-pos", prop: PropCurPos, detail: "ran with device cur_pos"},
	{name: "finding", prop: PropStrict, detail: "planted: NOC address out of range"},
	// A bug of the regime: captures and replays reported (and, as far as
	// the protocol shows, run) eagerly, with no trace region to refuse them.
	{name: "regime-all-eager", prop: PropReplay, detail: "wants capture"},
	// Faults of the process and of the protocol.
	{name: "refuse", prop: PropSUTError, detail: "planted refusal"},
	{name: "crash", prop: PropEngine, detail: "engine crashed answering decode"},
	{name: "hang", prop: PropEngine, detail: "engine hung answering decode", timeout: 2 * time.Second},
	{name: "garbage", prop: PropEngine, detail: "engine malformed answering decode"},
	{name: "outputs-short", prop: PropEngine, detail: "outputs for a batch of"},
	{name: "outputs-misplaced", prop: PropEngine, detail: "the request's is seq"},
}

// plantedEngine is OpenSimEngine's engine with the named plant.
type plantedEngine struct {
	wire.Engine
	obs     wire.Observer
	name    string
	bs      int
	decodes int
	batch   []qwen3.Step
	log     string
}

// note appends a line to the plant's log (the panel test reads it).
func (p *plantedEngine) note(format string, a ...any) {
	if p.log == "" {
		return
	}
	f, err := os.OpenFile(p.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", a...)
	f.Close()
}

// servePanel serves the planted engine name on stdin/stdout.
func servePanel(name string) {
	open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
		e, c, err := OpenSimEngine(h)
		if err != nil {
			return nil, c, err
		}
		switch name {
		case "honest-inexact", "honest-at-bound", "honest-near-tie", "logits-past-bound", "token-past-band", "token-far":
			c.Exact = false
		case "honest-top-k", "top-k-lie":
			c.Logits, c.TopK = wire.LogitsTopK, 5
		case "honest-v1":
			c.Version = 1
		}
		return &plantedEngine{Engine: e, obs: e.(wire.Observer), name: name, bs: h.BlockSize, log: os.Getenv(panelLogEnv)}, c, nil
	}
	if err := wire.Serve(os.Stdin, os.Stdout, open); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// stepsUp moves x n bf16 steps (n < 0: down) along the line of values.
func stepsUp(x float32, n int) float32 {
	for ; n > 0; n-- {
		x = nextUp(x)
	}
	for ; n < 0; n++ {
		x = -nextUp(-x)
	}
	return x
}

// atBound moves x away from zero to the last bf16 value the tolerance
// still forgives: within LogitSteps steps or LogitNats nats, whichever
// reaches further (8 steps where a step is over 1/256; the nats bound
// below that).
func atBound(x float32, tol Tolerance) float32 {
	if x == 0 || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return x
	}
	y := x
	for steps := 1; ; steps++ {
		next := math.Float32frombits(math.Float32bits(y) + 1<<16) // one bf16 step further from zero
		if math.Abs(float64(next)-float64(x)) > tol.LogitNats && steps > tol.LogitSteps {
			return y
		}
		y = next
	}
}

// gapToken returns a token whose logit lies between lo and hi nats under
// the row's top and more than minSteps bf16 steps under it (the one
// closest to the middle of lo and hi), or -1.
func gapToken(v []float32, lo, hi float64, minSteps int) int32 {
	top := v[qwen3.Argmax(v)]
	best, bestD := int32(-1), math.Inf(1)
	mid := (lo + hi) / 2
	for i, x := range v {
		g := float64(top - x)
		if g >= lo && g <= hi && bf16.Steps(bf16.FromFloat32(top), bf16.FromFloat32(x)) > minSteps && math.Abs(g-mid) < bestD {
			best, bestD = int32(i), math.Abs(g-mid)
		}
	}
	return best
}

func (p *plantedEngine) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	p.decodes++
	p.batch = append(p.batch[:0], b...)
	late := p.decodes >= 2
	if late {
		switch p.name {
		case "crash":
			fmt.Fprintln(os.Stderr, "engine: bus error")
			os.Exit(3)
		case "hang":
			time.Sleep(time.Hour)
		case "garbage":
			fmt.Println("Traceback (most recent call last):")
		case "refuse":
			return nil, fmt.Errorf("planted refusal")
		}
	}
	out, err := p.Engine.Decode(b)
	if err != nil {
		return out, err
	}
	for i := range out {
		p.edit(&out[i], late)
	}
	if late {
		switch p.name {
		case "outputs-short":
			if len(out) > 1 {
				out = out[:len(out)-1]
			} else {
				out = nil
			}
		case "outputs-misplaced":
			out[0].Pos++
		}
	}
	return out, nil
}

// edit applies the plant to one output's logits and token.
func (p *plantedEngine) edit(o *qwen3.Output, late bool) {
	switch p.name {
	case "honest-inexact":
		for i, x := range o.Logits {
			o.Logits[i] = stepsUp(x, 1+(i+o.Pos)%4)
		}
	case "honest-at-bound":
		for i, x := range o.Logits {
			o.Logits[i] = atBound(x, DefaultTolerance)
		}
	case "logits-past-bound":
		if late {
			for i, x := range o.Logits {
				o.Logits[i] = stepsUp(x, 12)
			}
		}
	case "honest-near-tie":
		if t := gapToken(o.Logits, 0.1, 0.45, 0); t >= 0 && t != o.Token {
			o.Token = t
			p.note("flip seq %d pos %d", o.Seq, o.Pos)
		}
	case "token-past-band":
		if late {
			if t := gapToken(o.Logits, 0.6, 1.5, DefaultTolerance.BandSteps); t >= 0 {
				o.Token = t
				p.note("token past the band seq %d pos %d", o.Seq, o.Pos)
			}
		}
	case "token-far":
		if late {
			worst := int32(0)
			for i, x := range o.Logits {
				if x < o.Logits[worst] {
					worst = int32(i)
				}
			}
			o.Token = worst
		}
	case "exact-lie-logit", "top-k-lie":
		if late {
			top := qwen3.Argmax(o.Logits)
			o.Logits[top] = nextUp(o.Logits[top])
		}
	case "exact-lie-token":
		if late {
			if t := gapToken(o.Logits, 1e-9, 0.5, 0); t >= 0 {
				o.Token = t
			}
		}
	}
}

func (p *plantedEngine) Reset() error { return p.Engine.(wire.Resetter).Reset() }

func (p *plantedEngine) Observe(op string, seqs []int) (wire.Observations, error) {
	o, err := p.obs.Observe(op, seqs)
	if err != nil || op != wire.OpDecode || p.decodes < 2 || len(p.batch) == 0 {
		return o, err
	}
	used := p.batch[0].Pos/p.bs + 1 // columns seq 0's position uses
	switch p.name {
	case "cur-pos-ahead":
		*o.Seqs[0].CurPos++
	case "cur-pos-behind":
		*o.Seqs[0].CurPos--
	case "page-row-first":
		o.Seqs[0].PageRow[0]++
	case "page-row-last":
		if used >= 2 { // past the first column
			o.Seqs[0].PageRow[used-1] = o.Seqs[0].PageRow[used-1] ^ 1
		}
	case "page-pad":
		if used < len(o.Seqs[0].PageRow) {
			o.Seqs[0].PageRow[len(o.Seqs[0].PageRow)-1] = 7
		}
	case "idle-row": // a stale block id in a row of the right width
		row := make([]int32, len(o.Seqs[0].PageRow))
		row[0] = 5
		o.IdleRows = append(o.IdleRows, row)
	case "kv-block":
		o.KVWrites[0].Block++
	case "kv-row":
		o.KVWrites[len(o.KVWrites)-1].Row = (o.KVWrites[len(o.KVWrites)-1].Row + 1) % int64(p.bs)
	case "kv-missing":
		o.KVWrites = o.KVWrites[:len(o.KVWrites)-1]
	case "kv-extra":
		w := o.KVWrites[0]
		w.Pos, w.Row = w.Pos+1, (w.Row+1)%int64(p.bs)
		o.KVWrites = append(o.KVWrites, w)
	case "kv-pos":
		o.KVWrites[0].Pos--
	case "finding":
		o.Findings = append(o.Findings, "planted: NOC address out of range")
	case "honest-refused":
		if o.Regime == wire.RegimeEager { // a captured engine's later decodes capture or replay unless refused
			p.note("eager decode %d", p.decodes)
		}
	case "regime-all-eager":
		if o.Regime == wire.RegimeCapture || o.Regime == wire.RegimeReplay {
			o.Regime = wire.RegimeEager
		}
	}
	return o, nil
}

// TestPanel runs every planted engine through the protocol and the
// tolerant judge: the honest ones pass, each buggy one fails with the
// property that names its bug, and a hang costs one timeout. It is also
// the judge catalog's killer: a judge mutant must turn one of these
// verdicts (proptest/mutants TestJudgeCatalogKilled runs subtests of it on
// this package's test binary built with the mutant).
func TestPanel(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range panel {
		t.Run(p.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "plant.log")
			t.Setenv(panelEnv, p.name)
			t.Setenv(panelLogEnv, log)
			f, err := NewEngineFactory(EngineOptions{Command: []string{exe}, Timeout: p.timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			script := p.script
			if script == "" {
				script = panelScript
			}
			t0 := time.Now()
			fail, _, err := RunScript(mustScript(t, script), f.Factory)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			switch {
			case p.prop == "" && fail != nil:
				t.Errorf("the honest engine %s failed: %v", p.name, fail)
			case p.prop != "" && fail == nil:
				t.Errorf("the planted bug %s passed; want %s with %q", p.name, p.prop, p.detail)
			case p.prop != "" && (fail.Property != p.prop || !strings.Contains(fail.Detail, p.detail)):
				t.Errorf("the planted bug %s failed as %s: %s; want %s with %q", p.name, fail.Property, fail.Detail, p.prop, p.detail)
			}
			if p.timeout > 0 && took > p.timeout+10*time.Second {
				t.Errorf("took %v with a timeout of %v", took, p.timeout)
			}
			if p.exercised {
				if b, _ := os.ReadFile(log); len(b) == 0 {
					t.Errorf("the plant %s never did what it plants: the verdict tested nothing", p.name)
				}
			}
		})
	}
}
