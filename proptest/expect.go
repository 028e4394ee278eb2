package proptest

import (
	"fmt"
	"slices"

	"github.com/offcard/offcard/qwen3"
)

// The property suite's own model of what the engine must do, written from
// the contract (the design's "The engine" section and qwen3.Engine's
// documented behaviour), never by calling the engine's helpers: a wrong
// policy shared by the engine and a helper would otherwise look right.

// contractPad is the page-table value of every column a slot does not use
// (the columns past its current block, every column of an inactive slot).
const contractPad int32 = 0

// contractWidth is the page-table width of a step whose longest active
// row needs longest blocks: fixed:N is N; dynamic is the longest row, at
// least one column.
func (sc Scenario) contractWidth(longest int) int {
	if fw, ok := sc.Width.FixedWidth(); ok {
		return fw
	}
	return max(longest, 1)
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
	obs = observedRegime(e)
	switch {
	case sc.Mode == qwen3.ModeEager:
		want, why = "eager", "the engine is eager"
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
func (m *regimeModel) prefill(w int, mode qwen3.PrefillMode) {
	m.setWidth(w)
	if mode == qwen3.PrefillDecode {
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

// checkMemory checks the device memory the engine holds after a call: its
// persistent tensors (as many as after construction), the current page
// table (the one its paged ops last used), and tables a live trace still
// records; nothing else.
func checkMemory(tm TapMemory, persistent int) string {
	if tm.Persistent != persistent {
		return fmt.Sprintf("%d of the %d tensors allocated at construction are live", tm.Persistent, persistent)
	}
	var stray []string
	for _, x := range tm.Later {
		if x.ID == tm.PageTable || tm.InTrace[x.ID] {
			continue
		}
		stray = append(stray, x.String())
	}
	if len(stray) > 0 {
		return fmt.Sprintf("%d tensors allocated after construction are live though neither the current page table (t%d, the one the last paged op used) nor recorded by a live trace: %v",
			len(stray), tm.PageTable, stray[:min(len(stray), 3)])
	}
	return ""
}

// checkClosed checks that nothing is left on the device after Close.
func checkClosed(tm TapMemory) string {
	n := tm.Persistent + len(tm.Later)
	if n == 0 && tm.Traces == 0 {
		return ""
	}
	ids := make([]string, 0, 3)
	for _, x := range tm.Later[:min(3, len(tm.Later))] {
		ids = append(ids, x.String())
	}
	return fmt.Sprintf("after Close the device still holds %d tensors (%d persistent, later ones %v) and %d traces", n, tm.Persistent, ids, tm.Traces)
}

// expectedRows lists the cache rows (block, row) a call writes, by slot.
func expectedRows(act []active, bs int) map[[2]int][2]int {
	rows := map[[2]int][2]int{}
	for _, a := range act {
		for _, p := range a.pos {
			rows[[2]int{int(a.blocks[p/bs]), p % bs}] = [2]int{a.seq, p}
		}
	}
	return rows
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
