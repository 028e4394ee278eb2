package proptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/offcard/offcard/internal/inputfile"
	"github.com/offcard/offcard/internal/membudget"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// Scenario is everything a schedule runs on: the model, the device and the
// engine's options. Its String form is the three header lines of a script.
type Scenario struct {
	// Model is a qwen3 preset name ("tiny") and ModelSeed the Synth seed;
	// or, with ModelDir, Model is empty and the weights are the Hugging
	// Face checkpoint in ModelDir (config.json + model.safetensors).
	Model     string
	ModelSeed uint64
	ModelDir  string
	// Device is "sim" (or, later, "tt"); Arch is "wormhole" or "blackhole";
	// Strict turns the simulator's sanitizer on.
	Device string
	Arch   string
	Strict bool
	// L1 is what the simulator's fresh L1 holds: "" or "poison" (the
	// default), "zero" or "stale" (sim.ParseL1Init).
	L1 string
	// TraceRegion is the device's trace region in bytes, as ttnn's
	// trace_region_size at device open; 0 is ttnn's default
	// (DEFAULT_TRACE_REGION_SIZE, tt_metal/hostdevcommon/api/hostdevcommon/
	// common_values.hpp:16), whose traces go to ordinary DRAM with no
	// budget (tt_metal/distributed/mesh_trace.cpp:63-70). A region smaller
	// than the decode graph's trace makes end_trace_capture fail; the
	// engine then runs eager.
	TraceRegion uint64
	// The engine: block size, number of KV blocks (of the device cache and
	// of the host pool), page-table width policy, slots, mode,
	// recapture_every and the engine's own read-back check.
	BlockSize      int
	NumBlocks      int
	Width          kvpage.WidthPolicy
	Capacity       int
	Mode           qwen3.EngineMode
	RecaptureEvery int
	Verify         bool
	// Prefill is how the engine runs prompts (a program or decode steps).
	Prefill qwen3.PrefillMode

	// budget is the generator's work budget for this scenario's model (0:
	// workBudget); it shapes only how a schedule is drawn, so a script
	// does not carry it.
	budget int
}

// EngineOptions are the qwen3.EngineOptions the scenario describes.
func (sc Scenario) EngineOptions() qwen3.EngineOptions {
	return qwen3.EngineOptions{
		Capacity: sc.Capacity, BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks,
		Width: sc.Width, Mode: sc.Mode, RecaptureEvery: sc.RecaptureEvery, Verify: sc.Verify,
		Prefill: sc.Prefill,
	}
}

// MaxLen is the longest a sequence may grow: the cache's positions, the
// model's max_position_embeddings, and a fixed page-table width's reach.
func (sc Scenario) MaxLen(cfg qwen3.Config) int {
	n := sc.NumBlocks * sc.BlockSize
	if cfg.MaxPositionEmbeddings > 0 {
		n = min(n, cfg.MaxPositionEmbeddings)
	}
	if fw, ok := sc.Width.FixedWidth(); ok {
		n = min(n, fw*sc.BlockSize)
	}
	return n
}

// Validate checks the scenario's own values (not whether a device exists).
func (sc Scenario) Validate() error {
	switch {
	case sc.Model == "" && sc.ModelDir == "":
		return errors.New("no model")
	case sc.Model != "" && sc.ModelDir != "":
		return errors.New("a preset and a model directory: want one")
	case strings.ContainsAny(sc.ModelDir, " \t\n\r"):
		return fmt.Errorf("model directory %q: a script cannot hold a path with white space", sc.ModelDir)
	case sc.Device == "":
		return errors.New("no device")
	case sc.Arch != "wormhole" && sc.Arch != "blackhole":
		return fmt.Errorf("arch %q: want wormhole or blackhole", sc.Arch)
	case sc.L1 != "" && sc.L1 != "poison" && sc.L1 != "zero" && sc.L1 != "stale":
		return fmt.Errorf("l1 %q: want poison, zero or stale", sc.L1)
	case sc.BlockSize < 32 || sc.BlockSize%32 != 0:
		return fmt.Errorf("block size %d: want a positive multiple of 32", sc.BlockSize)
	case sc.NumBlocks < 1:
		return fmt.Errorf("blocks %d: want at least 1", sc.NumBlocks)
	case sc.Capacity < 1 || sc.Capacity > MaxCapacity:
		return fmt.Errorf("capacity %d: want 1..%d", sc.Capacity, MaxCapacity)
	case sc.RecaptureEvery < 0:
		return fmt.Errorf("recapture %d: want >= 0", sc.RecaptureEvery)
	case sc.Mode == qwen3.ModeEager && sc.RecaptureEvery != 0:
		return errors.New("recapture needs mode=captured")
	}
	if fw, ok := sc.Width.FixedWidth(); ok && fw > sc.NumBlocks {
		return fmt.Errorf("width fixed:%d exceeds the %d blocks", fw, sc.NumBlocks)
	}
	if sc.ModelDir != "" {
		return nil // a checkpoint's config is checked when it loads
	}
	cfg, err := qwen3.Preset(sc.Model)
	if err != nil {
		return err
	}
	return sc.fits(cfg)
}

