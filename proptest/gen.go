package proptest

import (
	"hash/fnv"
	"math/rand"
	"slices"

	"github.com/leanovate/gopter"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// Base is what a campaign fixes for every scenario; the generator draws the
// rest.
type Base struct {
	// Device is the SUT's device name written into scenarios ("sim").
	Device string
	// Faithful turns the simulator's sanitizer off (default: strict).
	Faithful bool
	// Model is the qwen3 preset of every scenario ("": tiny), ModelDir
	// instead a checkpoint directory (config.json + model.safetensors).
	// tiny's Synth seed is drawn per case (1..3); any other model is one
	// for the whole campaign (a preset with Synth seed 1), so its weights
	// are made once.
	Model    string
	ModelDir string
	// Serve is what serving calls the SUT supports, which the schedules'
	// serving actions need; nil: RunCase asks the factory (serve.go),
	// Campaign once for all its cases.
	Serve *Serving
}

// scale is how a campaign fits its schedules to the model: the device
// steps a case may ask for (work budget), the most sequences at once and
// the most KV blocks of the cache. tiny's is the default campaign's; a
// larger model (a position costs more than about 4M multiply-adds: the
// qwen3-0.6b shape's cost 600M, about 0.29 s of CPU for the oracle and the
// engine on sim together, measured over an eager schedule of 174
// positions) gets fewer positions, batches of at most 4 and at most 64
// blocks (the 0.6B shape's KV cache is 3.7 MB per block of 32 rows on the
// device and again in the oracle), still with prompts and decodes drawn
// around k·block-1, k·block and k·block+1.
type scale struct {
	budget, capacity, blocks int
}

// bigModel is the multiply-adds per position past which a model counts
// as large.
const bigModel = 4 << 20

func scaleFor(cfg qwen3.Config) scale {
	h, q, kv := cfg.HiddenSize, cfg.QDim(), cfg.KVDim()
	perLayer := h*(q+2*kv) + q*h + 3*h*cfg.IntermediateSize
	if cfg.NumHiddenLayers*perLayer+cfg.VocabSize*h <= bigModel {
		return scale{budget: workBudget, capacity: MaxCapacity, blocks: 256}
	}
	return scale{budget: 72, capacity: 4, blocks: 64}
}

// scenario is the model part of a scenario b fixes, and its scale.
func (b Base) scenario(rng *rand.Rand) (Scenario, scale, error) {
	sc := Scenario{Model: b.Model, ModelDir: b.ModelDir}
	if b.ModelDir == "" && (b.Model == "" || b.Model == "tiny") {
		sc.Model, sc.ModelSeed = "tiny", uint64(1+rng.Intn(3))
	} else if b.ModelDir == "" {
		sc.ModelSeed = 1
	}
	cfg, err := ModelConfig(sc)
	if err != nil {
		return sc, scale{}, err
	}
	return sc, scaleFor(cfg), nil
}

// pick returns an index drawn with the given weights.
func pick(rng *rand.Rand, weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := rng.Intn(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

// GenScenario generates a scenario:
//   - model tiny, Synth seed 1..3 (or b's model, scaled: see scale);
//   - arch wormhole or blackhole, strict unless b.Faithful;
//   - block size 32 (3/4) or 64;
//   - capacity 1..8, small ones likelier;
//   - width fixed:256 (with 256 blocks), fixed:N "just enough" (N = 1..3
//     blocks: the schedule's sequences are kept within N blocks and driven
//     to fill them) or dynamic;
//   - blocks (the cache and the host pool) 6, 12, 24 or 64 unless fixed:256;
//   - mode eager (3/10) or captured, recapture_every 0 (2/5) or 1..16;
//   - the engine's own read-back check (verify) one time in four;
//   - prompts by decode steps (qwen3.PrefillDecode) one time in eight,
//     else as one prefill program.
func GenScenario(b Base) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(drawScenario(p.Rng, b), gopter.NoShrinker)
	}
}

func drawScenario(rng *rand.Rand, b Base) Scenario {
	dev := b.Device
	if dev == "" {
		dev = "sim"
	}
	sc, scl, err := b.scenario(rng)
	if err != nil {
		// The command line checks the model before a campaign starts.
		panic(err)
	}
	sc.Device, sc.Strict = dev, !b.Faithful
	if scl.budget != workBudget {
		sc.budget = scl.budget
	}
	sc.Arch = []string{"wormhole", "blackhole"}[rng.Intn(2)]
	sc.BlockSize = []int{32, 64}[pick(rng, 3, 1)]
	sc.Capacity = min(1+pick(rng, 4, 4, 3, 3, 1, 1, 1, 1), scl.capacity)
	sc.NumBlocks = min([]int{3, 6, 12, 24, 64}[pick(rng, 1, 2, 3, 2, 1)], scl.blocks)
	switch pick(rng, 1, 2, 1, 2) {
	case 0:
		sc.NumBlocks = min(256, scl.blocks)
		sc.Width = kvpage.Fixed(sc.NumBlocks)
	case 1:
		sc.Width = kvpage.Fixed(min(1+rng.Intn(3), sc.NumBlocks))
	case 2:
		// As wide as the cache: one sequence can fill the pool.
		sc.NumBlocks = min(sc.NumBlocks, 6)
		sc.Width = kvpage.Fixed(sc.NumBlocks)
	default:
		sc.Width = kvpage.Dynamic()
	}
	// Faithful cases (no sanitizer) even in a strict campaign: every
	// property but strict must hold there too.
	if sc.Strict && rng.Intn(6) == 0 {
		sc.Strict = false
	}
	if rng.Intn(10) < 3 {
		sc.Mode = qwen3.ModeEager
	} else {
		sc.Mode = qwen3.ModeCaptured
		if rng.Intn(5) >= 2 {
			sc.RecaptureEvery = 1 + rng.Intn(16)
		}
	}
	sc.Verify = rng.Intn(4) == 0
	// One case in eight prefills by decode steps: prompts through the
	// decode graph (paged_update_cache and SDPA decode at every prompt
	// position, block boundaries inside the prompt). Such a case costs
	// about 1.7 times as much per device step as one with prefill
	// programs (each prompt position is a whole eager pass at full
	// capacity with one slot active): at one case in four they took 39% of
	// a campaign's CPU for 27% of its steps. The mutant catalog's kills are
	// the same at either share, and prefill-decode-slot-zero guards the
	// mode.
	if rng.Intn(8) == 0 {
		sc.Prefill = qwen3.PrefillDecode
	}
	sc.TraceRegion = drawTraceRegion(sc)
	return sc
}

// drawTraceRegion draws the device's trace region of a captured scenario:
// in one case in eight a region of 1 KiB to 2 MiB (log-uniform), which
// tiny's decode graph (59 KiB of trace on sim) and the 0.6B shape's (683
// KiB) fit or overflow, so end_trace_capture's refusal and the
// engine's eager fallback are drawn; otherwise ttnn's default, none. It
// draws from a stream of its own, keyed by the scenario's other fields,
// so that adding it left every other draw of a seed as it was.
func drawTraceRegion(sc Scenario) uint64 {
	if sc.Mode != qwen3.ModeCaptured {
		return 0
	}
	rng := keyedRand(sc.String())
	if rng.Intn(8) != 0 {
		return 0
	}
	return 1 << (10 + rng.Intn(12))
}

// keyedRand is a stream of its own for a draw that must leave a case's
// other draws as they were: seeded by the FNV-1a hash of key.
func keyedRand(key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewSource(int64(h.Sum64())))
}

