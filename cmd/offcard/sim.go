package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

func init() {
	commands["sim"] = command{"run the paged decode engine on the simulator against the oracle", runSim}
}

// simRun is one `offcard sim` schedule: Batch sequences, sequence i with a
// prompt of PromptLen+i tokens, decoded greedily for Steps steps; sequence i
// finishes after Steps-2i steps (at least 1), so the batch shrinks from the
// longest sequence down and a dynamic page table narrows. It runs as a
// proptest script, so every property of the suite is checked after every
// step, not only agreement with ref.
type simRun struct {
	synth, width, mode, arch  string
	prefill                   string
	l1                        string
	seed                      uint64
	blockSize, recaptureEvery int
	batch, promptLen, steps   int
	strict                    bool
	dump                      string
}

func runSim(e *env, args []string) error {
	fs := newFlags(e, "sim", "[--synth tiny] [--seed N] [--block-size 32] [--width fixed:N|dynamic] [--mode eager|captured] [--prefill program|decode] [--recapture-every N] [--batch N] [--prompt-len N] [--steps N] [--strict] [--arch wormhole|blackhole] [--l1 poison|zero|stale]")
	var r simRun
	fs.StringVar(&r.synth, "synth", "tiny", "synthetic model preset")
	fs.Uint64Var(&r.seed, "seed", 1, "seed of the synthetic weights")
	fs.IntVar(&r.blockSize, "block-size", 32, "KV block size (a multiple of 32)")
	fs.StringVar(&r.width, "width", "dynamic", "page-table width policy: fixed:N or dynamic")
	fs.StringVar(&r.mode, "mode", "captured", "eager or captured")
	fs.StringVar(&r.prefill, "prefill", "program", "how prompts run: program (one multi-token program) or decode (token by token through the decode graph)")
	fs.IntVar(&r.recaptureEvery, "recapture-every", 0, "re-capture the trace every N steps (0: only when needed)")
	fs.IntVar(&r.batch, "batch", 2, fmt.Sprintf("number of sequences (1..%d)", proptest.MaxCapacity))
	fs.IntVar(&r.promptLen, "prompt-len", 30, "prompt length of the first sequence (sequence i has prompt-len+i)")
	fs.IntVar(&r.steps, "steps", 40, "decode steps")
	fs.BoolVar(&r.strict, "strict", false, "strict mode: the simulator's sanitizer; a finding fails the run")
	fs.StringVar(&r.arch, "arch", "wormhole", "wormhole or blackhole")
	fs.StringVar(&r.l1, "l1", "poison", "what fresh L1 holds: poison (NaN/huge ids, faults loudly), zero (a cleared card: a read past a page-table row yields block 0) or stale (earlier programs' bytes)")
	fs.StringVar(&r.dump, "dump", "", "write the engine's tokens to `FILE.jsonl` (a prompt record per sequence, a step record per generated token; also when a property fails)")
	if err := fs.parse(args); err != nil {
		return err
	}
	s, err := r.script()
	if err != nil {
		return err
	}
	if r.dump == "" {
		return runTranscript(e, s, nil)
	}
	f, err := createAtomic(r.dump)
	if err != nil {
		return err
	}
	defer f.Abort()
	dw := newDumpRecorder(f, s.Scenario)
	err = runTranscript(e, s, dw)
	if err != nil && !errors.Is(err, errFound) {
		return err
	}
	if cerr := dw.commit(f); cerr != nil {
		if err != nil {
			// A failed dump is reported, and never hides the verdict.
			fmt.Fprintf(e.stderr, "offcard sim: %s\n", oneLine(cerr.Error()))
			return err
		}
		return cerr
	}
	return err
}

// script turns the flags into a proptest script.
func (r *simRun) script() (proptest.Script, error) {
	policy, err := kvpage.ParseWidthPolicy(r.width)
	if err != nil {
		return proptest.Script{}, badInput{err}
	}
	mode, err := qwen3.ParseEngineMode(r.mode)
	if err != nil {
		return proptest.Script{}, badInput{err}
	}
	prefill, err := qwen3.ParsePrefillMode(r.prefill)
	if err != nil {
		return proptest.Script{}, badInput{err}
	}
	switch {
	case r.batch < 1 || r.batch > proptest.MaxCapacity:
		return proptest.Script{}, bad("--batch must be in 1..%d, got %d", proptest.MaxCapacity, r.batch)
	case r.promptLen < 1:
		return proptest.Script{}, bad("--prompt-len must be ≥ 1, got %d", r.promptLen)
	case r.steps < 0:
		return proptest.Script{}, bad("--steps must be ≥ 0, got %d", r.steps)
	}
	need := 0
	for i := range r.batch {
		need += kvpage.BlocksFor(r.promptLen+i+r.steps, max(r.blockSize, 1))
	}
	if fw, ok := policy.FixedWidth(); ok {
		need = max(need, fw)
	}
	sc := proptest.Scenario{
		Model: r.synth, ModelSeed: r.seed, Device: "sim", Arch: r.arch, Strict: r.strict, L1: r.l1,
		BlockSize: r.blockSize, NumBlocks: need, Width: policy, Capacity: r.batch,
		Mode: mode, RecaptureEvery: r.recaptureEvery, Prefill: prefill,
	}
	if err := sc.Validate(); err != nil {
		return proptest.Script{}, bad("%v", err)
	}
	cfg, _ := qwen3.Preset(r.synth)
	if n := r.promptLen + r.batch - 1 + r.steps; n > sc.MaxLen(cfg) {
		return proptest.Script{}, bad("prompt-len+batch-1+steps = %d exceeds the %d positions this model and width allow", n, sc.MaxLen(cfg))
	}
	s := proptest.Script{Scenario: sc}
	for i := range r.batch {
		s.Commands = append(s.Commands, proptest.Cmd{Kind: proptest.Admit, Seq: i, Prompt: r.promptLen + i})
	}
	// Sequence i finishes after max(steps-2i, 1) steps: decode in runs
	// between finishes, longest sequence (the last admitted) first.
	done := 0
	for i := r.batch - 1; i >= 0 && r.steps > 0; i-- {
		for end := max(r.steps-2*i, 1); done < end; {
			k := min(end-done, proptest.MaxDecodeSteps)
			s.Commands = append(s.Commands, proptest.Cmd{Kind: proptest.Decode, Steps: k})
			done += k
		}
		s.Commands = append(s.Commands, proptest.Cmd{Kind: proptest.Finish, Seq: i})
	}
	return s, nil
}

