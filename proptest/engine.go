package proptest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// EngineDevice is the device name of scenarios run on an engine process.
const EngineDevice = "engine"

// EngineOptions configure an EngineFactory.
type EngineOptions struct {
	// Command is the engine's argv.
	Command []string
	// Timeout bounds each call, HelloTimeout the hello (wire's defaults
	// when 0).
	Timeout, HelloTimeout time.Duration
	// Tolerance is the tolerant mode's bounds (DefaultTolerance when
	// zero).
	Tolerance Tolerance
}

// EngineFactory starts a fresh engine process for every schedule run
// (shrinking included: a case replays from scratch), speaking the line
// protocol, and runs the tolerant mode against it. The synthetic weights
// are exported once per (preset, seed) into a temporary directory, named
// in the hello, for engines that load them; Close removes it.
//
// A run that cannot start is not a finding about its schedule: when the
// engine fails its hello (a *wire.StartError) or the weights cannot be
// exported (offcard's environment), the factory fails every later run at
// once with the same error, and Failed reports it; a campaign stops there
// (Options.Abort) and a case is not shrunk on it (Aborting).
type EngineFactory struct {
	// failed is the error every run fails with from now on, closed that
	// Close ran (both under mu).
	failed error
	closed bool

	o   EngineOptions
	mu  sync.Mutex
	dir string
	// version, when not 0: the engine refused newer hellos and accepted
	// this version's; later hellos say it.
	version int
}

// SetupError is a run of an EngineFactory that could not start: the
// engine failed its hello, or offcard could not export the weights. It
// ends a campaign (see EngineFactory).
type SetupError struct {
	Err error
	// Engine: the engine failed (Err is a *wire.StartError); else
	// offcard's own environment did (e.g. TMPDIR).
	Engine bool
}

func (e *SetupError) Error() string {
	if e.Engine {
		return e.Err.Error()
	}
	return "export the synthetic weights for the engine: " + e.Err.Error()
}

func (e *SetupError) Unwrap() error { return e.Err }

// Aborting implements the interface Aborting looks for.
func (e *SetupError) Aborting() bool { return true }

// Aborting reports whether err ends the campaign it happened in rather
// than failing its case (an error with an Aborting() bool method saying
// so, such as *SetupError).
func Aborting(err error) bool {
	var a interface{ Aborting() bool }
	return errors.As(err, &a) && a.Aborting()
}

// Failed is the error that made the factory refuse its runs (nil: none).
func (f *EngineFactory) Failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// fail records err as the factory's failure (the first one wins) and
// returns the recorded one.
func (f *EngineFactory) fail(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = err
	}
	return f.failed
}

// NewEngineFactory returns a factory for o.Command.
func NewEngineFactory(o EngineOptions) (*EngineFactory, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("no engine command")
	}
	if o.Tolerance == (Tolerance{}) {
		o.Tolerance = DefaultTolerance
	}
	return &EngineFactory{o: o}, nil
}

// Close removes the exported weights; later runs fail.
func (f *EngineFactory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.dir == "" {
		return nil
	}
	err := os.RemoveAll(f.dir)
	f.dir = ""
	return err
}

// weights exports the scenario's synthetic weights (once) and returns
// their directory and config.json; a checkpoint directory is named as it
// is.
func (f *EngineFactory) weights(sc Scenario) (string, []byte, error) {
	if sc.ModelDir != "" {
		b, err := os.ReadFile(filepath.Join(sc.ModelDir, "config.json"))
		return sc.ModelDir, b, err
	}
	w, err := ModelWeights(sc)
	if err != nil {
		return "", nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return "", nil, errors.New("the engine factory is closed")
	}
	if f.dir == "" {
		if f.dir, err = os.MkdirTemp("", "offcard-engine-weights-"); err != nil {
			return "", nil, err
		}
	}
	dir := filepath.Join(f.dir, fmt.Sprintf("%s-seed%d", sc.Model, sc.ModelSeed))
	cfg := filepath.Join(dir, "config.json")
	if _, err := os.Stat(cfg); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		if err := w.Export(dir); err != nil {
			return "", nil, err
		}
	}
	b, err := os.ReadFile(cfg)
	return dir, b, err
}

// Hello is the hello the factory sends for a scenario.
func (f *EngineFactory) Hello(sc Scenario) (wire.Hello, error) {
	dir, cfg, err := f.weights(sc)
	if err != nil {
		return wire.Hello{}, err
	}
	return wire.Hello{
		Model:     wire.Model{Preset: sc.Model, Seed: sc.ModelSeed, Config: cfg, Weights: dir},
		BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Capacity: sc.Capacity,
		Hints: &wire.Hints{Width: sc.Width.String(), Mode: sc.Mode.String(), Prefill: sc.Prefill.String(), RecaptureEvery: sc.RecaptureEvery,
			Arch: sc.Arch, Strict: sc.Strict, Verify: sc.Verify, TraceRegion: sc.TraceRegion},
	}, nil
}

