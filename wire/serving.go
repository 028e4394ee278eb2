package wire

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/offcard/offcard/qwen3"
)

// The serving calls of protocol version 3 (qwen3/serving.go's interfaces)
// on both sides: Client sends them, only to an engine whose hello listed
// them; Serve answers them for a Go engine that implements them.

var (
	_ qwen3.ServingDecoder = (*Client)(nil)
	_ qwen3.ServingOffer   = (*Client)(nil)
)

// ErrNotServed is a serving call the engine's hello did not list: the
// client refuses it without sending anything, and the session goes on.
var ErrNotServed = errors.New("the engine does not serve this call")

// OffersServing implements qwen3.ServingOffer: the hello reply's serves
// lists call (never before version 3).
func (c *Client) OffersServing(call string) bool { return c.caps.ServesCall(call) }

// notServed is the error of a serving call the hello did not list.
func (c *Client) notServed(call string) error {
	served := "none"
	if len(c.caps.Serves) > 0 {
		served = strings.Join(c.caps.Serves, ", ")
	}
	return fmt.Errorf("wire: %s: %w (protocol version %d, serves: %s)", call, ErrNotServed, c.caps.Version, served)
}

// PrefillFrom implements qwen3.PrefixPrefiller (the prefill_from request).
// As to admit, the engine answers every position Start..Start+n-1, in
// order, or the last one only; logits are nil unless it sends full rows.
func (c *Client) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	if c.dead != nil {
		return nil, c.dead
	}
	if !c.OffersServing(OpPrefillFrom) {
		return nil, c.notServed(OpPrefillFrom)
	}
	req := Request{Op: OpPrefillFrom, Seq: int(p.Seq), Start: p.Start, Tokens: p.Tokens, Blocks: p.Blocks}
	r, err := c.roundTrip(OpPrefillFrom, req, c.o.Timeout)
	if err != nil {
		return nil, err
	}
	n := len(r.Outputs)
	if n != len(p.Tokens) && n != 1 {
		return nil, c.fault(Malformed, OpPrefillFrom, fmt.Sprintf("%d outputs for a chunk of %d (want one per position, or the last only)", n, len(p.Tokens)))
	}
	first := p.Start + len(p.Tokens) - n
	want := make([]Step, n)
	for i := range want {
		want[i] = Step{Seq: int(p.Seq), Pos: first + i}
	}
	return c.outputs(OpPrefillFrom, r, want)
}

// Verify implements qwen3.Verifier (the verify request): the reply's
// outputs are every entry's k outputs, entry after entry in the batch's
// order, each entry's in position order; anything else is Malformed.
func (c *Client) Verify(batch []qwen3.VerifyStep) ([][]qwen3.Output, error) {
	if c.dead != nil {
		return nil, c.dead
	}
	if !c.OffersServing(OpVerify) {
		return nil, c.notServed(OpVerify)
	}
	req := Request{Op: OpVerify, Batch: make([]Step, len(batch))}
	var want []Step
	for i, s := range batch {
		req.Batch[i] = Step{Seq: int(s.Seq), Tokens: s.Tokens, Pos: s.Pos, Blocks: s.Blocks}
		for j := range s.Tokens {
			want = append(want, Step{Seq: int(s.Seq), Pos: s.Pos + j})
		}
	}
	r, err := c.roundTrip(OpVerify, req, c.o.Timeout)
	if err != nil {
		return nil, err
	}
	if len(r.Outputs) != len(want) {
		return nil, c.fault(Malformed, OpVerify, fmt.Sprintf("%d outputs for a verify of %d positions (k per entry: %s)", len(r.Outputs), len(want), verifyKs(batch)))
	}
	flat, err := c.outputs(OpVerify, r, want)
	if err != nil {
		return nil, err
	}
	outs := make([][]qwen3.Output, len(batch))
	for i, s := range batch {
		outs[i], flat = flat[:len(s.Tokens):len(s.Tokens)], flat[len(s.Tokens):]
	}
	return outs, nil
}

