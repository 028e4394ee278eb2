package proptest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// A sequence a decode starts (no prefill) is on the trajectory memo from
// its position 0, as a prefilled one is: a second oracle fed the same
// tokens answers every position from the memo, with ref's outputs. So is a
// live sequence fed position 0 again.
func TestOracleMemoFollowsDecodeStarts(t *testing.T) {
	cfg, err := qwen3.Preset("tiny")
	require.NoError(t, err)
	w, err := qwen3.Synth(cfg, 91) // weights of its own: an empty memo
	require.NoError(t, err)
	opt := ref.Options{BlockSize: 32, NumBlocks: 4, Threads: 1}
	// Positions 0..5 of sequence 3, then position 0 again and 1.
	var steps []qwen3.Step
	for _, p := range []int{0, 1, 2, 3, 4, 5, 0, 1} {
		steps = append(steps, qwen3.Step{Seq: 3, Token: int32(7 + 5*p), Pos: p, Blocks: []int32{2}})
	}
	plain, err := ref.New(w, opt)
	require.NoError(t, err)
	defer plain.Close()
	var want []qwen3.Output
	for _, st := range steps {
		o, err := plain.Decode([]qwen3.Step{st})
		require.NoError(t, err)
		want = append(want, o...)
	}
	run := func() (hits, misses int64) {
		o, err := newOracle(w, opt)
		require.NoError(t, err)
		defer o.Close()
		h0, m0 := memoStats()
		for i, st := range steps {
			got, err := o.Decode([]qwen3.Step{st})
			require.NoError(t, err)
			require.Equal(t, want[i], got[0], "step %d (position %d)", i, st.Pos)
		}
		h, m := memoStats()
		return h - h0, m - m0
	}
	_, misses := run()
	require.Equal(t, int64(6), misses, "first run: positions 0..5 computed, then 0 and 1 found")
	hits, misses := run()
	require.Equal(t, int64(len(steps)), hits, "second run: every position from the memo")
	require.Zero(t, misses)
}

// ModelWeights hands every caller of a (preset, seed) the same weights,
// also callers racing for it (the oracle's memo is keyed by them), and
// other seeds other weights; an unknown preset is an error.
func TestModelWeightsOncePerModel(t *testing.T) {
	sc := Scenario{Model: "tiny", ModelSeed: 93}
	got := make([]*qwen3.Weights, 8)
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = ModelWeights(sc)
		}()
	}
	wg.Wait()
	for i, w := range got {
		require.NoError(t, errs[i])
		require.Same(t, got[0], w)
	}
	other, err := ModelWeights(Scenario{Model: "tiny", ModelSeed: 94})
	require.NoError(t, err)
	require.NotSame(t, got[0], other)
	_, err = ModelWeights(Scenario{Model: "no-such-model", ModelSeed: 1})
	require.Error(t, err)
}
