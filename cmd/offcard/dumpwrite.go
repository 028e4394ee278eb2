package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

// dumpTopK is the number of top logits a step record carries.
const dumpTopK = 8

// dumpStep is the step record of one output: the token, the top logits,
// the top-1/top-2 gap in bf16 steps and the digest of the whole row.
func dumpStep(step int, o qwen3.Output) dump.Step {
	ids, vals := dump.Top(o.Logits, dumpTopK)
	s := dump.Step{Step: step, Seq: int(o.Seq), Pos: o.Pos, Token: o.Token, TopIDs: ids, TopLogits: vals, GapSteps: -1, Digest: dump.Digest(o.Logits)}
	if len(vals) > 1 {
		s.GapSteps = bf16.Steps(bf16.FromFloat32(vals[0]), bf16.FromFloat32(vals[1]))
	}
	return s
}

// dumpRecorder writes a decoder's outputs as a dump: a prompt record and
// the last prompt position's step at a prefill, a step per output at a
// decode. A nil recorder records nothing. The first error is kept (the
// decoder's caller must not see it) and returned by commit.
//
// A schedule may admit a sequence id again after finishing it; the dump
// numbers admissions instead (0, 1, ... in prefill order), so each
// admission is its own dump sequence.
type dumpRecorder struct {
	w     *dump.Writer
	ids   map[qwen3.SeqID]int // the engine's id -> the dump's
	steps map[int]int         // generated tokens per dump sequence
	err   error
}

func newDumpRecorder(w io.Writer, sc proptest.Scenario) *dumpRecorder {
	r := &dumpRecorder{w: dump.NewWriter(w), ids: map[qwen3.SeqID]int{}, steps: map[int]int{}}
	if mw, err := proptest.ModelWeights(sc); err == nil {
		r.w.SetModel(mw.Digest(), synthName(sc.Model, sc.ModelSeed))
	}
	return r
}

// synthName is a synthetic model's name in a dump's model_name.
func synthName(preset string, seed uint64) string {
	return fmt.Sprintf("synth %s seed %d", preset, seed)
}

func (r *dumpRecorder) prefill(p qwen3.Prefill, out []qwen3.Output) {
	if r == nil || r.err != nil || len(out) == 0 {
		return
	}
	id := len(r.steps)
	r.ids[p.Seq] = id
	r.steps[id] = 0
	if r.err = r.w.Prompt(id, p.Tokens); r.err == nil {
		r.step(out[len(out)-1])
	}
}

func (r *dumpRecorder) decode(out []qwen3.Output) {
	for _, o := range out {
		if r == nil || r.err != nil {
			return
		}
		r.step(o)
	}
}

func (r *dumpRecorder) step(o qwen3.Output) {
	id, ok := r.ids[o.Seq]
	if !ok {
		r.err = fmt.Errorf("output of seq %d, which was never prefilled", o.Seq)
		return
	}
	s := dumpStep(r.steps[id], o)
	s.Seq = id
	r.err = r.w.Step(s)
	r.steps[id]++
}

// recordingDecoder is a decoder whose outputs a dumpRecorder records.
type recordingDecoder struct {
	qwen3.Decoder
	rec *dumpRecorder
}

func (d recordingDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	out, err := d.Decoder.Prefill(p)
	if err == nil {
		d.rec.prefill(p, out)
	}
	return out, err
}

func (d recordingDecoder) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	out, err := d.Decoder.Decode(batch)
	if err == nil {
		d.rec.decode(out)
	}
	return out, err
}

// recordingSimSUT is the simulator SUT with its decoder recorded; every
// observer of SimSUT stays available to the suite.
type recordingSimSUT struct {
	*proptest.SimSUT
	rec *dumpRecorder
}

func (s recordingSimSUT) Decoder() qwen3.Decoder {
	return recordingDecoder{s.SimSUT.Decoder(), s.rec}
}

// recordingSUT records any other SUT (its optional observers but
// Tolerant are hidden: the re-run checks fewer properties, and its tokens
// are the same).
type recordingSUT struct {
	proptest.SUT
	rec *dumpRecorder
}

func (s recordingSUT) Decoder() qwen3.Decoder { return recordingDecoder{s.SUT.Decoder(), s.rec} }

// recordingTolerantSUT keeps a tolerant SUT tolerant (the re-run must not
// stop at the first output that is not bit-exact).
type recordingTolerantSUT struct {
	recordingSUT
	tol proptest.Tolerant
}

func (s recordingTolerantSUT) Tolerance() proptest.Tolerance { return s.tol.Tolerance() }

// dumpCase runs script once more on factory's SUT and writes the
// engine's tokens to path as a dump. It returns the command that
// adjudicates the dump against ref.
func dumpCase(path string, script proptest.Script, factory proptest.Factory) (string, error) {
	f, err := createAtomic(path)
	if err != nil {
		return "", err
	}
	defer f.Abort()
	rec := newDumpRecorder(f, script.Scenario)
	_, _, err = proptest.RunScript(script, func(sc proptest.Scenario) (proptest.SUT, error) {
		sut, err := factory(sc)
		if err != nil {
			return nil, err
		}
		if s, ok := sut.(*proptest.SimSUT); ok {
			return recordingSimSUT{s, rec}, nil
		}
		if t, ok := sut.(proptest.Tolerant); ok {
			return recordingTolerantSUT{recordingSUT{sut, rec}, t}, nil
		}
		return recordingSUT{sut, rec}, nil
	})
	if err != nil {
		return "", err
	}
	if err := rec.commit(f); err != nil {
		return "", err
	}
	sc := script.Scenario
	if sc.ModelDir != "" {
		return fmt.Sprintf("offcard adjudicate --ours %s --model %s", path, sc.ModelDir), nil
	}
	return fmt.Sprintf("offcard adjudicate --ours %s --synth %s --seed %d", path, sc.Model, sc.ModelSeed), nil
}

// errEmptyDump: the run failed before the engine produced any token, so
// there is no dump to write (an empty file would only make adjudicate
// exit 2).
var errEmptyDump = errors.New("the run failed before the engine produced any token: no dump written")

// commit flushes the dump and moves f into place; a dump without a
// record is not written (errEmptyDump).
func (r *dumpRecorder) commit(f *atomicFile) error {
	if r.err != nil {
		return fmt.Errorf("dump: %w", r.err)
	}
	if len(r.steps) == 0 {
		return errEmptyDump
	}
	if err := r.w.Flush(); err != nil {
		return err
	}
	return f.Commit()
}
