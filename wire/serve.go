package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/offcard/offcard/qwen3"
)

// Engine is what Serve drives: a qwen3.Decoder, optionally a Resetter and
// an Observer.
type Engine interface {
	qwen3.Decoder
	Close() error
}

// Resetter is an engine that can re-capture on request (the reset op).
// Without it reset is answered ok and does nothing.
type Resetter interface {
	Reset() error
}

// Observer is an engine that reports what its device did during the last
// call; seqs are the call's sequences (admit, prefill_from: the one;
// decode, verify: the batch's; finish: the finished one; reset,
// copy_blocks: none). It reports only what
// its Caps.Observes lists. Serve also asks it after the hello (op hello:
// the memory baseline, with memory) and after bye has closed the engine
// (op bye: what the device still holds, with close).
type Observer interface {
	Observe(op string, seqs []int) (Observations, error)
}

// Open builds the engine a hello asks for and says what it can give.
// Serve fills in Caps.Version: the hello's version or Version, the older,
// and older still when Open names one (an engine pinned to version 1).
// In version 3 Serve fills in Caps.Serves too: the serving calls the
// engine implements (qwen3.PrefixPrefiller, Verifier, BlockCopier, as
// qwen3.Serves sees them), narrowed to those Open listed when its
// Caps.Serves is not nil.
type Open func(h Hello) (Engine, Caps, error)