// Factory implements Factory.
func (f *EngineFactory) Factory(sc Scenario) (SUT, error) {
	if err := f.Failed(); err != nil {
		return nil, err
	}
	h, err := f.Hello(sc)
	if err != nil {
		return nil, f.fail(&SetupError{Err: err})
	}
	h.Version = wire.Version
	f.mu.Lock()
	if f.version > 0 {
		h.Version = f.version
	}
	f.mu.Unlock()
	o := wire.Options{Command: f.o.Command, Timeout: f.o.Timeout, HelloTimeout: f.o.HelloTimeout}
	c, err := wire.Start(o, h)
	var refused *wire.RefusedError
	for errors.As(err, &refused) && h.Version > wire.MinVersion {
		// An engine written for an older version may refuse a newer hello
		// instead of answering its own: ask again one version older, and
		// from now on in the version it accepts.
		h.Version--
		if c, err = wire.Start(o, h); err == nil {
			f.mu.Lock()
			f.version = h.Version
			f.mu.Unlock()
		}
	}
	if err != nil {
		var se *wire.StartError
		if errors.As(err, &se) {
			return nil, f.fail(&SetupError{Err: err, Engine: true})
		}
		return nil, err
	}
	return &EngineSUT{C: c, tol: f.o.Tolerance}, nil
}

// EngineSUT is an engine process behind the protocol: a tolerant SUT
// offering what the engine's hello said it can (KV writes, cur_pos and
// page-table rows by sequence, findings, top-k logits; in version 2 the
// regime, host writes and memory of each call, and what bye leaves).
type EngineSUT struct {
	C   *wire.Client
	tol Tolerance
	// taken marks the last reply's observations as read, one flag per kind.
	takenKV, takenFind, takenSeq, takenDev int
}

// Decoder implements SUT.
func (s *EngineSUT) Decoder() qwen3.Decoder { return s.C }

// Close implements SUT: bye. A fault of the session is Close's error, and
// so is an error reply to bye (the engine's teardown failed).
func (s *EngineSUT) Close() error {
	if err := s.C.Close(); err != nil {
		return err
	}
	if rep := s.C.ByeReply(); rep != nil && !rep.OK {
		return fmt.Errorf("bye: the engine's teardown failed: %s", rep.Error)
	}
	return nil
}

// Reset implements Resetter (the reset op).
func (s *EngineSUT) Reset() error { return s.C.Reset() }

// Tolerance implements Tolerant.
func (s *EngineSUT) Tolerance() Tolerance {
	t := s.tol
	if s.C.Caps().Exact {
		t.Exact = true
	}
	return t
}

func (s *EngineSUT) obs() *wire.Observations {
	return s.C.Last().Obs
}

// takeWire returns the last reply's observations (empty when it had
// none) and true, unless the kind taken marks was read already.
func (s *EngineSUT) takeWire(taken *int) (wire.Observations, bool) {
	if !s.fresh(taken) {
		return wire.Observations{}, false
	}
	if o := s.obs(); o != nil {
		return *o, true
	}
	return wire.Observations{}, true
}

// fresh reports whether the last reply's observations of one kind are
// still unread (each reply is read once).
func (s *EngineSUT) fresh(taken *int) bool {
	n := s.C.Calls()
	if *taken == n {
		return false
	}
	*taken = n
	return true
}

// TakeKVWrites implements KVObserver, by sequence: KVWrite.Slot holds the
// sequence (-1: none of the call's). An engine that does not offer
// kv_writes reports none (the tolerant mode then checks none).
func (s *EngineSUT) TakeKVWrites() ([]KVWrite, error) {
	if !s.fresh(&s.takenKV) || s.obs() == nil {
		return nil, nil
	}
	var out []KVWrite
	for _, w := range s.obs().KVWrites {
		if w.KV != "k" && w.KV != "v" {
			return nil, fmt.Errorf("KV write %+v: kv %q, want k or v", w, w.KV)
		}
		out = append(out, KVWrite{Layer: w.Layer, Value: w.KV == "v", Slot: w.Seq, Pos: w.Pos, Block: w.Block, Row: w.Row})
	}
	return out, nil
}

// TakeFindings implements FindingObserver.
func (s *EngineSUT) TakeFindings() []string {
	if !s.fresh(&s.takenFind) || s.obs() == nil {
		return nil
	}
	fs := s.obs().Findings
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = clipEngineText(f)
	}
	return out
}

// clipEngineText bounds a text an engine sent (a finding) for reports.
func clipEngineText(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + fmt.Sprintf("... (%d bytes)", len(s))
}

// TakeSeqStates implements SeqObserver.
func (s *EngineSUT) TakeSeqStates() ([]SeqState, error) {
	if !s.fresh(&s.takenSeq) || s.obs() == nil {
		return nil, nil
	}
	var out []SeqState
	for _, o := range s.obs().Seqs {
		st := SeqState{Seq: o.Seq, CurPos: -1, Row: o.PageRow}
		if o.CurPos != nil {
			st.CurPos = *o.CurPos
		}
		out = append(out, st)
	}
	for _, row := range s.obs().IdleRows {
		out = append(out, SeqState{Seq: -1, CurPos: -1, Row: row})
	}
	return out, nil
}

// SeqCaps implements SeqObserver.
func (s *EngineSUT) SeqCaps() (curPos, pageRow bool, pad *int32) {
	c := s.C.Caps()
	return c.Offers(wire.ObsCurPos), c.Offers(wire.ObsPageTable), c.PagePad
}

// PartialLogits implements PartialLogitsObserver: the last call's top-k
// and digests, one per output (nil unless the engine sends top_k).
func (s *EngineSUT) PartialLogits() []PartialLogits {
	if s.C.Caps().Logits != wire.LogitsTopK {
		return nil
	}
	outs := s.C.Last().Outputs
	p := make([]PartialLogits, len(outs))
	for i, o := range outs {
		p[i] = PartialLogits{IDs: o.TopIDs, Logits: o.TopLogits, Digest: o.Digest}
	}
	return p
}
