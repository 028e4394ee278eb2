package wire_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

func must(t *testing.T, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatal(append(what, err)...)
	}
}

func check(t *testing.T, ok bool, format string, a ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, a...)
	}
}

// The test binary doubles as an engine: with OFFCARD_WIRE_TEST_ENGINE set
// it serves ref.Decoder on stdin/stdout, misbehaving as the variable says
// (MODE:N acts at the N-th decode): crash, hang, garbage; or ok. Every
// line both ways is checked against the protocol's schema (wiretest.Serve).
func TestMain(m *testing.M) {
	if mode := os.Getenv("OFFCARD_WIRE_TEST_ENGINE"); mode != "" {
		if err := wiretest.Serve(os.Stdin, os.Stdout, openFake(mode)); err != nil {
			fmt.Fprintln(os.Stderr, "fake engine:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type fake struct {
	*ref.Decoder
	mode  string
	at, n int
}

func (f *fake) Close() error {
	f.Decoder.Close()
	if f.mode == "close-fails" {
		return errors.New("free of t9: not allocated")
	}
	return nil
}

func (f *fake) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	f.n++
	if f.n == f.at {
		switch f.mode {
		case "crash":
			fmt.Fprintln(os.Stderr, "fake engine: segfault in decode")
			os.Exit(3)
		case "hang":
			time.Sleep(time.Hour)
		case "garbage":
			fmt.Println("this is not JSON")
		}
	}
	return f.Decoder.Decode(b)
}

func openFake(spec string) wire.Open {
	mode, at, logits := spec, 0, wire.LogitsFull
	if i := strings.IndexByte(spec, ':'); i >= 0 {
		mode = spec[:i]
		fmt.Sscan(spec[i+1:], &at)
	}
	if mode == "topk" {
		logits = wire.LogitsTopK
	}
	return func(h wire.Hello) (wire.Engine, wire.Caps, error) {
		cfg, err := qwen3.Preset(h.Model.Preset)
		if err != nil {
			return nil, wire.Caps{}, err
		}
		w, err := qwen3.Synth(cfg, h.Model.Seed)
		if err != nil {
			return nil, wire.Caps{}, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Threads: 1})
		if err != nil {
			return nil, wire.Caps{}, err
		}
		c := wire.Caps{Engine: "fake", Logits: logits, TopK: 5}
		switch mode {
		case "v1":
			c.Version, c.Observes = 1, []string{wire.ObsRegime} // Serve leaves regime out of a version 1 session
		case "v1-only":
			if h.Version != 1 {
				return nil, wire.Caps{}, fmt.Errorf("protocol version %d: this engine speaks 1", h.Version)
			}
		case "regime-missing":
			c.Observes = []string{wire.ObsRegime} // offered, never sent (no Observer)
		case "v2":
			c.Version = 2
		case "serves-verify":
			c.Serves = []string{wire.OpVerify} // Serve narrows what ref.Decoder implements to this
		}
		return &fake{Decoder: d, mode: mode, at: at}, c, nil
	}
}

func hello(t *testing.T) wire.Hello {
	t.Helper()
	cfg, err := qwen3.Preset("tiny")
	must(t, err)
	w, err := qwen3.Synth(cfg, 1)
	must(t, err)
	dir := t.TempDir()
	must(t, w.Export(dir))
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	must(t, err)
	return wire.Hello{Model: wire.Model{Preset: "tiny", Seed: 1, Config: b, Weights: dir}, BlockSize: 32, NumBlocks: 8, Capacity: 2}
}

func start(t *testing.T, mode string, timeout time.Duration) (*wire.Client, error) {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	t.Setenv("OFFCARD_WIRE_TEST_ENGINE", mode)
	return wire.Start(wire.Options{Command: []string{exe}, Timeout: timeout}, hello(t))
}

// schedule drives a decoder: a 3-token prompt, then decode steps, and
// returns every output.
func schedule(d qwen3.Decoder, steps int) ([]qwen3.Output, error) {
	p := qwen3.Prefill{Seq: 1, Tokens: []int32{5, 9, 11}, Blocks: []int32{3}}
	all, err := d.Prefill(p)
	if err != nil {
		return all, err
	}
	tok := all[len(all)-1].Token
	for i := 0; i < steps; i++ {
		out, err := d.Decode([]qwen3.Step{{Seq: 1, Token: tok, Pos: 3 + i, Blocks: []int32{3}}})
		if err != nil {
			return all, err
		}
		all = append(all, out...)
		tok = out[0].Token
	}
	return all, d.Finish(1)
}

func TestClientEqualsInProcess(t *testing.T) {
	c, err := start(t, "ok", 0)
	must(t, err)
	check(t, c.Caps().Logits == wire.LogitsFull, "caps %+v", c.Caps())
	got, err := schedule(c, 6)
	must(t, err)
	must(t, c.Close())

	w, err := qwen3.Synth(c.Config(), 1)
	must(t, err)
	d, err := ref.New(w, ref.Options{BlockSize: 32, NumBlocks: 8, Threads: 1})
	must(t, err)
	defer d.Close()
	want, err := schedule(d, 6)
	must(t, err)
	check(t, len(want) == len(got), "%d outputs, in-process %d", len(got), len(want))
	for i := range want {
		check(t, want[i].Token == got[i].Token, "output %d: token %d, in-process %d", i, got[i].Token, want[i].Token)
		check(t, slices.Equal(want[i].Logits, got[i].Logits), "output %d: logits differ (the wire carries bf16 exactly)", i)
	}
}

func TestRefusedKeepsSession(t *testing.T) {
	c, err := start(t, "ok", 0)
	must(t, err)
	defer c.Close()
	_, err = c.Decode([]qwen3.Step{{Seq: 7, Token: 1, Pos: 0, Blocks: []int32{99}}})
	var ref *wire.RefusedError
	check(t, errors.As(err, &ref), "decode into block 99 of 8: %v, want a refusal", err)
	_, err = schedule(c, 1)
	must(t, err, "the session goes on after a refusal")
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		mode, kind, detail string
	}{
		{"crash:3", wire.Crashed, "exit status 3"},
		{"hang:2", wire.Hung, "no answer within"},
		{"garbage:1", wire.Malformed, "not JSON"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c, err := start(t, tc.mode, 500*time.Millisecond)
			must(t, err)
			t0 := time.Now()
			_, err = schedule(c, 5)
			var f *wire.FaultError
			check(t, errors.As(err, &f), "%v: want a fault", err)
			check(t, f.Kind == tc.kind && f.Op == wire.OpDecode, "fault %s at %s, want %s at decode", f.Kind, f.Op, tc.kind)
			check(t, strings.Contains(err.Error(), tc.detail), "%v: want %q in it", err, tc.detail)
			if tc.kind == wire.Crashed {
				check(t, strings.Contains(f.Stderr, "segfault in decode"), "stderr tail %q: the report carries the engine's stderr", f.Stderr)
			}
			check(t, time.Since(t0) < 5*time.Second, "took %v", time.Since(t0))
			_, err2 := c.Decode(nil)
			check(t, err2 != nil && err2.Error() == err.Error(), "after the fault: %v; a dead client keeps failing", err2)
			check(t, c.Close() != nil, "Close of a faulted session returns its fault")
		})
	}
}

