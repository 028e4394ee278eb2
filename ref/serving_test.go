package ref

import (
	"fmt"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// The serving interfaces against the plain ones, bit for bit, at block
// boundaries. Block size 4 keeps the boundaries close; every case is a few
// dozen tiny-model positions.

const servBS = 4

func servDecoder(t *testing.T) (*Decoder, *kvpage.Pool) {
	t.Helper()
	d := newTiny(t, 7, Options{BlockSize: servBS, NumBlocks: 96, Threads: 2})
	p, err := kvpage.NewPool(96, servBS)
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}

func grown(t *testing.T, p *kvpage.Pool, n int) *kvpage.Table {
	t.Helper()
	tb := p.NewTable()
	if err := tb.Grow(n); err != nil {
		t.Fatal(err)
	}
	return tb
}

func toQwen(cs []kvpage.BlockCopy) []qwen3.BlockCopy {
	out := make([]qwen3.BlockCopy, len(cs))
	for i, c := range cs {
		out[i] = qwen3.BlockCopy(c)
	}
	return out
}

// blockKV is a copy of every layer's keys and values of the given blocks.
func blockKV(d *Decoder, blocks []int32) []bf16.BF16 {
	var out []bf16.BF16
	n := d.kv.blockVals()
	for l := range d.kv.layers {
		k, v := d.kv.Layer(l)
		for _, b := range blocks {
			for _, mem := range [][]bf16.BF16{k, v} {
				if (int(b)+1)*n <= len(mem) {
					out = append(out, mem[int(b)*n:(int(b)+1)*n]...)
				} else {
					out = append(out, make([]bf16.BF16, n)...)
				}
			}
		}
	}
	return out
}

func sameOutputs(t *testing.T, what string, got, want []qwen3.Output) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for i := range got {
		sameOutput(t, fmt.Sprintf("%s output %d", what, i), got[i], want[i])
	}
}

// boundaryStarts are k*bs-1, k*bs, k*bs+1 for k = 1, 2.
var boundaryStarts = []int{servBS - 1, servBS, servBS + 1, 2*servBS - 1, 2 * servBS, 2*servBS + 1}

// TestPrefixHitEqualsColdPrefill: sequence B shares A's first start
// positions (kvpage SharePrefix; a partial last block is copied on write),
// then prefills its own tail from start. Its outputs equal a cold prefill of
// the same tokens bit for bit, and A's blocks are not touched.
func TestPrefixHitEqualsColdPrefill(t *testing.T) {
	d, p := servDecoder(t)
	for _, start := range boundaryStarts {
		for _, tail := range []int{1, servBS, servBS + 2} {
			t.Run(fmt.Sprintf("start=%d/tail=%d", start, tail), func(t *testing.T) {
				promptA := promptTokens(start+3, 1)
				tokensB := append(slices.Clone(promptA[:start]), promptTokens(tail, 2)...)
				a := grown(t, p, len(promptA))
				defer a.Release()
				if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: promptA, Blocks: a.Blocks()}); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = d.Finish(1) }()
				kvA := blockKV(d, a.Blocks())

				cold := grown(t, p, len(tokensB))
				defer cold.Release()
				want, err := d.Prefill(qwen3.Prefill{Seq: 3, Tokens: tokensB, Blocks: cold.Blocks()})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = d.Finish(3) }()

				b := p.NewTable()
				defer b.Release()
				if err := b.SharePrefix(a, start); err != nil {
					t.Fatal(err)
				}
				copies, err := b.PrepareWrite(start, len(tokensB))
				if err != nil {
					t.Fatal(err)
				}
				if wantCopies := min(start%servBS, 1); len(copies) != wantCopies {
					t.Fatalf("copies %v: want %d (the shared partial block)", copies, wantCopies)
				}
				if err := d.CopyBlocks(toQwen(copies)); err != nil {
					t.Fatal(err)
				}
				got, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: start, Tokens: tokensB[start:], Blocks: b.Blocks()})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = d.Finish(2) }()
				sameOutputs(t, "prefix hit", got, want[start:])
				if !slices.Equal(blockKV(d, a.Blocks()), kvA) {
					t.Fatal("the prefix hit wrote into the blocks of the sequence it shares")
				}
			})
		}
	}
}

