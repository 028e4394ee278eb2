package proptest

import (
	"fmt"
	"slices"

	"github.com/offcard/offcard/qwen3"
)

// Properties replay (4) and host-writes (7): the regime cadence the
// contract prescribes, from the device's own events (the Tap), and zero
// host writes in a steady-state replay. The cadence is the suite's own
// model of the contract, never the engine's helpers.

// checkTap checks a Decoder call against the device's events: the regime
// cadence (captured engines) or no trace at all (eager engines and
// prefills), zero host writes in a steady-state replay, and the memory
// the engine holds afterwards.
func (r *runner) checkTap(ps *[]problem, k call) {
	ev := r.tap.TakeEvents()
	w := r.reachWidth(k)
	if !k.decode {
		if ev.Captures+ev.Executes > 0 {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1,
				detail: fmt.Sprintf("a prefill captured %d and executed %d traces on the device", ev.Captures, ev.Executes)})
		}
		r.regime.prefill(w, r.decodeSteps(k))
	} else if k.err == nil {
		obs, want, why := r.regime.decode(&r.sc, w, activeSlots(k.act), ev)
		if obs != want {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, located: true,
				detail: fmt.Sprintf("the device ran a %s step (%d captures, %d trace executions, %d eager ops), the contract's cadence wants %s: %s (slots %v, width %d, mode %v, recapture_every %d)",
					obs, ev.Captures, ev.Executes, ev.EagerOps, want, why, sortedSlots(k.act), w, r.sc.Mode, r.sc.RecaptureEvery)})
		}
		r.reach.regime(obs, k.steady)
		if r.regime.refusedNow {
			r.reach.add(ReachCaptureRefused)
		}
		if obs == "replay" && k.steady {
			if ev.HostWrites > 0 {
				*ps = append(*ps, problem{prop: PropHostWrites, seq: -1, pos: -1, located: true,
					detail: fmt.Sprintf("a steady-state replay (same slots %v, each one position on inside its block, fed the previous step's tokens) made %d host writes, want 0", sortedSlots(k.act), ev.HostWrites)})
			}
		}
	}
	r.checkMem(ps, ev)
}

// reachWidth returns the contract's page-table width for call k (the
// width policy over its longest sequence) and counts a step as wide as
// the cache in the reach, whatever the SUT offers.
func (r *runner) reachWidth(k call) int {
	longest := 0
	for _, a := range k.act {
		longest = max(longest, a.pos[len(a.pos)-1]/r.sc.BlockSize+1)
	}
	w := r.sc.contractWidth(longest)
	r.reach.width(w, r.sc.NumBlocks)
	return w
}

// decodeSteps reports whether a call other than a decode runs eager decode
// steps, which compile the decode programs at its width (the contract's
// warm-up before a capture): a prefill by decode steps, a verify's rounds,
// and a PrefillFrom's positions before its first block boundary.
func (r *runner) decodeSteps(k call) bool {
	return r.sc.Prefill == qwen3.PrefillDecode || k.verify || (k.from && k.act[0].pos[0]%r.sc.BlockSize != 0)
}

func (r *runner) checkRegime(ps *[]problem, si StepInfo) {
	switch si.Regime {
	case "replay":
		switch {
		case r.sc.Mode == qwen3.ModeEager:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "an eager engine replayed a trace"})
		case r.traceWidth < 0:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "replay with no capture since the engine was reset"})
		case si.Width != r.traceWidth:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("replayed a trace captured with a width-%d page table at width %d (a width change must force a re-capture)", r.traceWidth, si.Width)})
		}
	case "capture":
		if r.sc.Mode == qwen3.ModeEager {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "an eager engine captured a trace"})
		}
		r.traceWidth = si.Width
	default:
		r.traceWidth = -1
	}
}

// regimeModel is the regime cadence the contract prescribes for a captured
// engine: capture once the step's programs are compiled (an eager step ran
// at the current width since the last reset), replay after; release and
// re-capture on a page-table width change, on a change of the active
// slots, and after RecaptureEvery steps on one trace. It follows the
// device's trace events, so it also says what the device did.
type regimeModel struct {
	width      int // the current page-table width, 0 before the first step
	gen        int // page-table generation: bumped by every width change
	warm       map[int]bool
	live       bool // a trace is live
	traceGen   int
	traceAct   [MaxCapacity]bool
	traceSteps int
	// refused: the device refused a capture for its size (a trace region
	// smaller than the decode graph's trace). Its bytes stay counted on the
	// device (tt_metal/distributed/mesh_trace.cpp:59-60) and the engine
	// captures with no trace live, so no later capture fits: the cadence
	// is eager from then on, through resets (the device is the same).
	refused bool
	// refusedNow: the last decode step is the one whose capture was refused.
	refusedNow bool
}

