package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
// call; seqs are the call's sequences (admit: the one; decode: the
// batch's; finish: the finished one; reset: none). It reports only what
// its Caps.Observes lists.
type Observer interface {
	Observe(op string, seqs []int) (Observations, error)
}

// Open builds the engine a hello asks for and says what it can give
// (Caps.Version is filled in by Serve).
type Open func(h Hello) (Engine, Caps, error)

// Serve speaks the protocol on r and w for one session: hello (answered
// by open), then calls until bye or the end of r. An engine's error on a
// call is an error reply and the session goes on; a request that cannot
// be parsed ends the session with an error reply and an error.
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
			if req.Version != Version {
				rep = Reply{Error: fmt.Sprintf("protocol version %d: this engine speaks %d", req.Version, Version)}
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
			caps.Version = Version
			rep.Caps = &caps
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
		case OpBye:
			return send(rep)
		default:
			rep = Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
		}
		if ob, ok := eng.(Observer); ok && rep.OK && req.Op != OpHello {
			obs, err := ob.Observe(req.Op, seqs)
			if err != nil {
				rep = Reply{Error: "observe: " + err.Error()}
			} else if len(obs.Seqs)+len(obs.IdleRows)+len(obs.KVWrites)+len(obs.Findings) > 0 {
				rep.Obs = &obs
			}
		}
		if err := send(rep); err != nil {
			return err
		}
	}
}