func verifyKs(batch []qwen3.VerifyStep) string {
	ks := make([]string, len(batch))
	for i, s := range batch {
		ks[i] = fmt.Sprint(len(s.Tokens))
	}
	return strings.Join(ks, " ")
}

// CopyBlocks implements qwen3.BlockCopier (the copy_blocks request). An
// empty list is no copy and no call: nothing is sent. A reply with
// outputs is Malformed.
func (c *Client) CopyBlocks(copies []qwen3.BlockCopy) error {
	if c.dead != nil {
		return c.dead
	}
	if !c.OffersServing(OpCopyBlocks) {
		return c.notServed(OpCopyBlocks)
	}
	if len(copies) == 0 {
		return nil
	}
	req := Request{Op: OpCopyBlocks, Copies: make([]BlockCopy, len(copies))}
	for i, x := range copies {
		req.Copies[i] = BlockCopy{Src: x.Src, Dst: x.Dst}
	}
	r, err := c.roundTrip(OpCopyBlocks, req, c.o.Timeout)
	if err != nil {
		return err
	}
	if len(r.Outputs) > 0 {
		return c.fault(Malformed, OpCopyBlocks, fmt.Sprintf("%d outputs in the reply to copy_blocks (it has none)", len(r.Outputs)))
	}
	return nil
}

// serves is what a version v session serves of eng: the serving calls
// its interfaces allow (qwen3.Serves: a type assertion, narrowed by
// qwen3.ServingOffer), narrowed further to those Open's caps list when
// it lists any (a non-nil Serves; empty: none).
func serves(eng Engine, offered []string, v int) []string {
	var s []string
	for _, call := range ServingCalls(v) {
		if qwen3.Serves(eng, call) && (offered == nil || slices.Contains(offered, call)) {
			s = append(s, call)
		}
	}
	return s
}

// serveCall answers a serving request of a session whose caps are caps:
// a refusal when the session does not serve it, else the engine's
// outputs (none for copy_blocks). seqs are the call's sequences, for the
// observations.
func serveCall(eng Engine, caps Caps, req Request) (rep Reply, seqs []int) {
	if !caps.ServesCall(req.Op) {
		if caps.Version < 3 {
			return Reply{Error: fmt.Sprintf("%s is protocol version 3; this session speaks %d", req.Op, caps.Version)}, nil
		}
		return Reply{Error: fmt.Sprintf("%s is not served by this engine (its hello's serves: %s)", req.Op, strings.Join(caps.Serves, ", "))}, nil
	}
	rep = Reply{OK: true}
	switch req.Op {
	case OpPrefillFrom:
		seqs = []int{req.Seq}
		outs, err := eng.(qwen3.PrefixPrefiller).PrefillFrom(qwen3.PrefillFrom{Seq: qwen3.SeqID(req.Seq), Start: req.Start, Tokens: req.Tokens, Blocks: req.Blocks})
		if err != nil {
			return Reply{Error: err.Error()}, seqs
		}
		rep.Outputs = FromOutputs(outs, caps)
	case OpVerify:
		batch := make([]qwen3.VerifyStep, len(req.Batch))
		for i, s := range req.Batch {
			batch[i] = qwen3.VerifyStep{Seq: qwen3.SeqID(s.Seq), Tokens: s.Tokens, Pos: s.Pos, Blocks: s.Blocks}
			seqs = append(seqs, s.Seq)
		}
		outs, err := eng.(qwen3.Verifier).Verify(batch)
		if err != nil {
			return Reply{Error: err.Error()}, seqs
		}
		for _, o := range outs {
			rep.Outputs = append(rep.Outputs, FromOutputs(o, caps)...)
		}
	case OpCopyBlocks:
		copies := make([]qwen3.BlockCopy, len(req.Copies))
		for i, x := range req.Copies {
			copies[i] = qwen3.BlockCopy{Src: x.Src, Dst: x.Dst}
		}
		if err := eng.(qwen3.BlockCopier).CopyBlocks(copies); err != nil {
			return Reply{Error: err.Error()}, nil
		}
	}
	return rep, seqs
}