// Device DRAM of the simulated (and real) cards, in bytes: sim.Options'
// defaults (sim/device.go: 12 banks of 1 GiB on Wormhole, 8 of
// 4,278,190,080 bytes on Blackhole).
var deviceDRAM = map[string]int64{"wormhole": 12 << 30, "blackhole": 8 * 4278190080}

// fits checks the sizes of sc (block size, blocks) against what they
// imply before anything is allocated: a block no longer than the model's
// context, the KV cache and the weights within the device's DRAM, and the
// memory of a run (the simulated device's DRAM and the oracle's cache,
// each with the cache and the weights) within what the machine has.
func (sc Scenario) fits(cfg qwen3.Config) error {
	eng := fmt.Sprintf("engine block=%d blocks=%d", sc.BlockSize, sc.NumBlocks)
	if sc.BlockSize > cfg.MaxPositionEmbeddings {
		return fmt.Errorf("%s: block size %d is larger than the model's max_position_embeddings %d", eng, sc.BlockSize, cfg.MaxPositionEmbeddings)
	}
	kv := membudget.Mul(int64(sc.NumBlocks), cfg.KVBytes(sc.BlockSize))
	weights := membudget.Mul(cfg.Params(), 2)
	if dram, ok := deviceDRAM[sc.Arch]; ok && sc.Device != EngineDevice && membudget.Add(kv, weights) > dram {
		return fmt.Errorf("%s: the KV cache (%s) and the weights (%s) of %s do not fit the %s of DRAM of a %s device", eng, membudget.Size(kv), membudget.Size(weights), sc.Model, membudget.Size(dram), sc.Arch)
	}
	if err := membudget.Check(membudget.Add(membudget.Mul(2, kv), membudget.Mul(2, weights), runOverhead)); err != nil {
		return fmt.Errorf("%s: %w", eng, err)
	}
	return nil
}

// runOverhead is the memory of a run besides the caches and the weights
// (the simulator's L1 and tables, the oracle's scratch), for the estimate.
const runOverhead = 64 << 20

// String is the scenario's three script header lines.
func (sc Scenario) String() string {
	var b strings.Builder
	if sc.ModelDir != "" {
		fmt.Fprintf(&b, "model dir=%s\n", sc.ModelDir)
	} else {
		fmt.Fprintf(&b, "model %s seed=%d\n", sc.Model, sc.ModelSeed)
	}
	fmt.Fprintf(&b, "device %s arch=%s", sc.Device, sc.Arch)
	if sc.L1 != "" && sc.L1 != "poison" {
		fmt.Fprintf(&b, " l1=%s", sc.L1)
	}
	if sc.TraceRegion > 0 {
		fmt.Fprintf(&b, " trace_region=%d", sc.TraceRegion)
	}
	if sc.Strict {
		b.WriteString(" strict")
	}
	fmt.Fprintf(&b, "\nengine block=%d blocks=%d width=%v capacity=%d mode=%v",
		sc.BlockSize, sc.NumBlocks, sc.Width, sc.Capacity, sc.Mode)
	if sc.RecaptureEvery > 0 {
		fmt.Fprintf(&b, " recapture=%d", sc.RecaptureEvery)
	}
	if sc.Prefill != qwen3.PrefillProgram {
		fmt.Fprintf(&b, " prefill=%v", sc.Prefill)
	}
	if sc.Verify {
		b.WriteString(" verify")
	}
	b.WriteString("\n")
	return b.String()
}