// TestChunkedPrefillEqualsCold: a prompt prefilled in chunks of bs-1, bs
// and bs+1 positions equals one prefill from 0.
func TestChunkedPrefillEqualsCold(t *testing.T) {
	d, p := servDecoder(t)
	prompt := promptTokens(3*servBS+2, 5)
	cold := grown(t, p, len(prompt))
	defer cold.Release()
	want, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: prompt, Blocks: cold.Blocks()})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, servBS - 1, servBS, servBS + 1} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			tb := p.NewTable()
			defer tb.Release()
			var got []qwen3.Output
			for start := 0; start < len(prompt); start += chunk {
				end := min(start+chunk, len(prompt))
				if err := tb.Grow(end); err != nil { // the chunk's table only
					t.Fatal(err)
				}
				outs, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: start, Tokens: prompt[start:end], Blocks: tb.Blocks()})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, outs...)
			}
			if err := d.Finish(2); err != nil {
				t.Fatal(err)
			}
			sameOutputs(t, "chunked", got, want)
		})
	}
}

// TestVerifyEqualsSequentialDecodes: k tokens verified in one step at
// prompt lengths around block boundaries (so the k positions cross one)
// equal k decode steps, bit for bit; two sequences of different k share
// the batch.
func TestVerifyEqualsSequentialDecodes(t *testing.T) {
	d, p := servDecoder(t)
	for _, plen := range boundaryStarts {
		for k := 1; k <= 8; k++ {
			t.Run(fmt.Sprintf("len=%d/k=%d", plen, k), func(t *testing.T) {
				prompt := promptTokens(plen, k)
				drafts := promptTokens(k, 9)
				other := promptTokens(9-k, 4)
				ref := grown(t, p, plen+k)
				defer ref.Release()
				if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: prompt, Blocks: ref.Blocks()}); err != nil {
					t.Fatal(err)
				}
				var want []qwen3.Output
				for j, tok := range drafts {
					outs, err := d.Decode([]qwen3.Step{{Seq: 1, Token: tok, Pos: plen + j, Blocks: ref.Blocks()}})
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, outs...)
				}
				tb := grown(t, p, plen+k) // grown before the step, across the boundary
				defer tb.Release()
				tb2 := grown(t, p, 2+len(other))
				defer tb2.Release()
				if _, err := d.Prefill(qwen3.Prefill{Seq: 2, Tokens: prompt, Blocks: tb.Blocks()}); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Prefill(qwen3.Prefill{Seq: 3, Tokens: prompt[:2], Blocks: tb2.Blocks()}); err != nil {
					t.Fatal(err)
				}
				got, err := d.Verify([]qwen3.VerifyStep{
					{Seq: 3, Tokens: other, Pos: 2, Blocks: tb2.Blocks()},
					{Seq: 2, Tokens: drafts, Pos: plen, Blocks: tb.Blocks()},
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 2 || len(got[0]) != len(other) {
					t.Fatalf("verify returned %d entries (first of %d outputs)", len(got), len(got[0]))
				}
				sameOutputs(t, "verify", got[1], want)
				for _, s := range []qwen3.SeqID{1, 2, 3} {
					if err := d.Finish(s); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// TestRollbackThenDecode: after a verify of k drafts of which a are
// accepted, the table is truncated to the accepted length and decoding goes
// on from it with a token of its own; the outputs equal those of a sequence
// that never saw the rejected drafts. The rejected rows are overwritten
// before they are read. Decoding from the draft's end instead (the
// position left ahead) is caught.
func TestRollbackThenDecode(t *testing.T) {
	d, p := servDecoder(t)
	for _, plen := range []int{servBS - 1, servBS, servBS + 1} {
		for _, k := range []int{2, servBS + 1} {
			for a := 0; a < k; a++ {
				t.Run(fmt.Sprintf("len=%d/k=%d/accept=%d", plen, k, a), func(t *testing.T) {
					prompt := promptTokens(plen, 3)
					drafts := promptTokens(k, 11)
					next := promptTokens(3, 13)
					tb := grown(t, p, plen+k)
					defer tb.Release()
					if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: prompt, Blocks: tb.Blocks()}); err != nil {
						t.Fatal(err)
					}
					if _, err := d.Verify([]qwen3.VerifyStep{{Seq: 1, Tokens: drafts, Pos: plen, Blocks: tb.Blocks()}}); err != nil {
						t.Fatal(err)
					}
					accepted := plen + a + 1 // the first draft (the last sampled token) and a more
					if err := tb.Truncate(accepted); err != nil {
						t.Fatal(err)
					}
					decodeFrom := func(seq qwen3.SeqID, tb *kvpage.Table, pos int) []qwen3.Output {
						var outs []qwen3.Output
						for j, tok := range next {
							if _, err := tb.PrepareWrite(pos+j, pos+j+1); err != nil {
								t.Fatal(err)
							}
							o, err := d.Decode([]qwen3.Step{{Seq: seq, Token: tok, Pos: pos + j, Blocks: tb.Blocks()}})
							if err != nil {
								t.Fatal(err)
							}
							outs = append(outs, o...)
						}
						return outs
					}
					got := decodeFrom(1, tb, accepted)

					fresh := grown(t, p, accepted)
					defer fresh.Release()
					history := append(slices.Clone(prompt), drafts[:a+1]...)
					if _, err := d.Prefill(qwen3.Prefill{Seq: 2, Tokens: history, Blocks: fresh.Blocks()}); err != nil {
						t.Fatal(err)
					}
					want := decodeFrom(2, fresh, accepted)
					for i := range want {
						want[i].Seq = 1
					}
					sameOutputs(t, "after rollback", got, want)

					// The colleague's bug: decoding on from the draft's end.
					ahead := grown(t, p, plen+k)
					defer ahead.Release()
					if _, err := d.Prefill(qwen3.Prefill{Seq: 3, Tokens: append(slices.Clone(prompt), drafts...), Blocks: ahead.Blocks()}); err != nil {
						t.Fatal(err)
					}
					if a+1 < k && slices.EqualFunc(decodeFrom(3, ahead, plen+k), want, func(x, y qwen3.Output) bool {
						return x.Token == y.Token && slices.Equal(x.Logits, y.Logits)
					}) {
						t.Fatal("decoding from the draft's end gives the accepted sequence's outputs: the test cannot see a position left ahead")
					}
					for _, s := range []qwen3.SeqID{1, 2, 3} {
						if err := d.Finish(s); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestPreemptRecompute: a sequence generates, is preempted (finished, its
// blocks released and handed to another sequence that overwrites them), and
// is re-admitted with its prompt and generated tokens through a different
// table; the re-prefill's outputs equal the original ones bit for bit and
// decoding goes on identically.
func TestPreemptRecompute(t *testing.T) {
	d, p := servDecoder(t)
	for _, plen := range []int{servBS - 1, servBS, servBS + 1} {
		t.Run(fmt.Sprintf("len=%d", plen), func(t *testing.T) {
			prompt := promptTokens(plen, 17)
			const gen = servBS + 2
			tb := grown(t, p, plen+gen+1)
			first := tb.Blocks()
			orig := generate(t, d, 1, prompt, tb.Blocks(), gen)
			if err := d.Finish(1); err != nil {
				t.Fatal(err)
			}
			tb.Release() // preempted: another sequence takes the blocks
			other := grown(t, p, plen+gen+1)
			if !slices.Equal(other.Blocks(), first) {
				t.Fatalf("the other sequence got %v, not the freed %v", other.Blocks(), first)
			}
			if _, err := d.Prefill(qwen3.Prefill{Seq: 2, Tokens: promptTokens(plen+gen, 19), Blocks: other.Blocks()}); err != nil {
				t.Fatal(err)
			}
			re := grown(t, p, plen+gen+1)
			defer re.Release()
			defer other.Release()
			tokens := fedTokens(prompt, orig[:len(orig)-1])
			got, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: tokens, Blocks: re.Blocks()})
			if err != nil {
				t.Fatal(err)
			}
			sameOutputs(t, "recompute", got, orig[:len(tokens)])
			last := orig[len(orig)-1]
			more, err := d.Decode([]qwen3.Step{{Seq: 1, Token: orig[len(orig)-2].Token, Pos: last.Pos, Blocks: re.Blocks()}})
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "decode after recompute", more[0], last)
			for _, s := range []qwen3.SeqID{1, 2} {
				if err := d.Finish(s); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCopyBlocks: a copy writes exactly the source block over the
// destination, in every layer's keys and values, and nothing else; a block
// never written copies as zero; a bad list changes nothing.
func TestCopyBlocks(t *testing.T) {
	d, _ := servDecoder(t)
	if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: promptTokens(4*servBS, 23), Blocks: []int32{3, 0, 5, 1}}); err != nil {
		t.Fatal(err)
	}
	all := func() [][]bf16.BF16 {
		var out [][]bf16.BF16
		for b := range int32(48) {
			out = append(out, blockKV(d, []int32{b}))
		}
		return out
	}
	before := all()
	if slices.Equal(before[3], before[5]) || slices.Equal(before[0], before[9]) || slices.Equal(before[1], before[40]) {
		t.Fatal("test setup: blocks already equal")
	}
	// 40 lies past the memory the store holds: never written, it copies as zero
	copies := []qwen3.BlockCopy{{Src: 3, Dst: 5}, {Src: 0, Dst: 9}, {Src: 40, Dst: 1}, {Src: 3, Dst: 11}}
	if err := d.CopyBlocks(copies); err != nil {
		t.Fatal(err)
	}
	after := all()
	want := slices.Clone(before)
	want[5], want[9], want[1], want[11] = before[3], before[0], before[40], before[3]
	for b := range after {
		if !slices.Equal(after[b], want[b]) {
			t.Fatalf("block %d after %v differs from what the copies make", b, copies)
		}
	}
	for _, bad := range [][]qwen3.BlockCopy{
		{{Src: 0, Dst: 2}, {Src: 1, Dst: 96}},
		{{Src: -1, Dst: 2}},
		{{Src: 0, Dst: 2}, {Src: 1, Dst: 2}},
		{{Src: 0, Dst: 2}, {Src: 2, Dst: 4}},
	} {
		if err := d.CopyBlocks(bad); err == nil {
			t.Fatalf("CopyBlocks(%v) accepted", bad)
		}
		if got := all(); !slices.EqualFunc(got, after, slices.Equal) {
			t.Fatalf("refused CopyBlocks(%v) changed the cache", bad)
		}
	}
}

// TestServingErrors: bad inputs are refused before anything is written.
func TestServingErrors(t *testing.T) {
	d, _ := servDecoder(t)
	if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: promptTokens(3, 1), Blocks: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	snap := kvSnapshot(d)
	for name, call := range map[string]func() error{
		"prefill from 0 of a live sequence": func() error {
			_, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 1, Tokens: []int32{1}, Blocks: []int32{0}})
			return err
		},
		"negative start": func() error {
			_, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: -1, Tokens: []int32{1}, Blocks: []int32{0}})
			return err
		},
		"no tokens": func() error {
			_, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: 1, Blocks: []int32{0}})
			return err
		},
		"table short of the chunk's end": func() error {
			_, err := d.PrefillFrom(qwen3.PrefillFrom{Seq: 2, Start: 3, Tokens: []int32{1, 2}, Blocks: []int32{0}})
			return err
		},
		"verify table short of pos+k-1": func() error {
			_, err := d.Verify([]qwen3.VerifyStep{{Seq: 1, Tokens: []int32{1, 2}, Pos: 3, Blocks: []int32{0}}})
			return err
		},
		"verify with no tokens": func() error {
			_, err := d.Verify([]qwen3.VerifyStep{{Seq: 1, Pos: 3, Blocks: []int32{0, 1}}})
			return err
		},
		"verify naming a sequence twice": func() error {
			_, err := d.Verify([]qwen3.VerifyStep{{Seq: 1, Tokens: []int32{1}, Pos: 3, Blocks: []int32{0}},
				{Seq: 1, Tokens: []int32{1}, Pos: 3, Blocks: []int32{0}}})
			return err
		},
		"verify token out of range": func() error {
			_, err := d.Verify([]qwen3.VerifyStep{{Seq: 1, Tokens: []int32{1, 512}, Pos: 3, Blocks: []int32{0, 1}}})
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if !slices.Equal(kvSnapshot(d), snap) {
			t.Fatalf("%s: refused call changed the cache", name)
		}
	}
}
