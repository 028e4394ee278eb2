package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/qwen3"
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