// Limits of the generated and parsed schedules.
const (
	// MaxCapacity is the largest number of slots.
	MaxCapacity = 8
	// MaxSeqs bounds sequence ids: 0 <= seq < MaxSeqs.
	MaxSeqs = 16
	// MaxDecodeSteps bounds one decode command.
	MaxDecodeSteps = 256
	// MaxSkip bounds a decode's position jump.
	MaxSkip = 64
	// MaxVerifyK bounds a verify step's tokens per sequence.
	MaxVerifyK = 8
	// MaxCases bounds a campaign's cases (check --cases): each case's
	// result is kept until the report.
	MaxCases = 1_000_000
)

// CmdKind is a schedule command.
type CmdKind uint8

// Commands of a schedule.
const (
	// Admit prefills a new sequence: Seq, a prompt of Prompt tokens drawn
	// from (Seq, Salt, position).
	Admit CmdKind = iota + 1
	// Decode runs Steps decode steps of the live sequences (or of Seqs,
	// when given) and of the sequences it starts (Start), each fed its own
	// last token (greedy) or, with Force, a teacher stream; with Skip the
	// live sequences' positions jump Skip ahead at the first step.
	Decode
	// Finish ends sequence Seq and returns its blocks to the pool.
	Finish
	// Recapture forces a cold restart of the engine's regime (Engine.Reset):
	// the next captured step records a new trace.
	Recapture
	// Share admits a new sequence Seq whose first Len positions are a
	// prefix-cache hit on live sequence From (kvpage SharePrefix: From's
	// tokens and KV blocks), then prefills its own tokens Len..Prompt-1
	// (stream (Seq, Salt)) with PrefillFrom, in chunks of Chunk when set.
	Share
	// Verify runs a speculative verify step of the sequences Seqs: K[i]
	// tokens each (its next token, then drafts from stream (seq, Draft)),
	// then keeps the first Accept[i] positions and rolls the rest back
	// (kvpage Truncate).
	Verify
	// Fork makes Seq a child of live sequence From (kvpage Fork: every
	// block shared, copy-on-write) and decodes its first position, fed its
	// stream token (Seq, Salt) at that position.
	Fork
	// Preempt ends live sequence Seq (Finish, its blocks to the pool) and
	// keeps its tokens for Readmit.
	Preempt
	// Readmit re-admits a preempted sequence Seq: a prefill of its prompt
	// and generated tokens so far through fresh blocks (in chunks of Chunk
	// with PrefillFrom, when set).
	Readmit

	// closeKind names the end of a run (Close) in a failure; it is no
	// script command.
	closeKind CmdKind = 100
)

// Cmd is one schedule command. Its String form is one script line.
type Cmd struct {
	Kind   CmdKind
	Seq    int   // Admit, Finish
	Prompt int   // Admit: prompt length
	Salt   int   // Admit: varies the prompt's tokens
	Steps  int   // Decode
	Seqs   []int // Decode: the batch (sorted, distinct); nil = every live sequence
	// Decode: Start lists sequences (sorted, distinct, not live) the
	// decode starts at position 0; Force > 0 feeds every step the teacher
	// stream of salt Force instead of ref's greedy token; Skip > 0 makes
	// the live sequences' first position their length + Skip.
	Start []int
	Force int
	Skip  int
	// Serving actions: From is the donor (Share) or parent (Fork); Len the
	// shared prefix (Share); Chunk the chunk size of a prefill through
	// PrefillFrom (Admit, Share, Readmit; 0: one call); K and Accept the
	// verify's tokens and accepted positions per sequence of Seqs, Draft
	// the drafts' stream salt (Verify).
	From   int
	Len    int
	Chunk  int
	K      []int
	Accept []int
	Draft  int
}

