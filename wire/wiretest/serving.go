package wiretest

import (
	"fmt"

	"github.com/offcard/offcard/qwen3"
)

// ServingBlocks is the number of KV blocks ServingSchedule uses (ids
// 0..ServingBlocks-1): a hello for it names at least this many.
const ServingBlocks = 10

// ServingSchedule drives d through a fixed schedule of every serving call
// of protocol version 3 at block boundaries, on d.BlockSize() B (at least
// 8), and returns every output in call order: run it on an engine and on
// the oracle (ref.Decoder) and compare. The tokens are fixed (no output
// is fed back), so one wrong output does not change what follows.
//
//   - seq 1: admit of 2B-2 tokens, blocks [0 1];
//   - seq 2: a prefix hit at exactly a block boundary: prefill_from start
//     B, 5 tokens, through [0 2] (block 0 shared with seq 1);
//   - seq 3: a chunked prefill: start 0 with B-3 tokens, then start B-3
//     with 8 (across the boundary), blocks [3 4];
//   - verify of seq 1 (k 4 at 2B-2, across into a grown table [0 1 5])
//     and seq 3 (k 3), one batch;
//   - rollback: seq 1 accepted 2 of its 4, verified again from 2B (k 2,
//     over the rejected rows), then decoded at 2B+2; a verify with k 1;
//   - a fork with copy-on-write: seq 4 shares seq 3's full block 3, its
//     partial block 4 copied to 6 (copy_blocks), both decoded on;
//   - preemption by recompute: seq 2 finished, re-admitted by
//     prefill_from start 0 with its tokens through other blocks [7 8],
//     and verified on beside seq 4 (whose table grows to [3 6 9]);
//   - everything finished.
func ServingSchedule(d qwen3.ServingDecoder) ([]qwen3.Output, error) {
	B := d.BlockSize()
	if B < 8 {
		return nil, fmt.Errorf("serving schedule: block size %d, want at least 8", B)
	}
	vocab := int32(d.Config().VocabSize)
	toks := func(seed, n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32((seed*131+i*37+7)%int(vocab-1)) + 1
		}
		return t
	}
	var all []qwen3.Output
	keep := func(o []qwen3.Output, err error) error {
		all = append(all, o...)
		return err
	}
	verify := func(b []qwen3.VerifyStep) error {
		outs, err := d.Verify(b)
		for _, o := range outs {
			all = append(all, o...)
		}
		return err
	}
	p1 := toks(1, 2*B-2)
	p2 := append(p1[:B:B], toks(2, 5)...) // seq 2's tokens: seq 1's first block, then its own
	c3a, c3b := toks(3, B-3), toks(4, 8)
	steps := []func() error{
		func() error { return keep(d.Prefill(qwen3.Prefill{Seq: 1, Tokens: p1, Blocks: []int32{0, 1}})) },
		func() error {
			return keep(d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: B, Tokens: p2[B:], Blocks: []int32{0, 2}}))
		},
		func() error {
			return keep(d.PrefillFrom(qwen3.PrefillFrom{Seq: 3, Start: 0, Tokens: c3a, Blocks: []int32{3, 4}}))
		},
		func() error {
			return keep(d.PrefillFrom(qwen3.PrefillFrom{Seq: 3, Start: B - 3, Tokens: c3b, Blocks: []int32{3, 4}}))
		},
		func() error {
			return verify([]qwen3.VerifyStep{
				{Seq: 1, Tokens: toks(5, 4), Pos: 2*B - 2, Blocks: []int32{0, 1, 5}},
				{Seq: 3, Tokens: toks(6, 3), Pos: B + 5, Blocks: []int32{3, 4}},
			})
		},
		func() error { // seq 1 accepted 2: length 2B
			return verify([]qwen3.VerifyStep{{Seq: 1, Tokens: toks(7, 2), Pos: 2 * B, Blocks: []int32{0, 1, 5}}})
		},
		func() error {
			return keep(d.Decode([]qwen3.Step{{Seq: 1, Token: 11, Pos: 2*B + 2, Blocks: []int32{0, 1, 5}}}))
		},
		func() error { // seq 3 accepted 1 of 3: length B+6; k 1
			return verify([]qwen3.VerifyStep{{Seq: 3, Tokens: toks(8, 1), Pos: B + 6, Blocks: []int32{3, 4}}})
		},
		func() error { return d.CopyBlocks([]qwen3.BlockCopy{{Src: 4, Dst: 6}}) }, // fork: seq 4 = seq 3's B+7 positions
		func() error {
			return keep(d.Decode([]qwen3.Step{
				{Seq: 3, Token: 21, Pos: B + 7, Blocks: []int32{3, 4}},
				{Seq: 4, Token: 22, Pos: B + 7, Blocks: []int32{3, 6}},
			}))
		},
		func() error { return d.Finish(2) },
		func() error { // preempted seq 2 recomputed through other blocks
			return keep(d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: 0, Tokens: p2, Blocks: []int32{7, 8}}))
		},
		func() error {
			return verify([]qwen3.VerifyStep{
				{Seq: 2, Tokens: toks(9, 2), Pos: B + 5, Blocks: []int32{7, 8}},
				{Seq: 4, Tokens: toks(10, 2), Pos: B + 8, Blocks: []int32{3, 6, 9}},
			})
		},
	}
	for i, st := range steps {
		if err := st(); err != nil {
			return all, fmt.Errorf("serving schedule step %d: %w", i+1, err)
		}
	}
	for _, s := range []qwen3.SeqID{1, 2, 3, 4} {
		if err := d.Finish(s); err != nil {
			return all, fmt.Errorf("serving schedule: finish %d: %w", s, err)
		}
	}
	return all, nil
}