// Serve speaks the protocol on r and w for one session: hello (answered
// by open), then calls until bye or the end of r. It speaks the hello's
// version when that is older than Version (the caps and observations of
// later versions are then left out). It answers the serving calls its
// hello reply lists (Caps.Serves, filled in from the engine's interfaces)
// and refuses any other. An engine's error on a call is an
// error reply and the session goes on; a request that cannot be parsed
// ends the session with an error reply and an error. At bye the engine is
// closed before the reply, which carries Close's error (an error reply)
// and, with close, the device's memory after it.
func Serve(r io.Reader, w io.Writer, open Open) error {
	br := bufio.NewReaderSize(r, 1<<16)
	bw := bufio.NewWriter(w)
	send := func(rep Reply) error {
		b, err := json.Marshal(rep)
		if err != nil {
			b, _ = json.Marshal(Reply{Error: "encode reply: " + err.Error()})
		}
		bw.Write(b)
		bw.WriteByte('\n')
		return bw.Flush()
	}
	var (
		eng  Engine
		caps Caps
	)
	defer func() {
		if eng != nil {
			eng.Close()
		}
	}()
	observe := func(rep *Reply, op string, seqs []int) {
		ob, ok := eng.(Observer)
		if !ok {
			return
		}
		obs, err := ob.Observe(op, seqs)
		if err != nil {
			*rep = Reply{Error: "observe: " + err.Error()}
			return
		}
		obs = caps.Filter(obs, op)
		if len(obs.Seqs)+len(obs.IdleRows)+len(obs.KVWrites)+len(obs.Findings) > 0 || obs.Regime != "" || obs.HostWrites != nil || obs.Mem != nil {
			rep.Obs = &obs
		}
	}
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			send(Reply{Error: "bad request: " + err.Error()})
			return fmt.Errorf("bad request: %w", err)
		}
		if eng == nil && req.Op != OpHello && req.Op != OpBye {
			send(Reply{Error: "the first request must be hello"})
			return fmt.Errorf("%s before hello", req.Op)
		}
		rep := Reply{OK: true}
		var seqs []int
		switch req.Op {
		case OpHello:
			if eng != nil {
				rep = Reply{Error: "hello twice"}
				break
			}
			if req.Version < MinVersion {
				rep = Reply{Error: fmt.Sprintf("protocol version %d: this engine speaks %d to %d", req.Version, MinVersion, Version)}
				break
			}
			h := Hello{Op: OpHello, Version: req.Version, BlockSize: req.BlockSize, NumBlocks: req.NumBlocks, Capacity: req.Capacity, Hints: req.Hints}
			if req.Model != nil {
				h.Model = *req.Model
			}
			e, c, err := open(h)
			if err != nil {
				rep = Reply{Error: err.Error()}
				break
			}
			eng, caps = e, c
			v := min(req.Version, Version)
			if caps.Version > 0 {
				v = min(v, caps.Version)
			}
			caps.Version = v
			if caps.Version < 2 {
				caps.Observes = slices.DeleteFunc(slices.Clone(caps.Observes), func(o string) bool { return !slices.Contains(observations[1], o) })
				caps.FollowsHints = false
			}
			caps.Serves = serves(eng, caps.Serves, caps.Version)
			rep.Caps = &caps
			if caps.Offers(ObsMemory) {
				observe(&rep, OpHello, nil)
			}
			if err := send(rep); err != nil {
				return err
			}
			continue
		case OpAdmit:
			seqs = []int{req.Seq}
			outs, err := eng.Prefill(qwen3.Prefill{Seq: qwen3.SeqID(req.Seq), Tokens: req.Prompt, Blocks: req.Blocks})
			if err != nil {
				rep = Reply{Error: err.Error()}
				break
			}
			rep.Outputs = FromOutputs(outs, caps)
		case OpDecode:
			batch := make([]qwen3.Step, len(req.Batch))
			for i, s := range req.Batch {
				batch[i] = qwen3.Step{Seq: qwen3.SeqID(s.Seq), Token: s.Token, Pos: s.Pos, Blocks: s.Blocks}
				seqs = append(seqs, s.Seq)
			}
			outs, err := eng.Decode(batch)
			if err != nil {
				rep = Reply{Error: err.Error()}
				break
			}
			rep.Outputs = FromOutputs(outs, caps)
		case OpFinish:
			seqs = []int{req.Seq}
			if err := eng.Finish(qwen3.SeqID(req.Seq)); err != nil {
				rep = Reply{Error: err.Error()}
			}
		case OpReset:
			if rs, ok := eng.(Resetter); ok {
				if err := rs.Reset(); err != nil {
					rep = Reply{Error: err.Error()}
				}
			}
		case OpPrefillFrom, OpVerify, OpCopyBlocks:
			rep, seqs = serveCall(eng, caps, req)
		case OpBye:
			if eng != nil {
				if err := eng.Close(); err != nil {
					rep = Reply{Error: "close: " + err.Error()}
				}
				if caps.Offers(ObsClose) {
					o := rep
					observe(&o, OpBye, nil)
					rep.Obs = o.Obs
				}
				eng = nil
			}
			return send(rep)
		default:
			rep = Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
		}
		if rep.OK {
			observe(&rep, req.Op, seqs)
		}
		if err := send(rep); err != nil {
			return err
		}
	}
}

// Filter is o with only what the engine offers (c.Observes) on a reply
// to op: the fields of other observations are left out, and so are
// clearing writes in version 1 (it has no way to say a write stores no
// token).
func (c Caps) Filter(o Observations, op string) Observations {
	if !c.Offers(ObsCurPos) {
		for i := range o.Seqs {
			o.Seqs[i].CurPos = nil
		}
	}
	if !c.Offers(ObsPageTable) {
		for i := range o.Seqs {
			o.Seqs[i].PageRow = nil
		}
		o.IdleRows = nil
	}
	if !c.Offers(ObsCurPos) && !c.Offers(ObsPageTable) {
		o.Seqs = nil
	}
	if !c.Offers(ObsKVWrites) {
		o.KVWrites = nil
	}
	if c.Version < 2 {
		o.KVWrites = slices.DeleteFunc(o.KVWrites, func(w KVWrite) bool { return w.Clear })
	}
	if !c.Offers(ObsFindings) {
		o.Findings = nil
	}
	if !c.Offers(ObsRegime) {
		o.Regime = ""
	}
	if !c.Offers(ObsHostWrites) {
		o.HostWrites = nil
	}
	if op == OpBye && !c.Offers(ObsClose) || op != OpBye && !c.Offers(ObsMemory) {
		o.Mem = nil
	}
	return o
}