// String is the command's script line.
func (c Cmd) String() string {
	switch c.Kind {
	case Admit:
		s := fmt.Sprintf("admit seq=%d prompt=%d", c.Seq, c.Prompt)
		if c.Salt != 0 {
			s += fmt.Sprintf(" salt=%d", c.Salt)
		}
		return s + c.chunkArg()
	case Share:
		s := fmt.Sprintf("share seq=%d from=%d len=%d prompt=%d", c.Seq, c.From, c.Len, c.Prompt)
		if c.Salt != 0 {
			s += fmt.Sprintf(" salt=%d", c.Salt)
		}
		return s + c.chunkArg()
	case Verify:
		s := fmt.Sprintf("verify seqs=%s k=%s accept=%s", joinInts(c.Seqs), joinInts(c.K), joinInts(c.Accept))
		if c.Draft != 0 {
			s += fmt.Sprintf(" draft=%d", c.Draft)
		}
		return s
	case Fork:
		s := fmt.Sprintf("fork seq=%d from=%d", c.Seq, c.From)
		if c.Salt != 0 {
			s += fmt.Sprintf(" salt=%d", c.Salt)
		}
		return s
	case Preempt:
		return fmt.Sprintf("preempt seq=%d", c.Seq)
	case Readmit:
		return fmt.Sprintf("readmit seq=%d", c.Seq) + c.chunkArg()
	case Decode:
		s := fmt.Sprintf("decode steps=%d", c.Steps)
		if c.Seqs != nil {
			parts := make([]string, len(c.Seqs))
			for i, q := range c.Seqs {
				parts[i] = strconv.Itoa(q)
			}
			s += " seqs=" + strings.Join(parts, ",")
		}
		if c.Start != nil {
			s += " start=" + joinInts(c.Start)
		}
		if c.Force != 0 {
			s += fmt.Sprintf(" force=%d", c.Force)
		}
		if c.Skip != 0 {
			s += fmt.Sprintf(" skip=%d", c.Skip)
		}
		return s
	case Finish:
		return fmt.Sprintf("finish seq=%d", c.Seq)
	case Recapture:
		return "recapture"
	case closeKind:
		return "(close)"
	}
	return fmt.Sprintf("Cmd(%d)", c.Kind)
}

func (c Cmd) chunkArg() string {
	if c.Chunk == 0 {
		return ""
	}
	return fmt.Sprintf(" chunk=%d", c.Chunk)
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, q := range v {
		parts[i] = strconv.Itoa(q)
	}
	return strings.Join(parts, ",")
}

// Script is a scenario and its schedule: the unit a failure shrinks to, a
// regression file holds and RunScript replays.
type Script struct {
	Scenario Scenario
	Commands []Cmd
	// Comments are the script's leading comment lines (without "# "),
	// written back by String.
	Comments []string
}

// String is the script text (see the package documentation).
func (s Script) String() string {
	var b strings.Builder
	for _, c := range s.Comments {
		b.WriteString("# " + c + "\n")
	}
	b.WriteString(s.Scenario.String())
	for _, c := range s.Commands {
		b.WriteString(c.String() + "\n")
	}
	return b.String()
}