// workBudget bounds the device steps (prompt positions + decode batches) a
// generated schedule asks for, to keep one case fast; past it the generator
// only finishes and re-captures. Shrinking never raises the work. A large
// model's campaign has a smaller budget (scale).
const workBudget = 200

// budget is the model's work budget.
func (m *model) budget() int {
	if m.sc.budget > 0 {
		return m.sc.budget
	}
	return workBudget
}

// GenCommand generates a command valid in m (its precondition holds).
func genCommand(m model) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(drawCommand(p.Rng, m), shrinkCmd)
	}
}

func drawCommand(rng *rand.Rand, m model) Cmd {
	over := m.work >= m.budget()
	var admit, dec *Cmd
	if !over {
		if c, ok := drawAdmit(rng, m); ok {
			admit = &c
		}
		if c, ok := drawDecode(rng, m); ok {
			dec = &c
		}
	}
	live := m.nLive()
	wA, wD, wF, wR := 0, 0, 0, 1
	if admit != nil {
		wA = 3
		if live == 0 {
			wA = 12
		}
	}
	if dec != nil {
		wD = 6
	}
	if live > 0 {
		wF = 1
		if over {
			wF = 3
		}
	}
	if m.sc.Mode == qwen3.ModeCaptured {
		wR = 2
	}
	// Interleave: right after an admit that followed a decode, step the
	// decode's batch again (a replay of the same active set with a
	// prefill of another slot in between).
	if m.lastOK && dec != nil && rng.Intn(3) > 0 {
		if c, ok := redecode(rng, m); ok {
			return c
		}
	}
	// The serving actions, each only when the SUT serves its calls (the
	// draws check m.serve): prefix hits, verify steps, forks, preemptions
	// and re-admits.
	var serving []Cmd
	var weights []int
	for _, d := range []struct {
		draw   func(*rand.Rand, model) (Cmd, bool)
		w      int
		budget bool // needs work budget left
	}{{drawShare, 3, true}, {drawVerify, 4, true}, {drawFork, 2, true}, {drawPreempt, 1, false}, {drawReadmit, 5, true}} {
		if d.budget && over {
			continue
		}
		if c, ok := d.draw(rng, m); ok {
			serving, weights = append(serving, c), append(weights, d.w)
		}
	}
	if i := pick(rng, append([]int{wA, wD, wF, wR}, weights...)...); i >= 4 {
		return serving[i-4]
	} else if i != 3 {
		switch i {
		case 0:
			return *admit
		case 1:
			return *dec
		}
		var ls []int
		for q, l := range m.live {
			if l {
				ls = append(ls, q)
			}
		}
		return Cmd{Kind: Finish, Seq: ls[rng.Intn(len(ls))]}
	}
	return Cmd{Kind: Recapture}
}

