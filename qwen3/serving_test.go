package qwen3_test

import (
	"testing"

	"github.com/offcard/offcard/qwen3"
)

// plain is a Decoder with no serving interface.
type plain struct{ qwen3.Decoder }

// verifier implements Verifier only.
type verifier struct{ plain }

func (verifier) Verify([]qwen3.VerifyStep) ([][]qwen3.Output, error) { return nil, nil }

// offering implements every serving interface but offers only what its
// list names (a protocol client after a hello).
type offering struct {
	plain
	offers map[string]bool
}

func (offering) PrefillFrom(qwen3.PrefillFrom) ([]qwen3.Output, error) { return nil, nil }
func (offering) Verify([]qwen3.VerifyStep) ([][]qwen3.Output, error)   { return nil, nil }
func (offering) CopyBlocks([]qwen3.BlockCopy) error                    { return nil }
func (o offering) OffersServing(call string) bool                      { return o.offers[call] }

func TestServes(t *testing.T) {
	calls := []string{qwen3.ServePrefillFrom, qwen3.ServeVerify, qwen3.ServeCopyBlocks, "fork"}
	cases := []struct {
		name string
		d    qwen3.Decoder
		want map[string]bool
	}{
		{"none", plain{}, map[string]bool{}},
		{"verify only", verifier{}, map[string]bool{qwen3.ServeVerify: true}},
		{"offers copy", offering{offers: map[string]bool{qwen3.ServeCopyBlocks: true}}, map[string]bool{qwen3.ServeCopyBlocks: true}},
		{"offers all", offering{offers: map[string]bool{qwen3.ServePrefillFrom: true, qwen3.ServeVerify: true, qwen3.ServeCopyBlocks: true, "fork": true}},
			map[string]bool{qwen3.ServePrefillFrom: true, qwen3.ServeVerify: true, qwen3.ServeCopyBlocks: true}},
	}
	for _, c := range cases {
		for _, call := range calls {
			if got := qwen3.Serves(c.d, call); got != c.want[call] {
				t.Errorf("%s: Serves(%q) = %v, want %v", c.name, call, got, c.want[call])
			}
		}
	}
}
