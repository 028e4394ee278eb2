package adjudicate

import (
	"fmt"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// Force judges one sequence of a dump with teacher forcing: it prefills
// the prompt into teacher, then decodes each of our tokens but the last,
// so the token of every step is judged on our own prefix and one flip does
// not cascade. The sequence runs as seq.Seq through blocks
// 0..⌈len/BlockSize⌉-1 of the teacher, and is finished before Force
// returns. Tokens outside the teacher's vocabulary are an error.
func Force(teacher qwen3.Decoder, seq *dump.Sequence, opt Options) (Report, error) {
	return force(teacher, seq, opt, func() {})
}

// force is Force, calling tick after each judged position.
func force(teacher qwen3.Decoder, seq *dump.Sequence, opt Options, tick func()) (Report, error) {
	opt = opt.withDefaults()
	r := Report{Seq: seq.Seq, Prompt: seq.Prompt}
	if len(seq.Steps) == 0 {
		return r, nil
	}
	vocab := teacher.Config().VocabSize
	toks := seq.Tokens()
	for i, t := range toks {
		if int(t) >= vocab {
			what := "prompt token"
			if i >= len(seq.Prompt) {
				what = fmt.Sprintf("token at pos %d", seq.Steps[i-len(seq.Prompt)].Pos)
			}
			return r, fmt.Errorf("seq %d: %s %d is outside the vocabulary of %d", seq.Seq, what, t, vocab)
		}
	}
	// The last step's token is never fed.
	n := len(toks) - 1
	bs := teacher.BlockSize()
	blocks := make([]int32, (n+bs-1)/bs)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	id := qwen3.SeqID(seq.Seq)
	outs, err := teacher.Prefill(qwen3.Prefill{Seq: id, Tokens: seq.Prompt, Blocks: blocks[:(len(seq.Prompt)+bs-1)/bs]})
	if err != nil {
		return r, fmt.Errorf("seq %d: teacher prefill: %w", seq.Seq, err)
	}
	defer teacher.Finish(id)
	row := outs[len(outs)-1].Logits
	for i, st := range seq.Steps {
		if i > 0 {
			pos := st.Pos
			o, err := teacher.Decode([]qwen3.Step{{Seq: id, Token: seq.Steps[i-1].Token, Pos: pos, Blocks: blocks[:pos/bs+1]}})
			if err != nil {
				return r, fmt.Errorf("seq %d pos %d: teacher decode: %w", seq.Seq, pos, err)
			}
			row = o[0].Logits
		}
		j, err := Judge(row, st.Token, opt.Band, opt.TopK)
		if err != nil {
			return r, err
		}
		r.Positions = append(r.Positions, Position{Pos: st.Pos, Judgement: j})
		tick()
	}
	return r, nil
}

// ForceAll runs Force on every sequence of d, in order; progress (if not
// nil) is told the number of positions judged so far and in all after
// each position.
func ForceAll(teacher qwen3.Decoder, d *dump.Dump, opt Options, progress func(done, total int)) ([]Report, error) {
	total, done := 0, 0
	for _, s := range d.Seqs {
		total += len(s.Steps)
	}
	tick := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	out := make([]Report, 0, len(d.Seqs))
	for _, s := range d.Seqs {
		r, err := force(teacher, s, opt, tick)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// NewTeacher returns a ref decoder over w with enough KV blocks for the
// longest sequence of d, as Force uses them.
func NewTeacher(w *qwen3.Weights, d *dump.Dump, threads int) (*ref.Decoder, error) {
	longest := 1
	for _, s := range d.Seqs {
		longest = max(longest, len(s.Prompt)+len(s.Steps))
	}
	return ref.New(w, ref.Options{BlockSize: ref.DefaultBlockSize, NumBlocks: (longest + ref.DefaultBlockSize - 1) / ref.DefaultBlockSize, Threads: threads})
}