func TestNoEngine(t *testing.T) {
	_, err := wire.Start(wire.Options{Command: []string{"/nonexistent/engine"}}, hello(t))
	check(t, err != nil, "started a nonexistent engine")
	_, err = wire.Start(wire.Options{Command: []string{"true"}}, hello(t))
	var f *wire.FaultError
	check(t, errors.As(err, &f) && f.Kind == wire.Crashed, "an engine that exits at once: %v, want crashed", err)
}

func TestTopK(t *testing.T) {
	row := []float32{1, 5, float32(math.NaN()), 5, -2, 7, float32(math.Inf(1))}
	ids, vals := dump.Top(row, 3)
	check(t, slices.Equal(ids, []int32{5, 1, 3}), "ids %v: largest first, lower id first among equals, NaN and Inf skipped", ids)
	check(t, slices.Equal(vals, []float32{7, 5, 5}), "values %v", vals)
	c, err := start(t, "topk", 0)
	must(t, err)
	defer c.Close()
	out, err := c.Prefill(qwen3.Prefill{Seq: 1, Tokens: []int32{5, 9, 11}, Blocks: []int32{3}})
	must(t, err)
	check(t, out[0].Logits == nil, "top_k engine: no rows")
	last := c.Last().Outputs[0]
	check(t, len(last.TopIDs) == 5 && len(last.Digest) == 16, "top ids %v, digest %q", last.TopIDs, last.Digest)
}

