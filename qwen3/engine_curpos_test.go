package qwen3_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
	"github.com/offcard/offcard/tt"
)

// curPosObserver checks the device's cur_pos tensor after every op the
// simulator executes (eager or replayed), through sim's observer and Peek —
// not through the engine. During an engine call that starts at positions
// want (one per active slot), cur_pos must hold want[i]+k for the active
// slots and -1 for every other slot, where k counts the plus_one ops on
// cur_pos executed so far in the call (one per step: a decode call is one
// step; a prefill of n tokens by decode steps is n steps from position 0).
// A prefill program reads no cur_pos: only its end state is checked
// (endState).
type curPosObserver struct {
	dev      *sim.Device
	curPos   tt.Tensor
	addr     uint64
	capacity int

	want    []int32
	k       int32
	checked int
	err     error
}

func (o *curPosObserver) begin(want []int32) {
	o.want = slices.Sorted(slices.Values(want))
	o.k = 0
}

func (o *curPosObserver) onOp(e sim.OpEvent) {
	if o.err != nil || o.dev == nil || o.want == nil || e.Regime == sim.Capture {
		return
	}
	if e.Op == "plus_one" && len(e.Touched) > 0 && e.Touched[0].Addr == o.addr {
		o.k++
	}
	o.check(fmt.Sprintf("after op #%d %s (%s)", e.Seq, e.Op, e.Regime))
}

// endState checks cur_pos once, after a call: want for the active slots.
func (o *curPosObserver) endState(want []int32) {
	if o.err == nil {
		o.begin(want)
		o.check("after the call")
	}
	o.want = nil
}

// check compares the device's cur_pos with want+k.
func (o *curPosObserver) check(when string) {
	h, err := o.dev.Peek(o.curPos)
	if err != nil {
		o.err = err
		return
	}
	var active []int32
	inactive := 0
	for _, v := range h.Int32s() {
		if v == -1 {
			inactive++
		} else {
			active = append(active, v)
		}
	}
	slices.Sort(active)
	want := make([]int32, len(o.want))
	for i, p := range o.want {
		want[i] = p + o.k
	}
	if !slices.Equal(active, want) || inactive != o.capacity-len(want) {
		o.err = fmt.Errorf("%s: device cur_pos %v, host expects active %v and %d slots at -1",
			when, h.Int32s(), want, o.capacity-len(want))
		return
	}
	o.checked++
}

// After every op, the device's cur_pos equals the host's position of the
// token each active slot is decoding (seq_len-1), -1 elsewhere; plus_one
// (recorded in the trace) is the only thing that advances it.
func TestEngineCurPosAtEveryOp(t *testing.T) {
	for _, tc := range []struct {
		name string
		eo   qwen3.EngineOptions
	}{
		{"eager dynamic", qwen3.EngineOptions{Capacity: 3, Width: kvpage.Dynamic()}},
		{"eager dynamic prefill by decode", qwen3.EngineOptions{Capacity: 3, Width: kvpage.Dynamic(), Prefill: qwen3.PrefillDecode}},
		{"captured dynamic", qwen3.EngineOptions{Capacity: 3, Width: kvpage.Dynamic(), Mode: qwen3.ModeCaptured}},
		{"captured dynamic prefill by decode", qwen3.EngineOptions{Capacity: 3, Width: kvpage.Dynamic(), Mode: qwen3.ModeCaptured, Prefill: qwen3.PrefillDecode}},
		{"captured fixed recapture 3", qwen3.EngineOptions{Capacity: 3, Width: kvpage.Fixed(8), Mode: qwen3.ModeCaptured, RecaptureEvery: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &curPosObserver{capacity: tc.eo.Capacity}
			h := newHarness(t, sim.Options{Strict: true, OnOp: obs.onOp}, tc.eo)
			obs.dev = h.dev
			_, obs.curPos, _ = h.eng.Inputs()
			addr, err := h.dev.Address(obs.curPos)
			if err != nil {
				t.Fatal(err)
			}
			obs.addr = addr
			h.curPos = obs
			h.findingsEachStep = true
			// Three sequences through the 32- and 64-position boundaries,
			// joining and finishing at different steps.
			h.run([]seqPlan{{admit: 0, prompt: 30, gen: 40}, {admit: 3, prompt: 31, gen: 20}, {admit: 10, prompt: 5, gen: 30}})
			if obs.err != nil {
				t.Fatal(obs.err)
			}
			if obs.checked < 1000 {
				t.Fatalf("only %d ops checked", obs.checked)
			}
			h.noFindings()
		})
	}
}