// ReadScriptFile parses the script at path, a regular file of at most
// inputfile.MaxScript bytes.
func ReadScriptFile(path string) (Script, error) {
	f, _, err := inputfile.Open(path, inputfile.MaxScript, "a script")
	if err != nil {
		return Script{}, err
	}
	defer f.Close()
	s, err := ParseScript(f)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScript reads a script: comment lines (#) and blank lines anywhere,
// the header lines model, device and engine (in any order, each once,
// before the first command), then one command per line. Every command's
// arguments are checked for form here; whether the schedule is valid
// (a slot free, the sequence live, blocks enough) is checked when it runs.
func ParseScript(r io.Reader) (Script, error) {
	var s Script
	sc := &s.Scenario
	seen := map[string]bool{}
	sc.Device, sc.Arch = "sim", "wormhole"
	sc.Width = kvpage.Dynamic()
	sc.BlockSize, sc.NumBlocks, sc.Capacity = 32, 64, 1
	in := bufio.NewScanner(r)
	lineNo := 0
	leading := true
	for in.Scan() {
		lineNo++
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if leading {
				s.Comments = append(s.Comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			}
			continue
		}
		leading = false
		f := strings.Fields(line)
		verb, args, err := parseArgs(f)
		if err != nil {
			return s, fmt.Errorf("line %d: %w", lineNo, err)
		}
		fail := func(err error) (Script, error) { return s, fmt.Errorf("line %d: %s: %w", lineNo, verb, err) }
		switch verb {
		case "model", "device", "engine":
			if seen[verb] {
				return fail(errors.New("given twice"))
			}
			if len(s.Commands) > 0 {
				return fail(errors.New("header line after the first command"))
			}
			seen[verb] = true
		}
		switch verb {
		case "model":
			if dir, ok := args.take("dir"); ok {
				if dir == "" || len(args.pos) > 0 {
					return fail(errors.New("want model dir=PATH or model PRESET seed=N"))
				}
				sc.ModelDir = dir
			} else if err := args.positional(&sc.Model); err != nil {
				return fail(err)
			}
			v, err := args.uint("seed", 0)
			if err != nil {
				return fail(err)
			}
			sc.ModelSeed = v
		case "device":
			if err := args.positional(&sc.Device); err != nil {
				return fail(err)
			}
			if v, ok := args.take("arch"); ok {
				sc.Arch = v
			}
			if v, ok := args.take("l1"); ok {
				sc.L1 = v
			}
			v, err := args.uint("trace_region", 0)
			if err != nil {
				return fail(err)
			}
			sc.TraceRegion = v
			sc.Strict = args.flag("strict")
		case "engine":
			var err error
			if sc.BlockSize, err = args.int("block", 32); err != nil {
				return fail(err)
			}
			if sc.NumBlocks, err = args.int("blocks", 64); err != nil {
				return fail(err)
			}
			if sc.Capacity, err = args.int("capacity", 1); err != nil {
				return fail(err)
			}
			if sc.RecaptureEvery, err = args.int("recapture", 0); err != nil {
				return fail(err)
			}
			if v, ok := args.take("width"); ok {
				if sc.Width, err = kvpage.ParseWidthPolicy(v); err != nil {
					return fail(err)
				}
			}
			if v, ok := args.take("mode"); ok {
				if sc.Mode, err = qwen3.ParseEngineMode(v); err != nil {
					return fail(err)
				}
			}
			if v, ok := args.take("prefill"); ok {
				if sc.Prefill, err = qwen3.ParsePrefillMode(v); err != nil {
					return fail(err)
				}
			}
			sc.Verify = args.flag("verify")
		case "admit":
			c := Cmd{Kind: Admit}
			if c.Seq, err = args.need("seq"); err == nil {
				if c.Prompt, err = args.need("prompt"); err == nil {
					if c.Salt, err = args.int("salt", 0); err == nil {
						c.Chunk, err = args.int("chunk", 0)
					}
				}
			}
			if err != nil {
				return fail(err)
			}
			if c.Seq < 0 || c.Seq >= MaxSeqs || c.Prompt < 1 || c.Salt < 0 || c.Chunk < 0 {
				return fail(fmt.Errorf("want 0 <= seq < %d, prompt >= 1, salt >= 0, chunk >= 0", MaxSeqs))
			}
			s.Commands = append(s.Commands, c)
		case "share":
			c := Cmd{Kind: Share}
			for _, a := range []struct {
				name string
				dst  *int
				need bool
			}{{"seq", &c.Seq, true}, {"from", &c.From, true}, {"len", &c.Len, true}, {"prompt", &c.Prompt, true}, {"salt", &c.Salt, false}, {"chunk", &c.Chunk, false}} {
				if a.need {
					*a.dst, err = args.need(a.name)
				} else {
					*a.dst, err = args.int(a.name, 0)
				}
				if err != nil {
					return fail(err)
				}
			}
			if !validSeq(c.Seq) || !validSeq(c.From) || c.Seq == c.From || c.Len < 1 || c.Prompt <= c.Len || c.Salt < 0 || c.Chunk < 0 {
				return fail(fmt.Errorf("want distinct seq and from in 0..%d, 1 <= len < prompt, salt >= 0, chunk >= 0", MaxSeqs-1))
			}
			s.Commands = append(s.Commands, c)
		case "verify":
			c := Cmd{Kind: Verify}
			for _, k := range []struct {
				name string
				dst  *[]int
			}{{"seqs", &c.Seqs}, {"k", &c.K}, {"accept", &c.Accept}} {
				v, ok := args.take(k.name)
				if !ok {
					return fail(fmt.Errorf("missing %s=", k.name))
				}
				if *k.dst, err = parseInts(v); err != nil {
					return fail(fmt.Errorf("%s %q: want integers separated by commas", k.name, v))
				}
			}
			if c.Draft, err = args.int("draft", 0); err != nil {
				return fail(err)
			}
			if err := checkVerifyArgs(c); err != nil {
				return fail(err)
			}
			s.Commands = append(s.Commands, c)
		case "fork":
			c := Cmd{Kind: Fork}
			if c.Seq, err = args.need("seq"); err == nil {
				if c.From, err = args.need("from"); err == nil {
					c.Salt, err = args.int("salt", 0)
				}
			}
			if err != nil {
				return fail(err)
			}
			if !validSeq(c.Seq) || !validSeq(c.From) || c.Seq == c.From || c.Salt < 0 {
				return fail(fmt.Errorf("want distinct seq and from in 0..%d, salt >= 0", MaxSeqs-1))
			}
			s.Commands = append(s.Commands, c)
		case "preempt", "readmit":
			c := Cmd{Kind: Preempt}
			if verb == "readmit" {
				c.Kind = Readmit
				if c.Chunk, err = args.int("chunk", 0); err != nil {
					return fail(err)
				}
			}
			if c.Seq, err = args.need("seq"); err != nil {
				return fail(err)
			}
			if !validSeq(c.Seq) || c.Chunk < 0 {
				return fail(fmt.Errorf("want seq in 0..%d, chunk >= 0", MaxSeqs-1))
			}
			s.Commands = append(s.Commands, c)
		case "decode":
			c := Cmd{Kind: Decode}
			if c.Steps, err = args.need("steps"); err != nil {
				return fail(err)
			}
			if c.Steps < 1 || c.Steps > MaxDecodeSteps {
				return fail(fmt.Errorf("steps %d: want 1..%d", c.Steps, MaxDecodeSteps))
			}
			for _, k := range []struct {
				name string
				dst  *[]int
			}{{"seqs", &c.Seqs}, {"start", &c.Start}} {
				v, ok := args.take(k.name)
				if !ok {
					continue
				}
				ids := []int{}
				for _, p := range strings.Split(v, ",") {
					q, err := strconv.Atoi(p)
					if err != nil || q < 0 || q >= MaxSeqs {
						return fail(fmt.Errorf("%s %q: want ids 0..%d separated by commas", k.name, v, MaxSeqs-1))
					}
					ids = append(ids, q)
				}
				if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
					return fail(fmt.Errorf("%s %q: want increasing, distinct ids", k.name, v))
				}
				*k.dst = ids
			}
			if c.Force, err = args.int("force", 0); err != nil {
				return fail(err)
			}
			if c.Skip, err = args.int("skip", 0); err != nil {
				return fail(err)
			}
			if c.Force < 0 || c.Skip < 0 || c.Skip > MaxSkip {
				return fail(fmt.Errorf("want force >= 0 and 0 <= skip <= %d", MaxSkip))
			}
			s.Commands = append(s.Commands, c)
		case "finish":
			c := Cmd{Kind: Finish}
			if c.Seq, err = args.need("seq"); err != nil {
				return fail(err)
			}
			if c.Seq < 0 || c.Seq >= MaxSeqs {
				return fail(fmt.Errorf("seq %d: want 0..%d", c.Seq, MaxSeqs-1))
			}
			s.Commands = append(s.Commands, c)
		case "recapture":
			s.Commands = append(s.Commands, Cmd{Kind: Recapture})
		default:
			return s, fmt.Errorf("line %d: unknown command %q", lineNo, verb)
		}
		if err := args.done(); err != nil {
			return fail(err)
		}
	}
	if err := in.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return s, fmt.Errorf("line %d: longer than %d bytes", lineNo+1, bufio.MaxScanTokenSize)
		}
		return s, err
	}
	for _, h := range []string{"model", "device", "engine"} {
		if !seen[h] {
			return s, fmt.Errorf("no %q line", h)
		}
	}
	if err := sc.Validate(); err != nil {
		return s, fmt.Errorf("scenario: %w", err)
	}
	return s, nil
}