func TestLogitsRoundTrip(t *testing.T) {
	row := []float32{0, -0.5, 1.5, float32(math.Inf(-1)), 3.140625}
	got, err := wire.DecodeLogits(wire.EncodeLogits(row))
	must(t, err)
	check(t, slices.Equal(row, got) && dump.Digest(row) == dump.Digest(got), "round trip %v -> %v", row, got)
	row[2] = 1.5078125
	check(t, dump.Digest(row) != dump.Digest(got), "one bf16 step apart, same digest")
	nan, err := wire.DecodeLogits(wire.EncodeLogits([]float32{float32(math.NaN())}))
	must(t, err)
	check(t, math.IsNaN(float64(nan[0])), "NaN came back as %v", nan[0])
	_, err = wire.DecodeLogits("AAA")
	check(t, err != nil, "odd byte count accepted")
}

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{`{"ok":true}`, true},
		{`{"ok":false,"error":"no such sequence"}`, true},
		{`{"ok":false}`, false},
		{`{"ok":true,"surprise":1}`, false},
		{`{"ok":true} {"ok":true}`, false},
		{`[1,2]`, false},
		{``, false},
		{`{"ok":true,"outputs":[{"seq":0,"pos":0,"token":"x"}]}`, false},
	} {
		_, err := wire.ParseReply([]byte(tc.line))
		check(t, tc.ok == (err == nil), "%s: %v", tc.line, err)
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add([]byte(`{"ok":true,"outputs":[{"seq":0,"pos":3,"token":7,"logits":"AAA="}],"obs":{"seqs":[{"seq":0,"cur_pos":4,"page_row":[3,0]}]}}`))
	f.Add([]byte(`{"ok":true,"version":1,"logits":"top_k","top_k":5,"observes":["cur_pos"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := wire.ParseReply(b)
		if err != nil {
			return
		}
		if !r.OK && r.Error == "" {
			t.Fatalf("accepted a reply with neither ok nor error: %q", b)
		}
		for _, o := range r.Outputs {
			_, _ = wire.DecodeLogits(o.Logits)
		}
	})
}

// TestVersions: offcard's hello names version 2; an engine that speaks 1
// answers 1 and is held to version 1 (no version 2 observation); one that
// refuses the newer hello is a refusal (proptest's factory then asks in
// version 1); a hello in version 1 gets a version 1 session from Serve.
func TestVersions(t *testing.T) {
	c, err := start(t, "ok", 0)
	must(t, err)
	check(t, c.Hello().Version == wire.Version && c.Caps().Version == wire.Version, "hello %d, caps %d", c.Hello().Version, c.Caps().Version)
	must(t, c.Close())

	c, err = start(t, "v1", 0)
	must(t, err)
	check(t, c.Caps().Version == 1 && len(c.Caps().Observes) == 0, "a version 1 engine: caps %+v", c.Caps())
	_, err = schedule(c, 2)
	must(t, err)
	must(t, c.Close())

	_, err = start(t, "v1-only", 0)
	var refused *wire.RefusedError
	check(t, errors.As(err, &refused) && refused.Op == wire.OpHello, "a version 1 engine refusing hello 2: %v", err)
	exe, err := os.Executable()
	must(t, err)
	h := hello(t)
	h.Version = 1
	c, err = wire.Start(wire.Options{Command: []string{exe}}, h)
	must(t, err, "hello in version 1")
	check(t, c.Caps().Version == 1, "caps %+v", c.Caps())
	must(t, c.Close())
}

// TestObservationsRequired: an observation offered is required on every
// reply it belongs to; missing, the reply is malformed.
func TestObservationsRequired(t *testing.T) {
	c, err := start(t, "regime-missing", 0)
	must(t, err)
	_, err = c.Prefill(qwen3.Prefill{Seq: 1, Tokens: []int32{5, 9, 11}, Blocks: []int32{3}})
	var f *wire.FaultError
	check(t, errors.As(err, &f) && f.Kind == wire.Malformed && strings.Contains(f.Detail, "no obs.regime in the reply to admit"), "admit without the offered regime: %v", err)
	c.Close()
}

// TestByeReportsClose: the engine's teardown failing is the bye's error
// reply, which the client keeps.
func TestByeReportsClose(t *testing.T) {
	c, err := start(t, "close-fails", 0)
	must(t, err)
	_, err = schedule(c, 1)
	must(t, err)
	must(t, c.Close(), "a refused bye is no fault")
	r := c.ByeReply()
	check(t, r != nil && !r.OK && strings.Contains(r.Error, "close: free of t9"), "bye reply %+v", r)
}
