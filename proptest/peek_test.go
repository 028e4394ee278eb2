package proptest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/offcard/offcard/bf16"
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

// strayKVSUT reports, from its second KV peek on, a value in the last
// block of layer 1's V cache: a device write no position maps to, in a
// block far past any ref wrote (ref holds memory only up to its highest
// written block).
type strayKVSUT struct {
	*SimSUT
	peeks *int
}

func (s strayKVSUT) PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error) {
	k, v, changed, err = s.SimSUT.PeekKV(layer)
	if err == nil && layer == 1 {
		if *s.peeks++; *s.peeks >= 2 {
			v[len(v)-1] = 0x3F80 // 1.0
			changed = append(changed, [2]int{len(v) - 1, len(v)})
		}
	}
	return k, v, changed, err
}

func TestStrayWritePastRefsBlocks(t *testing.T) {
	s, err := ParseScript(strings.NewReader(`model tiny seed=1
device sim arch=wormhole strict
engine block=32 blocks=64 width=fixed:2 capacity=2 mode=eager
admit seq=0 prompt=5
decode steps=2
`))
	require.NoError(t, err)
	f, _, err := RunScript(s, SimFactory)
	require.NoError(t, err)
	require.Nil(t, f, "real engine")
	f, _, err = RunScript(s, func(sc Scenario) (SUT, error) {
		sut, err := SimFactory(sc)
		if err != nil {
			return nil, err
		}
		return strayKVSUT{sut.(*SimSUT), new(int)}, nil
	})
	require.NoError(t, err)
	require.NotNil(t, f, "a stray value in block 63 went unseen")
	require.Equal(t, PropKVWrite, f.Property)
	require.Contains(t, f.Detail, "stray write")
	require.Contains(t, f.Detail, "layer 1 V cache block 63 row 31 (head 1 dim 31): device bits 0x3f80, ref 0x0000")
}
