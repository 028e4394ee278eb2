package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// servingHello is hello(t) at a block size whose boundaries the serving
// schedule crosses cheaply.
func servingHello(t *testing.T) wire.Hello {
	h := hello(t)
	h.BlockSize, h.NumBlocks = 8, wiretest.ServingBlocks
	return h
}

func startServing(t *testing.T, mode string, h wire.Hello) *wire.Client {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	t.Setenv("OFFCARD_WIRE_TEST_ENGINE", mode)
	c, err := wire.Start(wire.Options{Command: []string{exe}}, h)
	must(t, err)
	return c
}

// TestServingEqualsInProcess: a version 3 engine (Serve over ref.Decoder,
// every line checked against the schema) lists the three serving calls,
// and the serving schedule through the client equals the oracle's in
// process, bit for bit.
func TestServingEqualsInProcess(t *testing.T) {
	h := servingHello(t)
	c := startServing(t, "ok", h)
	check(t, c.Caps().Version == 3 && slices.Equal(c.Caps().Serves, wire.ServingCalls(3)), "caps %+v: want version 3 serving every call", c.Caps())
	for _, call := range wire.ServingCalls(3) {
		check(t, qwen3.Serves(c, call), "qwen3.Serves(client, %s) false", call)
	}
	got, err := wiretest.ServingSchedule(c)
	must(t, err)
	calls := c.Calls()
	must(t, c.Close())

	w, err := qwen3.Synth(c.Config(), 1)
	must(t, err)
	d, err := ref.New(w, ref.Options{BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Threads: 1})
	must(t, err)
	defer d.Close()
	want, err := wiretest.ServingSchedule(d)
	must(t, err)
	check(t, calls == 17, "%d calls answered, the schedule makes 17", calls)
	check(t, len(got) == len(want) && len(want) > 0, "%d outputs, in-process %d", len(got), len(want))
	for i := range want {
		g, w := got[i], want[i]
		check(t, g.Seq == w.Seq && g.Pos == w.Pos && g.Token == w.Token, "output %d: seq %d pos %d token %d, in-process seq %d pos %d token %d", i, g.Seq, g.Pos, g.Token, w.Seq, w.Pos, w.Token)
		check(t, slices.Equal(g.Logits, w.Logits), "output %d (seq %d pos %d): logits differ", i, g.Seq, g.Pos)
	}
}

// TestServingNotOffered: a serving call the hello did not list is never
// sent: the client answers ErrNotServed, no call is made, qwen3.Serves
// says no, and the session goes on. An engine speaking version 1 or 2
// serves nothing; a hello of version 2 gets a version 2 session from a
// version 3 engine; Open's Caps.Serves narrows what the engine
// implements.
func TestServingNotOffered(t *testing.T) {
	v2 := servingHello(t)
	v2.Version = 2
	for _, tc := range []struct {
		name, mode string
		h          wire.Hello
		version    int
		serves     []string
	}{
		{"engine v1", "v1", servingHello(t), 1, nil},
		{"engine v2", "v2", servingHello(t), 2, nil},
		{"hello v2", "ok", v2, 2, nil},
		{"narrowed", "serves-verify", servingHello(t), 3, []string{wire.OpVerify}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startServing(t, tc.mode, tc.h)
			defer c.Close()
			check(t, c.Caps().Version == tc.version && slices.Equal(c.Caps().Serves, tc.serves), "caps %+v: want version %d serving %v", c.Caps(), tc.version, tc.serves)
			_, err := c.Prefill(qwen3.Prefill{Seq: 1, Tokens: []int32{5, 9, 11}, Blocks: []int32{3}})
			must(t, err)
			for _, call := range wire.ServingCalls(3) {
				served := slices.Contains(tc.serves, call)
				check(t, qwen3.Serves(c, call) == served, "qwen3.Serves(client, %s) = %v", call, !served)
				n := c.Calls()
				var err error
				switch call {
				case wire.OpPrefillFrom:
					_, err = c.PrefillFrom(qwen3.PrefillFrom{Seq: 1, Start: 3, Tokens: []int32{4}, Blocks: []int32{3}})
				case wire.OpVerify:
					_, err = c.Verify([]qwen3.VerifyStep{{Seq: 1, Tokens: []int32{7, 8}, Pos: 3, Blocks: []int32{3}}})
				case wire.OpCopyBlocks:
					err = c.CopyBlocks([]qwen3.BlockCopy{{Src: 3, Dst: 4}})
				}
				if served {
					check(t, err == nil && c.Calls() == n+1, "%s, served: %v", call, err)
					continue
				}
				check(t, errors.Is(err, wire.ErrNotServed), "%s, not served: %v, want ErrNotServed", call, err)
				check(t, c.Calls() == n, "%s, not served: sent anyway (%d calls, were %d)", call, c.Calls(), n)
			}
			_, err = c.Decode([]qwen3.Step{{Seq: 1, Token: 2, Pos: 3, Blocks: []int32{3}}})
			must(t, err, "the session goes on")
		})
	}
}

