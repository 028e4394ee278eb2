package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// readmeTranscript is the README's transcript: the requests (">" lines)
// and replies ("<" lines) of its code block.
func readmeTranscript(t *testing.T) (reqs, reps []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "A transcript with offcard's engine")
	if i < 0 {
		t.Fatal("the README has no transcript")
	}
	block := strings.SplitN(strings.SplitN(s[i:], "```\n", 2)[1], "```", 2)[0]
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		switch {
		case strings.HasPrefix(l, "> "):
			reqs = append(reqs, l[2:])
		case strings.HasPrefix(l, "< "):
			reps = append(reps, l[2:])
		}
	}
	return reqs, reps
}

// TestReadmeTranscript: offcard-engine answers the README's transcript as
// it says: the hello and bye replies verbatim, each call's reply with the
// values it shows (the cut parts, "…", left out), and every line valid
// under the protocol's schema.
func TestReadmeTranscript(t *testing.T) {
	reqs, reps := readmeTranscript(t)
	if len(reqs) != 5 || len(reps) != 5 {
		t.Fatalf("%d requests and %d replies in the README's transcript", len(reqs), len(reps))
	}
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := qwen3.Synth(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-seed1")
	if err := w.Export(dir); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, conf); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for i, r := range reqs {
		if i == 0 {
			r = strings.Replace(r, `"config":{…}`, `"config":`+compact.String(), 1)
			r = strings.Replace(r, `"/tmp/offcard-engine-weights-…/tiny-seed1"`, `"`+dir+`"`, 1)
		}
		in.WriteString(r + "\n")
	}
	var out, errs bytes.Buffer
	if code := run(nil, &in, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != len(reps) {
		t.Fatalf("%d replies, the README shows %d:\n%s", len(got), len(reps), out.String())
	}
	for i, g := range got {
		var req struct{ Op string }
		if err := json.Unmarshal([]byte(reqs[i]), &req); err != nil && i > 0 {
			t.Fatal(err)
		}
		if i == 0 {
			req.Op = "hello"
		}
		if err := wiretest.ValidateReply(req.Op, []byte(g)); err != nil {
			t.Errorf("reply %d: %v", i, err)
		}
		want := reps[i]
		if !strings.Contains(want, "…") {
			if g != want {
				t.Errorf("reply to %s:\n got %s\nwant %s (the README)", req.Op, g, want)
			}
			continue
		}
		// Every uncut piece the README shows is in the reply.
		for _, piece := range strings.Split(want, "…") {
			for _, part := range strings.Split(piece, "},{") {
				part = strings.Trim(part, ",{}[]")
				if len(part) > 3 && !strings.Contains(g, part) {
					t.Errorf("reply to %s lacks %q (the README shows it):\n%s", req.Op, part, g)
				}
			}
		}
	}
}

// TestServesWhatItImplements: in version 3 the hello reply lists exactly
// the serving calls the engine OpenSimEngine builds implements (none
// listed before version 3), whatever OFFCARD_ENGINE_OFFER restricts.
func TestServesWhatItImplements(t *testing.T) {
	h := wire.Hello{Op: wire.OpHello, Model: wire.Model{Preset: "tiny", Seed: 1}, BlockSize: 32, NumBlocks: 8, Capacity: 2}
	e, _, err := proptest.OpenSimEngine(h)
	if err != nil {
		t.Fatal(err)
	}
	var implements []string
	for _, call := range wire.ServingCalls(3) {
		if qwen3.Serves(e, call) {
			implements = append(implements, call)
		}
	}
	e.Close()
	for _, tc := range []struct {
		version int
		offer   string
		want    []string
	}{
		{3, "", implements},
		{3, "none", implements},
		{2, "", nil},
		{1, "", nil},
	} {
		t.Setenv(offerEnv, tc.offer)
		h.Version = tc.version
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var out, errs bytes.Buffer
		if code := run(nil, strings.NewReader(string(b)+"\n"+`{"op":"bye"}`+"\n"), &out, &errs); code != 0 {
			t.Fatalf("exit %d: %s", code, errs.String())
		}
		line := strings.SplitN(out.String(), "\n", 2)[0]
		if err := wiretest.ValidateReply(wire.OpHello, []byte(line)); err != nil {
			t.Error(err)
		}
		var caps wire.Caps
		if err := json.Unmarshal([]byte(line), &caps); err != nil {
			t.Fatal(err)
		}
		if caps.Version != tc.version || !slices.Equal(caps.Serves, tc.want) {
			t.Errorf("hello version %d, offer %q: version %d serves %v, want %v", tc.version, tc.offer, caps.Version, caps.Serves, tc.want)
		}
	}
}