func validSeq(q int) bool { return q >= 0 && q < MaxSeqs }

// parseInts parses integers separated by commas.
func parseInts(v string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// checkVerifyArgs checks a verify command's form: increasing, distinct
// sequence ids, and for each 1 <= k <= MaxVerifyK and 1 <= accept <= k.
func checkVerifyArgs(c Cmd) error {
	switch {
	case len(c.Seqs) == 0 || len(c.K) != len(c.Seqs) || len(c.Accept) != len(c.Seqs):
		return fmt.Errorf("want seqs, k and accept lists of one length (%d, %d, %d)", len(c.Seqs), len(c.K), len(c.Accept))
	case c.Draft < 0:
		return fmt.Errorf("draft %d: want >= 0", c.Draft)
	}
	for i, q := range c.Seqs {
		switch {
		case !validSeq(q):
			return fmt.Errorf("seq %d: want 0..%d", q, MaxSeqs-1)
		case i > 0 && q <= c.Seqs[i-1]:
			return errors.New("seqs: want increasing, distinct ids")
		case c.K[i] < 1 || c.K[i] > MaxVerifyK:
			return fmt.Errorf("k %d: want 1..%d", c.K[i], MaxVerifyK)
		case c.Accept[i] < 1 || c.Accept[i] > c.K[i]:
			return fmt.Errorf("accept %d: want 1..k (%d)", c.Accept[i], c.K[i])
		}
	}
	return nil
}

// scriptArgs are one line's arguments: positional words, key=value pairs
// and bare flags.
type scriptArgs struct {
	pos  []string
	kv   map[string]string
	used map[string]bool
}

func parseArgs(f []string) (string, *scriptArgs, error) {
	a := &scriptArgs{kv: map[string]string{}, used: map[string]bool{}}
	for _, w := range f[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			if len(a.kv) == 0 && !isFlagWord(w) {
				a.pos = append(a.pos, w)
				continue
			}
			k, v = w, ""
		}
		if _, dup := a.kv[k]; dup {
			return "", nil, fmt.Errorf("%s: %s given twice", f[0], k)
		}
		a.kv[k] = v
	}
	return f[0], a, nil
}