// runTranscript runs s on the engine on sim against ref and prints a line
// per engine call: a step's verdict is known when the suite lets the next
// call start, or at the end.
func runTranscript(e *env, s proptest.Script, rec *dumpRecorder) error {
	fmt.Fprintf(e.stdout, "offcard sim:\n%s\n", indent(s.String()))
	t := &transcript{w: e.stdout, rec: rec}
	fail, stats, err := proptest.RunScript(s, func(sc proptest.Scenario) (proptest.SUT, error) {
		sut, err := proptest.SimFactory(sc)
		if err != nil {
			return nil, err
		}
		t.sut = sut.(*proptest.SimSUT)
		return transcriptSUT{t.sut, t}, nil
	})
	if err != nil {
		return err
	}
	if fail != nil {
		t.flush("FAILED")
		fmt.Fprintf(e.stdout, "FAILED %s\n  at %s\n  %s\n", fail.Property, fail.Where(), fail.Detail)
		for _, a := range fail.AlsoLines() {
			fmt.Fprintf(e.stdout, "  also failed at that step: %s\n", a)
		}
		if fail.Finding != "" {
			fmt.Fprintf(e.stdout, "  strict finding: %s\n", fail.Finding)
		}
		if fail.Grids != "" {
			fmt.Fprint(e.stdout, indent(fail.Grids)+"\n")
		}
		return errFound
	}
	t.flush("equal")
	st := t.sut.Eng.Stats()
	fmt.Fprintf(e.stdout, "done: %d commands, %d device steps (%d prefill), %d captures, %d replays, %d trace releases, %d resets\n",
		stats.Commands, st.Steps, st.PrefillSteps, st.Captures, st.Replays, st.Releases, st.Resets)
	fmt.Fprintf(e.stdout, "page table: %d reallocations, %d retired (%d freed after their trace, %d still held)\n",
		st.PageTableReallocs, st.Retired, st.RetiredFreed, st.RetiredLive)
	var byRegime []string
	for g := range qwen3.NumRegimes {
		if n := st.StepsByRegime[g]; n > 0 {
			byRegime = append(byRegime, fmt.Sprintf("%s %d steps / %d writes", qwen3.Regime(g), n, st.HostWritesByRegime[g]))
		}
	}
	fmt.Fprintf(e.stdout, "host writes by regime: %s\n", strings.Join(byRegime, ", "))
	fmt.Fprintln(e.stdout, "every property held at every step (bit-exact with ref, KV writes, cur_pos at every op, page table, trace rules)")
	if s.Scenario.Strict {
		fmt.Fprintln(e.stdout, "strict mode: no findings")
	}
	return nil
}

// transcript prints the engine's calls as the suite makes them.
type transcript struct {
	w       io.Writer
	sut     *proptest.SimSUT
	pending string // the last call's line, awaiting its verdict
	step    int
	rec     *dumpRecorder // --dump, or nil
}

func (t *transcript) flush(verdict string) {
	if t.pending != "" {
		fmt.Fprintf(t.w, "%s  %s\n", t.pending, verdict)
		t.pending = ""
	}
}

// transcriptSUT is the simulator SUT with its decoder wrapped; every
// observer of SimSUT stays available to the suite.
type transcriptSUT struct {
	*proptest.SimSUT
	t *transcript
}

func (s transcriptSUT) Decoder() qwen3.Decoder { return transcriptDecoder{s.SimSUT.Decoder(), s.t} }

type transcriptDecoder struct {
	qwen3.Decoder
	t *transcript
}

func (d transcriptDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	d.t.flush("equal")
	out, err := d.Decoder.Prefill(p)
	if err == nil {
		d.t.rec.prefill(p, out)
	}
	d.t.pending = fmt.Sprintf("prefill seq %d: %d positions", p.Seq, len(p.Tokens))
	return out, err
}

func (d transcriptDecoder) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	d.t.flush("equal")
	if d.t.step == 0 {
		fmt.Fprintln(d.t.w, "step  seqs  positions   regime   width  host-writes  ref")
	}
	out, err := d.Decoder.Decode(batch)
	if err == nil {
		d.t.rec.decode(out)
	}
	lo, hi := batch[0].Pos, batch[0].Pos
	for _, s := range batch {
		lo, hi = min(lo, s.Pos), max(hi, s.Pos)
	}
	st := d.t.sut.Eng.LastStep()
	d.t.pending = fmt.Sprintf("%4d  %4d  %4d..%-4d  %-7s  %5d  %11d", d.t.step, len(batch), lo, hi, st.Regime, st.Width, st.HostWrites)
	d.t.step++
	return out, err
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
