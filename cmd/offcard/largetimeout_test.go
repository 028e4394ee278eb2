package main

import (
	"strings"
	"testing"
	"time"
)

// A model larger than tiny gets a 5-minute call timeout with --engine
// unless --timeout says otherwise, and the replay command carries it.
func TestLargeModelTimeout(t *testing.T) {
	for _, tc := range []struct {
		m    campaignModel
		want bool
	}{{campaignModel{}, false}, {campaignModel{preset: "tiny"}, false}, {campaignModel{preset: "qwen3-0.6b"}, true}, {campaignModel{dir: "/x"}, true}} {
		if got := tc.m.large(); got != tc.want {
			t.Errorf("%+v: large %v, want %v", tc.m, got, tc.want)
		}
	}
	d, h := largeModelTimeout, time.Duration(0)
	ef := engineFlags{fs: newFlags(&env{}, "check", ""), timeout: &d, helloTimeout: &h, scaled: true}
	if a := ef.replayArgs(); !strings.Contains(a, "--timeout 5m0s") {
		t.Errorf("replay args %q lack the scaled timeout", a)
	}
}
