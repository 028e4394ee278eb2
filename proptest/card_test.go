package proptest_test

import (
	"path/filepath"
	"testing"

	"github.com/offcard/offcard/proptest"
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
	rs := cardCampaign(lib, 1)
	if rs[0].Passed {
		t.Fatal("the campaign passed on a loopback whose page-table walk is off by one")
	}
	if p := rs[0].Failure.Property; p != "kv-write" && p != "cur-pos" {
		t.Errorf("fired %s, want kv-write or cur-pos (a row one position down is what an off-by-one cur_pos writes):\n%s", p, rs[0].Report())
	}
	t.Logf("%s", rs[0].Report())
}
