package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/sim"
)

func init() {
	commands["sim"] = command{"run the paged decode engine on the simulator against the oracle", runSim}
}

// simRun is one `offcard sim` schedule: Batch sequences, sequence i with a
// prompt of PromptLen+i tokens, decoded greedily for Steps steps; sequence i
// finishes after Steps-2i steps (at least 1), so the batch shrinks from the
// longest sequence down and a dynamic page table narrows.
type simRun struct {
	synth, width, mode, arch  string
	seed                      uint64
	blockSize, recaptureEvery int
	batch, promptLen, steps   int
	strict                    bool
}

func runSim(e *env, args []string) error {
	fs := newFlags(e, "sim", "[--synth tiny] [--seed N] [--block-size 32] [--width fixed:N|dynamic] [--mode eager|captured] [--recapture-every N] [--batch N] [--prompt-len N] [--steps N] [--strict] [--arch wormhole|blackhole]")
	var r simRun
	fs.StringVar(&r.synth, "synth", "tiny", "synthetic model preset")
	fs.Uint64Var(&r.seed, "seed", 1, "seed of the synthetic weights and the prompts")
	fs.IntVar(&r.blockSize, "block-size", 32, "KV block size (a multiple of 32)")
	fs.StringVar(&r.width, "width", "dynamic", "page-table width policy: fixed:N or dynamic")
	fs.StringVar(&r.mode, "mode", "captured", "eager or captured")
	fs.IntVar(&r.recaptureEvery, "recapture-every", 0, "re-capture the trace every N steps (0: only when needed)")
	fs.IntVar(&r.batch, "batch", 2, "number of sequences")
	fs.IntVar(&r.promptLen, "prompt-len", 30, "prompt length of the first sequence (sequence i has prompt-len+i)")
	fs.IntVar(&r.steps, "steps", 40, "decode steps")
	fs.BoolVar(&r.strict, "strict", false, "strict mode: report the simulator's findings and fail on the first")
	fs.StringVar(&r.arch, "arch", "wormhole", "wormhole or blackhole")
	if err := fs.parse(args); err != nil {
		return err
	}
	return r.run(e)
}