func newRegimeModel() regimeModel { return regimeModel{warm: map[int]bool{}} }

// setWidth notes a step's page-table width.
func (m *regimeModel) setWidth(w int) {
	if w != m.width {
		m.width = w
		m.gen++
	}
}

// reset is Engine.Reset (the Recapture command).
func (m *regimeModel) reset() {
	m.live = false
	clear(m.warm)
}

// observed is the regime the device events of one decode step show.
func observedRegime(e TapEvents) string {
	switch {
	case e.Captures > 0:
		return "capture"
	case e.Executes > 0:
		return "replay"
	}
	return "eager"
}

// decode checks one decode step of a captured or eager engine against the
// cadence, from what the device did, and advances the model. It returns ""
// or what differs, and why the model expected what it did.
func (m *regimeModel) decode(sc *Scenario, width int, act [MaxCapacity]bool, e TapEvents) (obs, want, why string) {
	m.setWidth(width)
	m.refusedNow = false
	obs = observedRegime(e)
	switch {
	case sc.Mode == qwen3.ModeEager:
		want, why = "eager", "the engine is eager"
	case m.refused:
		want, why = "eager", "the device refused a capture earlier (its trace region cannot hold the decode graph's trace)"
		if e.Refused > 0 {
			obs = "capture (refused again)" // tried after a refusal: no capture can fit now
		}
	default:
		if m.live {
			switch {
			case m.gen != m.traceGen:
				m.live, why = false, "the page-table width changed since the capture"
			case act != m.traceAct:
				m.live, why = false, "the active slots differ from the capture's"
			case sc.RecaptureEvery > 0 && m.traceSteps >= sc.RecaptureEvery:
				m.live, why = false, fmt.Sprintf("the trace has run %d steps (recapture_every %d)", m.traceSteps, sc.RecaptureEvery)
			}
		} else {
			why = "no trace is live"
		}
		switch {
		case m.live:
			want, why = "replay", "the live trace matches the step's width and slots"
		case m.warm[width] && e.Refused > 0:
			want, why = "eager", why+"; the width's programs are compiled, and the device refused the capture (its trace region cannot hold it), so the step runs eager"
			m.refused, m.refusedNow = true, true
		case m.warm[width]:
			want, why = "capture", why+"; the width's programs are compiled"
		default:
			want, why = "eager", why+fmt.Sprintf("; no eager step ran at width %d since the last reset", width)
		}
	}
	// Follow the device.
	switch obs {
	case "capture":
		m.live, m.traceGen, m.traceAct, m.traceSteps = true, m.gen, act, 1
	case "replay":
		m.traceSteps++
	default:
		m.warm[width] = true
	}
	return obs, want, why
}

// prefill notes a prefill at width w: eager decode steps warm the width;
// one multi-token program compiles no decode program.
func (m *regimeModel) prefill(w int, decodeSteps bool) {
	m.setWidth(w)
	if decodeSteps {
		m.warm[w] = true
	}
}

// stepState is one slot's part of the last device step, for the
// steady-state test.
type stepState struct {
	seq, pos int
	token    int32 // the token the step produced (ref's, equal to the device's)
}

// steady reports whether a decode step is steady state relative to the
// previous device step prev (nil: none, or a command ran in between that
// changes what the device holds): the same slots active with the same
// sequences, each one position further inside the same block, each fed the
// token the previous step produced. A replay of such a step needs no host
// write at all.
func steady(prev map[int]stepState, act []active, fed map[int]int32, bs int) bool {
	if prev == nil || len(prev) != len(act) {
		return false
	}
	for _, a := range act {
		p, ok := prev[a.slot]
		pos := a.pos[0]
		if !ok || p.seq != a.seq || pos != p.pos+1 || pos/bs != p.pos/bs || fed[a.seq] != p.token {
			return false
		}
	}
	return true
}

func activeSlots(act []active) [MaxCapacity]bool {
	var s [MaxCapacity]bool
	for _, a := range act {
		s[a.slot] = true
	}
	return s
}

func sortedSlots(act []active) []int {
	s := make([]int, len(act))
	for i, a := range act {
		s[i] = a.slot
	}
	slices.Sort(s)
	return s
}
