package proptest_test

import (
	"path/filepath"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/tthw"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// cardLib is the loopback, with edits (a mutant) or as built.
func cardLib(t *testing.T, edits ...tthwtest.Edit) string {
	t.Helper()
	if len(edits) == 0 {
		return tthwtest.Loopback(t)
	}
	lib, err := tthwtest.Build(filepath.Join(t.TempDir(), "lb.so"), edits...)
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func cardCampaign(lib string, cases int) []proptest.CaseResult {
	return proptest.Campaign(proptest.Options{Seed: 7, Cases: cases, Factory: proptest.CardFactory(lib, proptest.Tolerance{}),
		Base: proptest.Base{Device: proptest.CardDevice}})
}

// The engine on the loopback passes the property suite in its tolerant
// mode: tokens adjudicated against ref, cur_pos, page table and KV rows
// read back after every call.
func TestCardCampaignPasses(t *testing.T) {
	for _, r := range cardCampaign(cardLib(t), 3) {
		if !r.Passed {
			t.Errorf("case %d failed:\n%s", r.Index, r.Report())
		}
	}
}

// A device bug the card shows only through read-back goes red: the
// loopback's paged_update_cache writing each KV row one row down (pos+1)
// is seen in the cache diff (kv-write) — the same campaign passes on the
// unmutated loopback (TestCardCampaignPasses).
func TestCardCampaignRedOnDeviceBug(t *testing.T) {
	lib := cardLib(t, tthwtest.Edit{File: "ops.c", Old: "        row = raw % LB_TILE;", New: "        row = (raw + 1) % LB_TILE;"})
	// Three cases, as TestCardCampaignPasses: a case whose prompts run as
	// programs and that decodes nothing never calls paged_update_cache.
	var red *proptest.CaseResult
	for _, r := range cardCampaign(lib, 3) {
		if !r.Passed {
			red = &r
			break
		}
	}
	if red == nil {
		t.Fatal("the campaign passed on a loopback whose page-table walk is off by one")
	}
	if p := red.Failure.Property; p != "kv-write" && p != "cur-pos" {
		t.Errorf("fired %s, want kv-write or cur-pos (a row one position down is what an off-by-one cur_pos writes):\n%s", p, red.Report())
	}
	t.Logf("%s", red.Report())
}

// Faults injected into the loopback (the Nth allocation, op or capture
// fails) come back as errors through the engine, never a crash, and the
// engine's Close leaves nothing live on the device.
func TestCardFaultInjection(t *testing.T) {
	lib := tthwtest.Loopback(t)
	sc := proptest.Scenario{Model: "tiny", ModelSeed: 1, Device: proptest.CardDevice, Arch: "wormhole",
		BlockSize: 32, NumBlocks: 8, Width: kvpage.Dynamic(), Capacity: 2, Mode: qwen3.ModeCaptured}
	w, err := proptest.ModelWeights(sc)
	if err != nil {
		t.Fatal(err)
	}
	injected := 0
	for _, o := range []tthw.Options{{FailAlloc: 1}, {FailAlloc: 7}, {FailAlloc: 40}, {FailOp: 1}, {FailOp: 30}, {FailOp: 200}, {FailCapture: 1}} {
		dev, err := tthw.Open(lib, o)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := qwen3.NewEngine(dev, w, sc.EngineOptions())
		if err == nil {
			blocks := []int32{0, 1}
			_, err = eng.Prefill(qwen3.Prefill{Seq: 0, Tokens: []int32{1, 2, 3}, Blocks: blocks})
			for p := 3; err == nil && p < 12; p++ {
				_, err = eng.Decode([]qwen3.Step{{Seq: 0, Token: 5, Pos: p, Blocks: blocks}})
			}
			if cerr := eng.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil {
			if !tthw.Injected(err) {
				t.Errorf("%+v: %v (not the injected fault)", o, err)
			}
			injected++
		}
		lk, cerr := dev.Close()
		if cerr != nil || lk != (tthw.Leaks{}) {
			t.Errorf("%+v: close: %v, leaks %+v", o, cerr, lk)
		}
	}
	if injected == 0 {
		t.Error("no injected fault reached the engine")
	}
}
