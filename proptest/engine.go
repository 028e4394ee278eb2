package proptest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
type EngineFactory struct {
	o   EngineOptions
	mu  sync.Mutex
	dir string
	// v1: the engine refused a version 2 hello; later hellos say 1.
	v1 bool
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

// Close removes the exported weights.
func (f *EngineFactory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir == "" {
		return nil
	}
	err := os.RemoveAll(f.dir)
	f.dir = ""
	return err
}

// weights exports the scenario's synthetic weights (once) and returns
// their directory and config.json.
func (f *EngineFactory) weights(sc Scenario) (string, []byte, error) {
	w, err := ModelWeights(sc)
	if err != nil {
		return "", nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
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
			Arch: sc.Arch, Strict: sc.Strict, Verify: sc.Verify},
	}, nil
}

// Factory implements Factory.
func (f *EngineFactory) Factory(sc Scenario) (SUT, error) {
	h, err := f.Hello(sc)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.v1 {
		h.Version = 1
	}
	f.mu.Unlock()
	o := wire.Options{Command: f.o.Command, Timeout: f.o.Timeout, HelloTimeout: f.o.HelloTimeout}
	c, err := wire.Start(o, h)
	var refused *wire.RefusedError
	if errors.As(err, &refused) && h.Version != 1 {
		// An engine written for version 1 may refuse a newer hello instead
		// of answering 1: ask again in version 1, and from now on.
		h.Version = 1
		if c, err = wire.Start(o, h); err == nil {
			f.mu.Lock()
			f.v1 = true
			f.mu.Unlock()
		}
	}
	if err != nil {
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
	return s.obs().Findings
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
