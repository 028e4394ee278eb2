package proptest

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// The test binary doubles as offcard-engine: with OFFCARD_TEST_ENGINE set
// it serves OpenSimEngine on stdin/stdout, misbehaving as the variable
// says (see faultyEngine), or with a ref- mode refEngine; every line both
// ways is checked against the protocol's schema (wiretest.Serve).
func TestMain(m *testing.M) {
	if name := os.Getenv(panelEnv); name != "" {
		servePanel(name) // panel_test.go
	}
	if mode := os.Getenv("OFFCARD_TEST_ENGINE"); mode != "" {
		if strings.HasPrefix(mode, "ref-") {
			if err := wiretest.Serve(os.Stdin, os.Stdout, openRefEngine(mode)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
		open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
			e, c, err := OpenSimEngine(h)
			if err != nil {
				return nil, c, err
			}
			if strings.HasPrefix(mode, "top-k") {
				c.Logits, c.TopK = wire.LogitsTopK, 5
			}
			if mode == "replay-after-reset" {
				c.FollowsHints = false // held to the generic rules only
			}
			return &faultyEngine{Engine: e, obs: e.(wire.Observer), mode: mode}, c, nil
		}
		if err := wiretest.Serve(os.Stdin, os.Stdout, open); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// faultyEngine is OpenSimEngine's engine with one fault, from the second
// decode call on: crash (exit 3), hang, garbage (a line that is no JSON),
// or a lie in one observation: cur-pos (+1), page-row (first entry +1),
// idle-row (a block id in a row no sequence uses), kv-block (a write's
// block +1). "ok" is no fault.
type faultyEngine struct {
	wire.Engine
	obs     wire.Observer
	mode    string
	decodes int
	reset   bool // a reset since the last decode
}

func (f *faultyEngine) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	f.decodes++
	if f.decodes >= 2 {
		switch f.mode {
		case "crash":
			fmt.Fprintln(os.Stderr, "engine: bus error")
			os.Exit(3)
		case "hang":
			time.Sleep(time.Hour)
		case "garbage":
			fmt.Println("Traceback (most recent call last):")
		}
	}
	out, err := f.Engine.Decode(b)
	if f.mode == "top-k-lie" && f.decodes >= 2 && err == nil {
		for i, x := range out[0].Logits {
			out[0].Logits[i] = nextUp(x)
		}
	}
	return out, err
}

func (f *faultyEngine) Reset() error {
	f.reset = true
	return f.Engine.(wire.Resetter).Reset()
}

func (f *faultyEngine) Observe(op string, seqs []int) (wire.Observations, error) {
	o, err := f.obs.Observe(op, seqs)
	if err == nil && op == wire.OpBye && f.mode == "bye-leak" {
		o.Mem.Live = append(o.Mem.Live, wire.Buffer{ID: 999, What: "a leaked page table"})
	}
	if err == nil && op == wire.OpDecode && f.reset {
		f.reset = false
		if f.mode == "replay-after-reset" {
			o.Regime = wire.RegimeReplay
		}
	}
	if err != nil || op != wire.OpDecode || f.decodes < 2 {
		return o, err
	}
	switch f.mode {
	case "cur-pos":
		*o.Seqs[0].CurPos++
	case "page-row":
		o.Seqs[0].PageRow[0]++
	case "idle-row":
		o.IdleRows = append(o.IdleRows, []int32{5})
	case "kv-block":
		o.KVWrites[0].Block++
	case "kv-clear-live":
		w := o.KVWrites[0]
		w.Pos, w.Row, w.Clear = 0, 0, true // a clear over the sequence's position 0
		o.KVWrites = append(o.KVWrites, w)
	case "mem-stray":
		o.Mem.Live = append(o.Mem.Live, wire.Buffer{ID: 999, What: "a scratch tensor"})
	case "mem-persistent":
		o.Mem.Persistent--
	case "regime":
		o.Regime = wire.RegimeEager // the cadence wants a capture at the second step
	case "host-writes":
		if o.Regime == wire.RegimeReplay {
			*o.HostWrites = 1
		}
	case "no-regime":
		o.Regime = ""
	}
	return o, nil
}

func engineFactory(t *testing.T, mode string, timeout time.Duration) *EngineFactory {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OFFCARD_TEST_ENGINE", mode)
	f, err := NewEngineFactory(EngineOptions{Command: []string{exe}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// engineScript: two sequences, the first across a block boundary, a
// re-capture, a finish; the reference engine in captured mode.
const engineScript = `model tiny seed=2
device engine arch=wormhole strict
engine block=32 blocks=12 width=dynamic capacity=2 mode=captured
admit seq=0 prompt=30
admit seq=1 prompt=3
decode steps=4
recapture
decode steps=2 seqs=0
finish seq=1
decode steps=1
`

func mustScript(t *testing.T, text string) Script {
	t.Helper()
	s, err := ParseScript(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEngineCampaign: offcard's engine behind the protocol passes a short
// campaign of the tolerant mode with every observation checked.
func TestEngineCampaign(t *testing.T) {
	f := engineFactory(t, "ok", 0)
	rs := Campaign(Options{Seed: 5, Cases: 4, Factory: f.Factory, Base: Base{Device: EngineDevice}})
	for _, r := range rs {
		if !r.Passed {
			t.Error(r.Report())
		}
	}
	fail, st, err := RunScript(mustScript(t, engineScript), f.Factory)
	if err != nil || fail != nil {
		t.Fatalf("script: %v %v", err, fail)
	}
	if st.DeviceSteps != 30+3+4+2+1 {
		t.Fatalf("%d device steps", st.DeviceSteps)
	}
}

// TestEngineTopK: an engine that sends top-k and digests (exact: the
// digests are compared) passes.
func TestEngineTopK(t *testing.T) {
	f := engineFactory(t, "top-k", 0)
	fail, _, err := RunScript(mustScript(t, engineScript), f.Factory)
	if err != nil || fail != nil {
		t.Fatalf("%v %v", err, fail)
	}
}

// TestEngineFaultsAndLies: each fault and each lying observation is
// caught, by the property it breaks, at the second decode step.
func TestEngineFaultsAndLies(t *testing.T) {
	for _, tc := range []struct{ mode, prop, detail string }{
		{"crash", PropEngine, "engine crashed answering decode"},
		{"hang", PropEngine, "engine hung answering decode"},
		{"garbage", PropEngine, "engine malformed answering decode"},
		{"cur-pos", PropCurPos, "device cur_pos is 33, the host's seq_len is 32"},
		{"page-row", PropPageTable, "device page-table row"},
		{"idle-row", PropPageTable, "no sequence of the step uses"},
		{"kv-block", PropKVWrite, "KV written to block"},
		{"top-k-lie", PropLogits, "(the engine claims bit-exactness)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			timeout := time.Duration(0) // the default: a loaded machine is slow
			if tc.mode == "hang" {
				timeout = 3 * time.Second
			}
			f := engineFactory(t, tc.mode, timeout)
			t0 := time.Now()
			fail, _, err := RunScript(mustScript(t, engineScript), f.Factory)
			if err != nil {
				t.Fatal(err)
			}
			if fail == nil || fail.Property != tc.prop || !strings.Contains(fail.Detail, tc.detail) {
				t.Fatalf("got %v, want %s with %q", fail, tc.prop, tc.detail)
			}
			if fail.Command != 3 || fail.SubStep != 2 {
				t.Fatalf("at %s, want command 3 decode step 2", fail.Where())
			}
			if time.Since(t0) > 60*time.Second {
				t.Fatalf("took %v", time.Since(t0))
			}
		})
	}
}

// TestEngineV2Lies: each lie in a version 2 observation (and in a clear)
// is caught by the property the in-process suite checks with the tap's
// events: at the second decode step, or at the first steady replay
// (host writes), or at bye (what the device still holds).
func TestEngineV2Lies(t *testing.T) {
	for _, tc := range []struct {
		mode, prop, detail string
		cmd, sub           int
	}{
		{"kv-clear-live", PropKVWrite, "overwrites seq 0 pos 0, which is live", 3, 2},
		{"mem-stray", PropMemory, "are live though neither the current page table", 3, 2},
		{"mem-persistent", PropMemory, "of the 42 buffers live at the hello are live", 3, 2},
		{"regime", PropReplay, "the contract's cadence (the hints it follows) wants capture", 3, 2},
		{"host-writes", PropHostWrites, "made 1 host writes, want 0", 2, 3},
		{"no-regime", PropEngine, "no obs.regime in the reply to decode", 3, 2},
		{"replay-after-reset", PropReplay, "it captured no trace since it started or was last reset", 5, 1},
		{"bye-leak", PropMemory, "after bye the device still holds 1 buffers", 7, 0},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := engineFactory(t, tc.mode, 0)
			script := engineScript
			if tc.mode == "host-writes" { // eager, capture, then steady replays
				script = "model tiny seed=2\ndevice engine arch=wormhole strict\nengine block=32 blocks=4 width=dynamic capacity=2 mode=captured\nadmit seq=0 prompt=3\ndecode steps=4\n"
			}
			fail, _, err := RunScript(mustScript(t, script), f.Factory)
			if err != nil {
				t.Fatal(err)
			}
			if fail == nil || fail.Property != tc.prop || !strings.Contains(fail.Detail, tc.detail) {
				t.Fatalf("got %v, want %s with %q", fail, tc.prop, tc.detail)
			}
			if fail.Command != tc.cmd || fail.SubStep != tc.sub {
				t.Fatalf("at %s, want command %d step %d", fail.Where(), tc.cmd, tc.sub)
			}
		})
	}
}

// TestHungCaseNotShrunk: a hang is reported with its schedule and not
// shrunk (each shrink run would wait out the timeout again).
func TestHungCaseNotShrunk(t *testing.T) {
	f := engineFactory(t, "hang", 1500*time.Millisecond)
	rs := Campaign(Options{Seed: 1, Cases: 1, Factory: f.Factory, Base: Base{Device: EngineDevice}})
	r := rs[0]
	if r.Passed || r.Failure == nil || r.Failure.Property != PropEngine || r.Shrinks != 0 || r.Elapsed > 2*time.Second+1500*time.Millisecond {
		t.Fatalf("passed %v, %d shrinks in %v, failure %v; want the original failing with engine, unshrunk, in about one timeout", r.Passed, r.Shrinks, r.Elapsed, r.Failure)
	}
	if !strings.Contains(r.Report(), "engine hung answering") || len(r.Script.Commands) != r.OriginalLen {
		t.Fatalf("report:\n%s", r.Report())
	}
}

// perturbed is a tolerant in-process SUT: ref with its outputs edited.
type perturbed struct {
	d    *ref.Decoder
	edit func(o *qwen3.Output)
}

func (p *perturbed) Config() qwen3.Config         { return p.d.Config() }
func (p *perturbed) BlockSize() int               { return p.d.BlockSize() }
func (p *perturbed) Finish(seq qwen3.SeqID) error { return p.d.Finish(seq) }

func (p *perturbed) Decoder() qwen3.Decoder { return p }
func (p *perturbed) Close() error           { p.d.Close(); return nil }
func (p *perturbed) Tolerance() Tolerance   { return DefaultTolerance }
func (p *perturbed) Prefill(x qwen3.Prefill) ([]qwen3.Output, error) {
	o, err := p.d.Prefill(x)
	for i := range o {
		p.edit(&o[i])
	}
	return o, err
}
func (p *perturbed) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := p.d.Decode(b)
	for i := range o {
		p.edit(&o[i])
	}
	return o, err
}

func perturbFactory(edit func(o *qwen3.Output)) Factory {
	return func(sc Scenario) (SUT, error) {
		w, err := ModelWeights(sc)
		if err != nil {
			return nil, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1})
		return &perturbed{d: d, edit: edit}, err
	}
}

// second returns the index of the second largest logit.
func second(v []float32) int32 {
	top := qwen3.Argmax(v)
	best := int32(-1)
	for i, x := range v {
		if int32(i) != top && (best < 0 || x > v[best]) {
			best = int32(i)
		}
	}
	return best
}

// TestTolerantJudgement: the tolerant mode forgives what it states
// (logits a few bf16 steps off, a greedy flip inside the near-tie band,
// judged teacher-forced) and nothing more.
func TestTolerantJudgement(t *testing.T) {
	steps := func(n int) func(o *qwen3.Output) { // every logit n bf16 steps up
		return func(o *qwen3.Output) {
			for i, x := range o.Logits {
				for k := 0; k < n; k++ {
					x = nextUp(x)
				}
				o.Logits[i] = x
			}
		}
	}
	flips := 0
	for _, tc := range []struct {
		name, prop, detail string
		edit               func(o *qwen3.Output)
	}{
		{"exact", "", "", func(*qwen3.Output) {}},
		{"4-steps", "", "", steps(4)},
		{"64-steps", PropLogits, "bf16 steps (tolerance 8 steps", steps(64)},
		{"near-tie-flip", "", "", func(o *qwen3.Output) {
			s := second(o.Logits)
			if float64(o.Logits[o.Token]-o.Logits[s]) < DefaultTolerance.Band/4 {
				o.Token = s
				flips++
			}
		}},
		{"worst-token", PropLogits, "far under ref", func(o *qwen3.Output) {
			worst := int32(0)
			for i, x := range o.Logits {
				if x < o.Logits[worst] {
					worst = int32(i)
				}
			}
			o.Token = worst
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail, _, err := RunScript(mustScript(t, strings.Replace(engineScript, "device engine", "device perturbed", 1)), perturbFactory(tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.prop == "" && fail != nil:
				t.Fatalf("failed: %v", fail)
			case tc.prop != "" && (fail == nil || fail.Property != tc.prop || !strings.Contains(fail.Detail, tc.detail)):
				t.Fatalf("got %v, want %s with %q", fail, tc.prop, tc.detail)
			}
		})
	}
	if flips == 0 {
		t.Fatal("no near-tie flip happened: the near-tie case tested nothing")
	}
}

func nextUp(x float32) float32 {
	b := math.Float32bits(x)
	if x >= 0 {
		b += 1 << 16
	} else {
		b -= 1 << 16
	}
	return math.Float32frombits(b)
}

// benchDecode runs b.N decode steps of one sequence (prompt 8, captured,
// dynamic width; a fresh sequence every 200 steps) on a SUT.
func benchDecode(b *testing.B, f Factory, device string, batch int, mode qwen3.EngineMode) {
	sc := Scenario{Model: "tiny", ModelSeed: 1, Device: device, Arch: "wormhole", BlockSize: 32, NumBlocks: 64,
		Capacity: batch, Mode: mode, Strict: true}
	sut, err := f(sc)
	if err != nil {
		b.Fatal(err)
	}
	defer sut.Close()
	d := sut.Decoder()
	blocks := func(q int) []int32 {
		bl := make([]int32, 7)
		for i := range bl {
			bl[i] = int32(q*7 + i)
		}
		return bl
	}
	pos := 0
	admit := func() {
		for q := 0; q < batch; q++ {
			if pos > 0 {
				if err := d.Finish(qwen3.SeqID(q)); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := d.Prefill(qwen3.Prefill{Seq: qwen3.SeqID(q), Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}, Blocks: blocks(q)}); err != nil {
				b.Fatal(err)
			}
		}
		pos = 8
	}
	admit()
	st := make([]qwen3.Step, batch)
	pid := 0
	if e, ok := sut.(*EngineSUT); ok {
		pid = e.C.Pid()
	}
	cpu0 := cpuTime(pid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pos == 208 {
			b.StopTimer()
			admit()
			b.StartTimer()
		}
		for q := range st {
			st[q] = qwen3.Step{Seq: qwen3.SeqID(q), Token: int32(q + i%7), Pos: pos, Blocks: blocks(q)}
		}
		if _, err := d.Decode(st); err != nil {
			b.Fatal(err)
		}
		if o, ok := sut.(KVObserver); ok { // as the runner does after every call
			o.TakeKVWrites()
		}
		if o, ok := sut.(OpPosObserver); ok {
			if _, err := o.TakeOpPos(); err != nil {
				b.Fatal(err)
			}
		}
		pos++
	}
	b.StopTimer()
	// CPU of this process and the engine's: wall time on a loaded machine
	// says little (a child process gets its own share of the cores).
	if d := cpuTime(pid) - cpu0; d > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDecodeStep: one decode step in-process (qwen3.Engine on sim;
// captured, a trace replay, and eager, every op launched as a token-by-
// token prefill runs them) vs through the protocol (offcard's engine in a
// child process, full logits and every observation on the wire), batch 1
// and 4.
func BenchmarkDecodeStep(b *testing.B) {
	for _, batch := range []int{1, 4} {
		b.Run(fmt.Sprintf("in-process/batch%d", batch), func(b *testing.B) { benchDecode(b, SimFactory, "sim", batch, qwen3.ModeCaptured) })
		b.Run(fmt.Sprintf("in-process-eager/batch%d", batch), func(b *testing.B) { benchDecode(b, SimFactory, "sim", batch, qwen3.ModeEager) })
		b.Run(fmt.Sprintf("wire/batch%d", batch), func(b *testing.B) {
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			b.Setenv("OFFCARD_TEST_ENGINE", "ok")
			f, err := NewEngineFactory(EngineOptions{Command: []string{exe}})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			benchDecode(b, f.Factory, EngineDevice, batch, qwen3.ModeCaptured)
		})
	}
}