func (r *simRun) run(e *env) error {
	policy, err := kvpage.ParseWidthPolicy(r.width)
	if err != nil {
		return badInput{err}
	}
	mode, err := qwen3.ParseEngineMode(r.mode)
	if err != nil {
		return badInput{err}
	}
	var arch sim.Arch
	switch r.arch {
	case "wormhole":
		arch = sim.Wormhole
	case "blackhole":
		arch = sim.Blackhole
	default:
		return bad("--arch must be wormhole or blackhole, got %q", r.arch)
	}
	switch {
	case r.blockSize <= 0 || r.blockSize%32 != 0:
		return bad("--block-size must be a positive multiple of 32, got %d", r.blockSize)
	case r.batch < 1 || r.batch > 32:
		return bad("--batch must be in 1..32, got %d", r.batch)
	case r.promptLen < 1:
		return bad("--prompt-len must be ≥ 1, got %d", r.promptLen)
	case r.steps < 0:
		return bad("--steps must be ≥ 0, got %d", r.steps)
	case r.recaptureEvery < 0:
		return bad("--recapture-every must be ≥ 0, got %d", r.recaptureEvery)
	}
	cfg, err := qwen3.Preset(r.synth)
	if err != nil {
		return badInput{err}
	}
	w, err := qwen3.Synth(cfg, r.seed)
	if err != nil {
		return err
	}
	if maxLen := r.promptLen + r.batch - 1 + r.steps; maxLen > cfg.MaxPositionEmbeddings {
		return bad("prompt-len+batch-1+steps = %d exceeds the model's %d positions", maxLen, cfg.MaxPositionEmbeddings)
	}

	// The scheduler's truth: one pool, one table per sequence, shared by the
	// oracle and the engine (block ids are the caller's, as in vLLM).
	need := 0
	for i := range r.batch {
		need += kvpage.BlocksFor(r.promptLen+i+r.steps, r.blockSize)
	}
	numBlocks := need
	if fw, ok := policy.FixedWidth(); ok {
		numBlocks = max(numBlocks, fw)
	}
	pool, err := kvpage.NewPool(numBlocks, r.blockSize)
	if err != nil {
		return badInput{err}
	}
	oracle, err := ref.New(w, ref.Options{BlockSize: r.blockSize, NumBlocks: numBlocks})
	if err != nil {
		return err
	}
	defer oracle.Close()
	dev, err := sim.New(sim.Options{Arch: arch, Strict: r.strict})
	if err != nil {
		return err
	}
	eng, err := qwen3.NewEngine(dev, w, qwen3.EngineOptions{
		Capacity: r.batch, BlockSize: r.blockSize, NumBlocks: numBlocks,
		Width: policy, Mode: mode, RecaptureEvery: r.recaptureEvery,
	})
	if err != nil {
		return badInput{err}
	}
	defer eng.Close()

	fmt.Fprintf(e.stdout, "offcard sim: %s seed %d, %s, block %d, width %s, %s", r.synth, r.seed, arch, r.blockSize, policy, mode)
	if r.recaptureEvery > 0 {
		fmt.Fprintf(e.stdout, " (recapture every %d)", r.recaptureEvery)
	}
	if r.strict {
		fmt.Fprint(e.stdout, ", strict")
	}
	fmt.Fprintln(e.stdout)

	findings := func(when string) error {
		fs := dev.Findings()
		if len(fs) == 0 {
			return nil
		}
		fmt.Fprintf(e.stdout, "FINDING %s: %s\n", when, fs[0])
		if len(fs) > 1 {
			fmt.Fprintf(e.stdout, "(+%d more findings)\n", len(fs)-1)
		}
		return errFound
	}

	tables := make([]*kvpage.Table, r.batch)
	last := make([]qwen3.Output, r.batch)
	finishAt := make([]int, r.batch)
	rng := splitmix64(r.seed ^ 0x5EED)
	_ = rng
	for i := range r.batch {
		finishAt[i] = max(r.steps-2*i, 1)
		n := r.promptLen + i
		prompt := make([]int32, n)
		for j := range prompt {
			prompt[j] = int32(rng.next() % uint64(cfg.VocabSize))
		}
		tables[i] = pool.NewTable()
		if err := tables[i].Grow(n); err != nil {
			return err
		}
		p := qwen3.Prefill{Seq: qwen3.SeqID(i), Tokens: prompt, Blocks: tables[i].Blocks()}
		want, err := oracle.Prefill(p)
		if err != nil {
			return err
		}
		got, err := eng.Prefill(p)
		if err != nil {
			return fmt.Errorf("engine prefill of seq %d: %w", i, err)
		}
		if err := compareOutputs(e, fmt.Sprintf("prefill seq %d", i), got, want); err != nil {
			return err
		}
		if err := findings(fmt.Sprintf("in prefill of seq %d", i)); err != nil {
			return err
		}
		last[i] = want[len(want)-1]
		fmt.Fprintf(e.stdout, "prefill seq %d: %d positions, equal to ref\n", i, n)
	}

	fmt.Fprintln(e.stdout, "step  seqs  positions   regime   width  host-writes  ref")
	for step := 0; step < r.steps; step++ {
		var batch []qwen3.Step
		for i := range r.batch {
			if step >= finishAt[i] {
				continue
			}
			pos := last[i].Pos + 1
			if err := tables[i].Grow(pos + 1); err != nil {
				return err
			}
			batch = append(batch, qwen3.Step{Seq: qwen3.SeqID(i), Token: last[i].Token, Pos: pos, Blocks: tables[i].Blocks()})
		}
		want, err := oracle.Decode(batch)
		if err != nil {
			return err
		}
		got, err := eng.Decode(batch)
		if err != nil {
			return fmt.Errorf("engine step %d: %w", step, err)
		}
		st := eng.LastStep()
		lo, hi := batch[0].Pos, batch[0].Pos
		for _, s := range batch {
			lo, hi = min(lo, s.Pos), max(hi, s.Pos)
		}
		verdict := "equal"
		cmpErr := compareOutputs(e, fmt.Sprintf("step %d", step), got, want)
		if cmpErr != nil {
			verdict = "DIFFERENT"
		}
		fmt.Fprintf(e.stdout, "%4d  %4d  %4d..%-4d  %-7s  %5d  %11d  %s\n", step, len(batch), lo, hi, st.Regime, st.Width, st.HostWrites, verdict)
		if cmpErr != nil {
			return cmpErr
		}
		if err := findings(fmt.Sprintf("at step %d", step)); err != nil {
			return err
		}
		for k, s := range batch {
			last[s.Seq] = want[k]
			if step+1 == finishAt[s.Seq] {
				if err := eng.Finish(s.Seq); err != nil {
					return err
				}
				if err := oracle.Finish(s.Seq); err != nil {
					return err
				}
				tables[s.Seq].Release()
			}
		}
	}
	s := eng.Stats()
	fmt.Fprintf(e.stdout, "done: %d steps (%d prefill), %d captures, %d replays, %d trace releases, %d resets\n",
		s.Steps, s.PrefillSteps, s.Captures, s.Replays, s.Releases, s.Resets)
	fmt.Fprintf(e.stdout, "page table: %d reallocations, %d retired (%d freed after their trace, %d still held)\n",
		s.PageTableReallocs, s.Retired, s.RetiredFreed, s.RetiredLive)
	var byRegime []string
	for g := range qwen3.NumRegimes {
		if n := s.StepsByRegime[g]; n > 0 {
			byRegime = append(byRegime, fmt.Sprintf("%s %d steps / %d writes", qwen3.Regime(g), n, s.HostWritesByRegime[g]))
		}
	}
	fmt.Fprintf(e.stdout, "host writes by regime: %s\n", strings.Join(byRegime, ", "))
	if r.strict {
		fmt.Fprintln(e.stdout, "strict mode: no findings")
	}
	return nil
}

// compareOutputs reports the first difference between the engine's outputs
// and the oracle's, bit for bit.
func compareOutputs(e *env, what string, got, want []qwen3.Output) error {
	if len(got) != len(want) {
		fmt.Fprintf(e.stdout, "DIFFERENCE %s: %d outputs, ref has %d\n", what, len(got), len(want))
		return errFound
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.Seq != w.Seq || g.Pos != w.Pos {
			fmt.Fprintf(e.stdout, "DIFFERENCE %s: output %d is seq %d pos %d, ref has seq %d pos %d\n", what, k, g.Seq, g.Pos, w.Seq, w.Pos)
			return errFound
		}
		if i := firstDiff(g.Logits, w.Logits); i >= 0 || g.Token != w.Token {
			fmt.Fprintf(e.stdout, "DIFFERENCE %s: seq %d pos %d: token %d, ref %d", what, g.Seq, g.Pos, g.Token, w.Token)
			if i >= 0 {
				fmt.Fprintf(e.stdout, "; first logit difference at id %d: %v, ref %v", i, got[k].Logits[i], w.Logits[i])
			}
			fmt.Fprintln(e.stdout)
			return errFound
		}
	}
	return nil
}

// firstDiff is the first index where the bit patterns differ, or -1.
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
