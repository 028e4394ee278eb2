package ref

import (
	"fmt"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// The serving interfaces of qwen3 (serving.go there) on the oracle. Every
// position runs through forward exactly as a decode step does, and a step
// at position p reads the cache rows 0..p only, after writing row p; so a
// prefill from Start over cached rows, a verify of k tokens and k decodes
// are the same computation, bit for bit, and a rollback needs no call.

var _ qwen3.ServingDecoder = (*Decoder)(nil)

// PrefillFrom computes positions p.Start..p.Start+len(p.Tokens)-1, reading
// positions below Start from the cache through p.Blocks, and returns one
// Output per computed position. With Start 0 it is Prefill (the sequence
// must not be live); with Start > 0 the sequence may be new or live. Inputs
// are validated before anything is written.
func (d *Decoder) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if p.Start < 0 {
		return nil, fmt.Errorf("ref: prefill of sequence %d from negative position %d", p.Seq, p.Start)
	}
	if p.Start == 0 && d.live[p.Seq] {
		return nil, fmt.Errorf("ref: prefill of sequence %d from 0, which is already live", p.Seq)
	}
	if len(p.Tokens) == 0 {
		return nil, fmt.Errorf("ref: prefill of sequence %d from %d with no tokens", p.Seq, p.Start)
	}
	for i, t := range p.Tokens {
		if t < 0 || int(t) >= d.cfg.VocabSize {
			return nil, fmt.Errorf("ref: prefill position %d: token id %d out of range [0,%d)", p.Start+i, t, d.cfg.VocabSize)
		}
	}
	if err := d.checkTable(p.Start+len(p.Tokens)-1, p.Blocks); err != nil {
		return nil, fmt.Errorf("ref: prefill of sequence %d from %d: %w", p.Seq, p.Start, err)
	}
	outs := make([]qwen3.Output, len(p.Tokens))
	s := d.slots[0]
	for i, t := range p.Tokens {
		s.tok, s.pos, s.blocks, s.seq = int(t), p.Start+i, p.Blocks, p.Seq
		d.forward(d.slots[:1])
		outs[i] = qwen3.Output{Seq: p.Seq, Pos: s.pos, Token: s.outToken, Logits: s.outLogits}
	}
	d.live[p.Seq] = true
	return outs, nil
}

// Verify runs k tokens per entry at positions Pos..Pos+k-1: round j runs
// position Pos+j of every entry with more than j tokens as one decode batch,
// so each output is the one k sequential decodes give. Every entry is
// validated before anything is written; on error nothing changes.
func (d *Decoder) Verify(batch []qwen3.VerifyStep) ([][]qwen3.Output, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	rounds := 0
	for i, st := range batch {
		for _, o := range batch[:i] {
			if o.Seq == st.Seq {
				return nil, fmt.Errorf("ref: sequence %d appears twice in one verify batch", st.Seq)
			}
		}
		if len(st.Tokens) == 0 {
			return nil, fmt.Errorf("ref: verify of sequence %d with no tokens", st.Seq)
		}
		for j, t := range st.Tokens {
			if err := d.checkPos(t, st.Pos+j, st.Blocks); err != nil {
				return nil, fmt.Errorf("ref: verify of sequence %d: %w", st.Seq, err)
			}
		}
		rounds = max(rounds, len(st.Tokens))
	}
	outs := make([][]qwen3.Output, len(batch))
	for i, st := range batch {
		outs[i] = make([]qwen3.Output, len(st.Tokens))
	}
	d.growSlots(len(batch))
	idx := make([]int, 0, len(batch)) // the batch entries of the round's slots
	for j := range rounds {
		idx = idx[:0]
		for i, st := range batch {
			if j < len(st.Tokens) {
				s := d.slots[len(idx)]
				s.tok, s.pos, s.blocks, s.seq = int(st.Tokens[j]), st.Pos+j, st.Blocks, st.Seq
				idx = append(idx, i)
			}
		}
		d.forward(d.slots[:len(idx)])
		for n, i := range idx {
			s := d.slots[n]
			outs[i][j] = qwen3.Output{Seq: s.seq, Pos: s.pos, Token: s.outToken, Logits: s.outLogits}
		}
	}
	for _, st := range batch {
		d.live[st.Seq] = true
	}
	return outs, nil
}

// CopyBlocks copies every layer's keys and values of each Src block over
// its Dst block. Ids must lie in [0, NumBlocks), no block may be the Dst of
// two copies, and no block both a Src and a Dst; otherwise nothing changes.
func (d *Decoder) CopyBlocks(copies []qwen3.BlockCopy) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	srcs, dsts := map[int32]bool{}, map[int32]bool{}
	for _, c := range copies {
		for _, b := range []int32{c.Src, c.Dst} {
			if b < 0 || int(b) >= d.kv.numBlocks {
				return fmt.Errorf("ref: block copy %d->%d: block id %d out of range [0,%d)", c.Src, c.Dst, b, d.kv.numBlocks)
			}
		}
		if dsts[c.Dst] {
			return fmt.Errorf("ref: block copy %d->%d: block %d is the destination of two copies", c.Src, c.Dst, c.Dst)
		}
		srcs[c.Src], dsts[c.Dst] = true, true
	}
	for _, c := range copies {
		if dsts[c.Src] {
			return fmt.Errorf("ref: block copy %d->%d: block %d is both a source and a destination", c.Src, c.Dst, c.Src)
		}
	}
	for _, c := range copies {
		d.kv.copyBlock(int(c.Src), int(c.Dst))
	}
	return nil
}

// copyBlock copies block src over block dst in every layer's keys and
// values (ids checked by the caller). A block past the held memory was
// never written and reads as zero.
func (s *KVStore) copyBlock(src, dst int) {
	held := s.Blocks()
	if src >= held && dst >= held {
		return // both zero
	}
	s.hold(dst)
	n := s.blockVals()
	for l := range s.layers {
		for _, mem := range [][]bf16.BF16{s.k[l], s.v[l]} {
			to := mem[dst*n : (dst+1)*n]
			if src >= held {
				clear(to)
				continue
			}
			copy(to, mem[src*n:(src+1)*n])
		}
	}
}
