package wiretest_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/offcard/offcard/wire/wiretest"
)

// TestRelay: Relay forwards every line unchanged and reports each request
// and reply that breaks the schema, in both directions; a well-formed
// session reports nothing.
func TestRelay(t *testing.T) {
	hello := `{"op":"hello","version":1,"model":{"preset":"tiny","seed":"1"},"block_size":32,"num_blocks":8,"capacity":2}`
	admit := `{"op":"admit","seq":0,"prompt":[1,2],"blocks":[0]}`
	out := `{"ok":true,"outputs":[{"seq":0,"pos":1,"token":7}]}`
	for _, tc := range []struct {
		name     string
		requests []string
		replies  []string
		bad      string // the report naming the broken line ("" none)
	}{
		{"clean", []string{hello, admit, `{"op":"bye"}`}, []string{`{"ok":true,"version":1}`, out, `{"ok":true}`}, ""},
		{"refusal", []string{hello, admit}, []string{`{"ok":true,"version":1}`, `{"ok":false,"error":"no"}`}, ""},
		{"reply-token-string", []string{hello, admit}, []string{`{"ok":true,"version":1}`, strings.Replace(out, `"token":7`, `"token":"7"`, 1)}, "reply"},
		{"reply-for-another-op", []string{hello, `{"op":"finish","seq":0}`}, []string{`{"ok":true,"version":1}`, out}, "reply"},
		{"reply-not-json", []string{hello}, []string{`Traceback (most recent call last):`}, "reply"},
		{"reply-empty-error", []string{hello, admit}, []string{`{"ok":true,"version":1}`, `{"ok":false,"error":""}`}, "reply"},
		{"request-missing-blocks", []string{hello, `{"op":"admit","seq":0,"prompt":[1,2]}`}, []string{`{"ok":true,"version":1}`, out}, "request"},
		{"request-unknown-op", []string{hello, `{"op":"rewind"}`}, []string{`{"ok":true,"version":1}`, `{"ok":true}`}, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engIn := &closeBuffer{}
			var replies bytes.Buffer
			var reports []string
			checked := func(op string, req, rep error) {
				if req != nil {
					reports = append(reports, "request "+op+": "+req.Error())
				}
				if rep != nil {
					reports = append(reports, "reply "+op+": "+rep.Error())
				}
			}
			err := wiretest.Relay(strings.NewReader(lines(tc.requests)), &replies, engIn, strings.NewReader(lines(tc.replies)), checked)
			if err != nil {
				t.Fatal(err)
			}
			if engIn.String() != lines(tc.requests) || replies.String() != lines(tc.replies) || !engIn.closed {
				t.Fatalf("forwarded %q and %q (closed %v): want the lines unchanged", engIn.String(), replies.String(), engIn.closed)
			}
			switch {
			case tc.bad == "" && len(reports) != 0:
				t.Fatalf("reports %q on a well-formed session", reports)
			case tc.bad != "" && (len(reports) != 1 || !strings.HasPrefix(reports[0], tc.bad+" ")):
				t.Fatalf("reports %q: want one naming the %s", reports, tc.bad)
			}
		})
	}
}

// An engine that closes its stdout ends the relay: the request is
// reported without a reply, and nothing more is read.
func TestRelayEngineGone(t *testing.T) {
	var n int
	engIn := &closeBuffer{}
	err := wiretest.Relay(strings.NewReader(`{"op":"reset"}`+"\n"+`{"op":"bye"}`+"\n"), io.Discard, engIn, strings.NewReader(""), func(op string, req, rep error) {
		n++
		if op != "reset" || req != nil || rep != nil {
			t.Errorf("reported %s %v %v", op, req, rep)
		}
	})
	if err != nil || n != 1 || !engIn.closed || engIn.String() != `{"op":"reset"}`+"\n" {
		t.Fatalf("err %v, %d reports, forwarded %q (closed %v)", err, n, engIn.String(), engIn.closed)
	}
}

func lines(ls []string) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintln(&b, l)
	}
	return b.String()
}

type closeBuffer struct {
	bytes.Buffer
	closed bool
}

func (c *closeBuffer) Close() error { c.closed = true; return nil }
