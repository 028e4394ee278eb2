package main

import "testing"

// A large model's campaign lowers the collector's GOGC, unless the
// environment set one; tiny's keeps Go's default.
func TestCampaignGCPercent(t *testing.T) {
	for _, tc := range []struct {
		m    campaignModel
		env  string
		want int
	}{
		{campaignModel{}, "", 0},
		{campaignModel{preset: "tiny"}, "", 0},
		{campaignModel{preset: "qwen3-0.6b"}, "", largeModelGCPercent},
		{campaignModel{dir: "/ckpt"}, "", largeModelGCPercent},
		{campaignModel{preset: "qwen3-0.6b"}, "100", 0},
		{campaignModel{preset: "qwen3-0.6b"}, "off", 0},
	} {
		if got := tc.m.gcPercent(tc.env); got != tc.want {
			t.Errorf("%+v with GOGC=%q: %d, want %d", tc.m, tc.env, got, tc.want)
		}
	}
}
