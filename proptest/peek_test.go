package proptest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// SimSUT.PeekKV tells its ranges from all +0 the first time (the engine's
// zeroed caches: nothing), then the rows a call wrote, and a whole cache
// when its tensor was replaced (the runner has nothing to count from).
func TestPeekKVTellsFromZero(t *testing.T) {
	sc := Scenario{Model: "tiny", ModelSeed: 1, Device: "sim", Arch: "wormhole", BlockSize: 32, NumBlocks: 8,
		Capacity: 1, Mode: qwen3.ModeEager, Strict: true, Width: kvpage.Dynamic()}
	// A recycled buffer of the caches' size, not zero (when the pool hands
	// this one out): the first read writes every element all the same.
	cfg, err := qwen3.Preset("tiny")
	require.NoError(t, err)
	dirty := make([]byte, 2*sc.NumBlocks*cfg.NumKeyValueHeads*sc.BlockSize*cfg.HeadDim)
	for i := range dirty {
		dirty[i] = 0x5A
	}
	peekBufs.Put(&dirty)
	sut, err := SimFactory(sc)
	require.NoError(t, err)
	defer sut.Close()
	s := sut.(*SimSUT)
	k, _, changed, err := s.PeekKV(0)
	require.NoError(t, err)
	require.Empty(t, changed, "zeroed caches, told from +0")
	_, err = s.Decoder().Prefill(qwen3.Prefill{Seq: 0, Tokens: []int32{5, 6, 7}, Blocks: []int32{2}})
	require.NoError(t, err)
	_, _, changed, err = s.PeekKV(0)
	require.NoError(t, err)
	// Positions 0..2 of block 2, both KV heads: [block][kvHead][row][headDim].
	kvh, hd, bs := s.Eng.Config().NumKeyValueHeads, s.Eng.Config().HeadDim, sc.BlockSize
	var want [][2]int
	for h := range kvh {
		lo := ((2*kvh + h) * bs) * hd
		want = append(want, [2]int{lo, lo + 3*hd})
	}
	require.Equal(t, want, mergeSpans(changed))
	s.peeks[0][1].t.ID++ // as if the V cache's tensor had been replaced
	_, _, changed, err = s.PeekKV(0)
	require.NoError(t, err)
	require.Equal(t, [][2]int{{0, len(k)}}, mergeSpans(changed))
}