func isFlagWord(w string) bool { return w == "strict" || w == "verify" }

func (a *scriptArgs) positional(dst *string) error {
	if len(a.pos) != 1 {
		return fmt.Errorf("want one name, got %q", a.pos)
	}
	*dst = a.pos[0]
	a.pos = nil
	return nil
}

func (a *scriptArgs) take(k string) (string, bool) {
	v, ok := a.kv[k]
	if ok {
		a.used[k] = true
	}
	return v, ok
}

func (a *scriptArgs) flag(k string) bool {
	v, ok := a.take(k)
	return ok && v == ""
}

func (a *scriptArgs) int(k string, def int) (int, error) {
	v, ok := a.take(k)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want an integer", k, v)
	}
	return n, nil
}

func (a *scriptArgs) uint(k string, def uint64) (uint64, error) {
	v, ok := a.take(k)
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want an unsigned integer", k, v)
	}
	return n, nil
}

func (a *scriptArgs) need(k string) (int, error) {
	if _, ok := a.kv[k]; !ok {
		return 0, fmt.Errorf("missing %s=", k)
	}
	return a.int(k, 0)
}

func (a *scriptArgs) done() error {
	if len(a.pos) > 0 {
		return fmt.Errorf("unexpected %q", a.pos[0])
	}
	keys := make([]string, 0, len(a.kv))
	for k := range a.kv {
		if !a.used[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		return fmt.Errorf("unknown argument %q", keys[0])
	}
	return nil
}