// TestServeRefusesUnserved: Serve itself answers a serving request its
// session does not serve with an error reply (a refusal) and goes on.
func TestServeRefusesUnserved(t *testing.T) {
	h := servingHello(t)
	for _, tc := range []struct {
		mode    string
		version int
		req     string
		want    string
	}{
		{"ok", 2, `{"op":"verify","batch":[{"seq":1,"tokens":[4],"pos":3,"blocks":[3]}]}`, "verify is protocol version 3; this session speaks 2"},
		{"serves-verify", 3, `{"op":"copy_blocks","copies":[{"src":3,"dst":4}]}`, "copy_blocks is not served by this engine (its hello's serves: verify)"},
		{"serves-verify", 3, `{"op":"prefill_from","seq":1,"start":3,"tokens":[4],"blocks":[3]}`, "prefill_from is not served"},
	} {
		hv := h
		hv.Version, hv.Op = tc.version, wire.OpHello
		hb, err := json.Marshal(hv)
		must(t, err)
		in := strings.Join([]string{string(hb),
			`{"op":"admit","seq":1,"prompt":[5,9,11],"blocks":[3]}`,
			tc.req,
			`{"op":"decode","batch":[{"seq":1,"token":2,"pos":3,"blocks":[3]}]}`,
			`{"op":"bye"}`}, "\n") + "\n"
		var out bytes.Buffer
		must(t, wire.Serve(strings.NewReader(in), &out, openFake(tc.mode)))
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		check(t, len(lines) == 5, "%d replies: %s", len(lines), out.String())
		var caps wire.Caps
		must(t, json.Unmarshal([]byte(lines[0]), &caps))
		check(t, caps.Version == tc.version, "hello reply %s: want version %d", lines[0], tc.version)
		r, err := wire.ParseReply([]byte(lines[2]))
		must(t, err)
		check(t, !r.OK && strings.Contains(r.Error, tc.want), "reply to %s: %s, want a refusal with %q", tc.req, lines[2], tc.want)
		r, err = wire.ParseReply([]byte(lines[3]))
		check(t, err == nil && r.OK && len(r.Outputs) == 1, "the decode after the refusal: %s", lines[3])
	}
}

