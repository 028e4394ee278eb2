package adjudicate

import (
	"fmt"

	"github.com/offcard/offcard/qwen3"
)

// Stream runs a teacher beside an engine: the caller hands it every call
// it made to the engine together with the engine's outputs, the teacher
// makes the same call (so it is fed the engine's own tokens: teacher
// forcing), and the engine's chosen tokens are judged against the
// teacher's logits. The caller owns the block tables; the teacher needs
// the blocks the engine was given (a ref decoder with as many KV blocks).
// Not safe for concurrent use.
type Stream struct {
	teacher qwen3.Decoder
	tally   *Tally
}

// NewStream returns a Stream judging with teacher and opt's thresholds.
func NewStream(teacher qwen3.Decoder, opt Options) *Stream {
	return &Stream{teacher: teacher, tally: NewTally(opt)}
}

// Prefill runs p on the teacher and judges the token the engine chose at
// the prompt's last position (its first generated token).
func (s *Stream) Prefill(p qwen3.Prefill, ours []qwen3.Output) (Position, error) {
	if len(ours) != len(p.Tokens) {
		return Position{}, fmt.Errorf("adjudicate: seq %d: %d outputs for a prompt of %d", p.Seq, len(ours), len(p.Tokens))
	}
	want, err := s.teacher.Prefill(p)
	if err != nil {
		return Position{}, fmt.Errorf("adjudicate: teacher prefill: %w", err)
	}
	last := len(p.Tokens) - 1
	return s.tally.Judge(int(p.Seq), last, want[last].Logits, ours[last].Token)
}

// Decode runs batch on the teacher and judges the engine's token of each
// entry; the positions come back in batch order.
func (s *Stream) Decode(batch []qwen3.Step, ours []qwen3.Output) ([]Position, error) {
	if len(ours) != len(batch) {
		return nil, fmt.Errorf("adjudicate: %d outputs for a batch of %d", len(ours), len(batch))
	}
	want, err := s.teacher.Decode(batch)
	if err != nil {
		return nil, fmt.Errorf("adjudicate: teacher decode: %w", err)
	}
	out := make([]Position, len(batch))
	for i, st := range batch {
		if out[i], err = s.tally.Judge(int(st.Seq), st.Pos, want[i].Logits, ours[i].Token); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Finish finishes seq on the teacher.
func (s *Stream) Finish(seq qwen3.SeqID) error { return s.teacher.Finish(seq) }

// Reports returns the judgements so far, one report per sequence id (a
// sequence id admitted again continues its report).
func (s *Stream) Reports() []Report { return s.tally.Reports() }
