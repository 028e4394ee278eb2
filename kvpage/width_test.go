package kvpage

import (
	"flag"
	"strings"
	"testing"
)

func TestParseWidthPolicy(t *testing.T) {
	good := []struct {
		in   string
		want WidthPolicy
	}{
		{"dynamic", Dynamic()},
		{"fixed:1", Fixed(1)},
		{"fixed:256", Fixed(256)},
	}
	for _, c := range good {
		got, err := ParseWidthPolicy(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseWidthPolicy(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("round trip %q -> %q", c.in, got.String())
		}
	}
	bad := []struct{ in, err string }{
		{"", `want "dynamic" or "fixed:N"`},
		{"Dynamic", `want "dynamic" or "fixed:N"`},
		{"fixed", `want "dynamic" or "fixed:N"`},
		{"fixed 256", `want "dynamic" or "fixed:N"`},
		{"static:4", `want "dynamic" or "fixed:N"`},
		{" dynamic", `want "dynamic" or "fixed:N"`},
		{"fixed:", "positive decimal integer"},
		{"fixed:0", "positive decimal integer"},
		{"fixed:-3", "positive decimal integer"},
		{"fixed:+3", "positive decimal integer"},
		{"fixed:007", "positive decimal integer"},
		{"fixed:2.5", "positive decimal integer"},
		{"fixed:0x10", "positive decimal integer"},
		{"fixed:99999999999999999999999", "positive decimal integer"},
	}
	for _, c := range bad {
		_, err := ParseWidthPolicy(c.in)
		if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "kvpage:") {
			t.Errorf("ParseWidthPolicy(%q): err %v, want it to contain %q", c.in, err, c.err)
		}
	}
}

// Pin the default: the zero WidthPolicy is Dynamic.
func TestWidthPolicyZeroIsDynamic(t *testing.T) {
	var p WidthPolicy
	if !p.IsDynamic() || p != Dynamic() || p.String() != "dynamic" {
		t.Fatalf("zero WidthPolicy = %v, want dynamic", p)
	}
	if n, ok := Fixed(8).FixedWidth(); !ok || n != 8 {
		t.Fatalf("Fixed(8).FixedWidth() = %d, %v", n, ok)
	}
	if _, ok := Dynamic().FixedWidth(); ok {
		t.Fatal("Dynamic().FixedWidth() reports fixed")
	}
	mustPanic(t, "Fixed(0)", "width must be positive", func() { Fixed(0) })
}

func TestWidthPolicyFlagAndText(t *testing.T) {
	var p WidthPolicy
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Var(&p, "page-table", "width policy")
	if err := fs.Parse([]string{"-page-table=fixed:64"}); err != nil {
		t.Fatal(err)
	}
	if p != Fixed(64) {
		t.Fatalf("flag gave %v", p)
	}
	b, _ := p.MarshalText()
	var q WidthPolicy
	if err := q.UnmarshalText(b); err != nil || q != p {
		t.Fatalf("text round trip: %v, %v", q, err)
	}
	if err := q.Set("fixed:x"); err == nil || q != p {
		t.Fatalf("bad Set: err %v, policy changed to %v", err, q)
	}
}

func TestWidth(t *testing.T) {
	cases := []struct {
		p       WidthPolicy
		longest int
		want    int
		err     string
	}{
		{Dynamic(), 0, 1, ""}, // minimum 1
		{Dynamic(), 1, 1, ""},
		{Dynamic(), 2, 2, ""},
		{Dynamic(), 300, 300, ""},
		{Fixed(256), 0, 256, ""},
		{Fixed(256), 1, 256, ""},
		{Fixed(256), 256, 256, ""},
		{Fixed(256), 257, 0, "needs 257 blocks but the page table is fixed at 256 columns"},
		{Fixed(1), 2, 0, "needs 2 blocks"}, // the seed's [C,1] table at the first boundary
		{Dynamic(), -1, 0, "negative block count"},
		{Fixed(4), -1, 0, "negative block count"},
	}
	for _, c := range cases {
		got, err := Width(c.p, c.longest)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Width(%v, %d): err %v, want %q", c.p, c.longest, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Width(%v, %d) = %d, %v; want %d", c.p, c.longest, got, err, c.want)
		}
	}
}