// TestServingReplies: the client holds a serving call's reply to its
// request as it holds admit's and decode's: the outputs' count, order,
// sequences and positions (a verify answers every entry's k positions,
// entry after entry), the observations offered, the timeout, a crash,
// and a refusal's clipped text. Each reply is a canned line of an engine
// written in sh.
func TestServingReplies(t *testing.T) {
	const helloAll = `{"ok":true,"version":3,"engine":"sh","logits":"none","serves":["prefill_from","verify","copy_blocks"]}`
	v3 := func(c *wire.Client) error {
		_, err := c.Verify([]qwen3.VerifyStep{{Seq: 0, Tokens: []int32{1, 2, 3}, Pos: 4, Blocks: []int32{0}}})
		return err
	}
	v2x1 := func(c *wire.Client) error {
		outs, err := c.Verify([]qwen3.VerifyStep{
			{Seq: 0, Tokens: []int32{1, 2}, Pos: 4, Blocks: []int32{0}},
			{Seq: 1, Tokens: []int32{3}, Pos: 2, Blocks: []int32{1}},
		})
		if err == nil && (len(outs) != 2 || len(outs[0]) != 2 || len(outs[1]) != 1 || outs[0][1].Pos != 5 || outs[1][0].Seq != 1) {
			return errors.New("verify outputs not split per entry")
		}
		return err
	}
	pf := func(c *wire.Client) error {
		_, err := c.PrefillFrom(qwen3.PrefillFrom{Seq: 0, Start: 8, Tokens: []int32{1, 2, 3}, Blocks: []int32{0, 1}})
		return err
	}
	cp := func(c *wire.Client) error { return c.CopyBlocks([]qwen3.BlockCopy{{Src: 1, Dst: 2}, {Src: 3, Dst: 4}}) }
	out := func(seq, pos int) string { return `{"seq":` + itoa(seq) + `,"pos":` + itoa(pos) + `,"token":7}` }
	outs := func(o ...string) string { return `{"ok":true,"outputs":[` + strings.Join(o, ",") + `]}` }
	for _, tc := range []struct {
		name, hello, reply string
		call               func(*wire.Client) error
		kind, detail       string // kind "" and detail "": no error; kind "refused"
	}{
		{"verify k", helloAll, outs(out(0, 4), out(0, 5), out(0, 6)), v3, "", ""},
		{"verify k-1", helloAll, outs(out(0, 4), out(0, 5)), v3, wire.Malformed, "2 outputs for a verify of 3 positions"},
		{"verify k+1", helloAll, outs(out(0, 4), out(0, 5), out(0, 6), out(0, 7)), v3, wire.Malformed, "4 outputs for a verify of 3 positions"},
		{"verify last only", helloAll, outs(out(0, 6)), v3, wire.Malformed, "1 outputs for a verify of 3 positions"},
		{"verify reversed", helloAll, outs(out(0, 6), out(0, 5), out(0, 4)), v3, wire.Malformed, "output 0 is for seq 0 pos 6, the request's is seq 0 pos 4"},
		{"verify two entries", helloAll, outs(out(0, 4), out(0, 5), out(1, 2)), v2x1, "", ""},
		{"verify entries swapped", helloAll, outs(out(1, 2), out(0, 4), out(0, 5)), v2x1, wire.Malformed, "output 0 is for seq 1 pos 2"},
		{"verify token outside", helloAll, `{"ok":true,"outputs":[{"seq":0,"pos":4,"token":512},` + out(0, 5) + `,` + out(0, 6) + `]}`, v3, wire.Malformed, "token 512 outside the vocabulary"},
		{"prefill_from every position", helloAll, outs(out(0, 8), out(0, 9), out(0, 10)), pf, "", ""},
		{"prefill_from last only", helloAll, outs(out(0, 10)), pf, "", ""},
		{"prefill_from from 0", helloAll, outs(out(0, 0), out(0, 1), out(0, 2)), pf, wire.Malformed, "output 0 is for seq 0 pos 0, the request's is seq 0 pos 8"},
		{"prefill_from 2 of 3", helloAll, outs(out(0, 9), out(0, 10)), pf, wire.Malformed, "2 outputs for a chunk of 3"},
		{"copy_blocks", helloAll, `{"ok":true}`, cp, "", ""},
		{"copy_blocks outputs", helloAll, outs(out(0, 0)), cp, wire.Malformed, "1 outputs in the reply to copy_blocks"},
		{"copy_blocks regime missing", `{"ok":true,"version":3,"observes":["regime"],"serves":["copy_blocks"]}`, `{"ok":true}`, cp, wire.Malformed, "no obs.regime in the reply to copy_blocks"},
		{"copy_blocks regime", `{"ok":true,"version":3,"observes":["regime","host_writes"],"serves":["copy_blocks"]}`, `{"ok":true,"obs":{"regime":"eager","host_writes":0}}`, cp, "", ""},
		{"verify memory missing", `{"ok":true,"version":3,"observes":["memory"],"serves":["verify"],"obs":{"mem":{"persistent":3}}}`, outs(out(0, 4), out(0, 5), out(0, 6)), v3, wire.Malformed, "no obs.mem in the reply to verify"},
		{"prefill_from hangs", helloAll, "", pf, wire.Hung, "no answer within 300ms"},
		{"verify crashes", helloAll, "exit", v3, wire.Crashed, "exit status 5"},
		{"copy_blocks refused", helloAll, `{"ok":false,"error":"` + strings.Repeat("block 2 is shared ", 200) + `"}`, cp, "refused", "engine refused copy_blocks: block 2 is shared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := `read l; printf '%s\n' "$HELLO"; read l; printf '%s\n' "$REPLY"; read l; echo '{"ok":true}'` // the last: bye
			switch tc.reply {
			case "":
				script = `read l; printf '%s\n' "$HELLO"; read l; sleep 3600`
			case "exit":
				script = `read l; printf '%s\n' "$HELLO"; read l; exit 5`
			}
			t.Setenv("HELLO", tc.hello)
			t.Setenv("REPLY", tc.reply)
			c, err := wire.Start(wire.Options{Command: shEngine(t, script), Timeout: 300 * time.Millisecond}, hello(t))
			must(t, err)
			defer c.Close()
			t0 := time.Now()
			err = tc.call(c)
			check(t, time.Since(t0) < 3*time.Second, "took %v", time.Since(t0))
			var f *wire.FaultError
			var r *wire.RefusedError
			switch tc.kind {
			case "":
				must(t, err)
			case "refused":
				check(t, errors.As(err, &r) && strings.Contains(err.Error(), tc.detail) && len(err.Error()) < 1200, "%v: want a clipped refusal with %q", err, tc.detail)
			default:
				check(t, errors.As(err, &f) && f.Kind == tc.kind && strings.Contains(f.Detail, tc.detail), "%v: want %s with %q", err, tc.kind, tc.detail)
				check(t, tc.call(c) == c.Close(), "a dead client keeps its fault")
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestServingHello: the hello reply's serves is version 3's, names only
// the serving calls, each once; otherwise the hello fails.
func TestServingHello(t *testing.T) {
	for _, tc := range []struct{ reply, err string }{
		{`{"ok":true,"version":3,"serves":["verify","copy_blocks"]}`, ""},
		{`{"ok":true,"version":2,"serves":["verify"]}`, "serves is protocol version 3, the engine speaks 2"},
		{`{"ok":true,"version":3,"serves":["rollback"]}`, `serves "rollback": protocol version 3 has prefill_from, verify, copy_blocks`},
		{`{"ok":true,"version":3,"serves":["verify","verify"]}`, `serves "verify" twice`},
	} {
		t.Setenv("HELLO", tc.reply)
		c, err := wire.Start(wire.Options{Command: shEngine(t, `read l; printf '%s\n' "$HELLO"; read l; echo '{"ok":true}'`)}, hello(t))
		if tc.err == "" {
			must(t, err, tc.reply)
			check(t, slices.Equal(c.Caps().Serves, []string{wire.OpVerify, wire.OpCopyBlocks}), "caps %+v", c.Caps())
			must(t, c.Close())
			continue
		}
		var se *wire.StartError
		check(t, errors.As(err, &se) && strings.Contains(err.Error(), tc.err), "hello reply %s: %v, want a StartError with %q", tc.reply, err, tc.err)
	}
}

// plainEngine is a Decoder without the serving interfaces (embedding the
// interface hides ref.Decoder's methods).
type plainEngine struct{ qwen3.Decoder }

func (plainEngine) Close() error { return nil }

// TestServeListsOnlyImplemented: Open's Caps.Serves narrows, never widens:
// a call the engine does not implement is neither listed nor answered.
func TestServeListsOnlyImplemented(t *testing.T) {
	open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
		e, _, err := openFake("ok")(h)
		return plainEngine{e}, wire.Caps{Serves: wire.ServingCalls(3)}, err
	}
	h := servingHello(t)
	h.Op, h.Version = wire.OpHello, 3
	hb, err := json.Marshal(h)
	must(t, err)
	in := string(hb) + "\n" + `{"op":"copy_blocks","copies":[{"src":3,"dst":4}]}` + "\n"
	var out bytes.Buffer
	must(t, wire.Serve(strings.NewReader(in), &out, open))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	check(t, len(lines) == 2 && !strings.Contains(lines[0], "serves"), "hello reply %s: serves listed for an engine without them", lines[0])
	check(t, strings.Contains(lines[1], `"ok":false`), "copy_blocks to an engine without it: %s", lines[1])
}