// shrinkCmd proposes smaller versions of one command: a shorter prompt
// (1, half, and shorter by 64, 32 or 1 positions, which keeps its row in the
// block), salt 0, fewer decode steps, a decode batch with one sequence
// fewer. Each candidate is re-checked against the preconditions.
func shrinkCmd(v interface{}) gopter.Shrink {
	c := v.(Cmd)
	var cands []Cmd
	add := func(d Cmd) {
		for _, e := range cands {
			if e.String() == d.String() {
				return
			}
		}
		if d.String() != c.String() {
			cands = append(cands, d)
		}
	}
	if c.Chunk != 0 {
		d := c
		d.Chunk = 0
		add(d)
	}
	switch c.Kind {
	case Admit:
		for _, n := range []int{1, c.Prompt / 2, c.Prompt - 64, c.Prompt - 32, c.Prompt - 1} {
			if n >= 1 && n < c.Prompt {
				d := c
				d.Prompt = n
				add(d)
			}
		}
		if c.Salt != 0 {
			d := c
			d.Salt = 0
			add(d)
		}
	case Share:
		for _, n := range []int{c.Len + 1, c.Prompt - 32, c.Prompt - 1} {
			if n > c.Len && n < c.Prompt {
				d := c
				d.Prompt = n
				add(d)
			}
		}
		for _, n := range []int{1, c.Len / 2, c.Len - 32, c.Len - 1} {
			if n >= 1 && n < c.Len {
				d := c
				d.Len = n
				add(d)
			}
		}
		if c.Salt != 0 {
			d := c
			d.Salt = 0
			add(d)
		}
	case Verify:
		if len(c.Seqs) > 1 {
			for i := range c.Seqs {
				d := c
				d.Seqs = slices.Delete(slices.Clone(c.Seqs), i, i+1)
				d.K = slices.Delete(slices.Clone(c.K), i, i+1)
				d.Accept = slices.Delete(slices.Clone(c.Accept), i, i+1)
				add(d)
			}
		}
		for i := range c.Seqs {
			if c.Accept[i] < c.K[i] {
				d := c
				d.K = slices.Clone(c.K)
				d.K[i] = c.Accept[i] + 1 // the fewest drafts that still reject one
				add(d)
			}
		}
		if c.Draft != 0 {
			d := c
			d.Draft = 0
			add(d)
		}
	case Fork:
		if c.Salt != 0 {
			d := c
			d.Salt = 0
			add(d)
		}
	case Decode:
		for _, n := range []int{1, c.Steps / 2, c.Steps - 64, c.Steps - 32, c.Steps - 1} {
			if n >= 1 && n < c.Steps {
				d := c
				d.Steps = n
				add(d)
			}
		}
		if len(c.Seqs) > 1 {
			for i := range c.Seqs {
				d := c
				d.Seqs = append(append([]int{}, c.Seqs[:i]...), c.Seqs[i+1:]...)
				add(d)
			}
		}
		for i := range c.Start {
			d := c
			d.Start = append(append([]int{}, c.Start[:i]...), c.Start[i+1:]...)
			if len(d.Start) == 0 {
				d.Start = nil
			}
			add(d)
		}
		if c.Force != 0 {
			d := c
			d.Force = 0
			add(d)
		}
		if c.Skip != 0 {
			d := c
			d.Skip = 0
			add(d)
			if c.Skip > 1 {
				d.Skip = c.Skip / 2
				add(d)
			}
		}
	}
	i := 0
	return func() (interface{}, bool) {
		if i >= len(cands) {
			return nil, false
		}
		i++
		return cands[i-1], true
	}
}
