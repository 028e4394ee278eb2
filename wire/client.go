package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offcard/offcard/qwen3"
)

// Fault kinds of an engine process.
const (
	// Crashed: the engine exited, or closed its stdout, before answering.
	Crashed = "crashed"
	// Hung: no answer within the timeout (the process is then killed).
	Hung = "hung"
	// Malformed: the answer is not a protocol reply (bad JSON, a missing or
	// invalid field, outputs that do not match the request).
	Malformed = "malformed"
)

// FaultError is an engine process that crashed, hung or wrote garbage.
// The client is dead afterwards: every later call returns the same error.
type FaultError struct {
	Kind   string // Crashed, Hung or Malformed
	Op     string // the request that got no (valid) answer
	Detail string
	Stderr string // the tail of the engine's stderr
}

func (e *FaultError) Error() string {
	s := fmt.Sprintf("engine %s answering %s: %s", e.Kind, e.Op, e.Detail)
	if e.Stderr != "" {
		s += "; its stderr ends: " + e.Stderr
	}
	return s
}

// RefusedError is an engine's own error reply (ok false) to a valid
// request: the engine is alive and the session goes on.
type RefusedError struct {
	Op, Msg string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("engine refused %s: %s", e.Op, clipText(e.Msg, maxErrorText))
}

// Options start an engine process.
type Options struct {
	// Command is the engine's argv (Command[0] is looked up in PATH).
	Command []string
	// Dir is its working directory ("" the caller's).
	Dir string
	// Timeout bounds each call's answer but hello's (default
	// DefaultTimeout); HelloTimeout bounds the hello's, which includes
	// opening the device, loading the model and compiling programs
	// (default DefaultHelloTimeout).
	Timeout, HelloTimeout time.Duration
}

// Default timeouts.
const (
	DefaultTimeout = 30 * time.Second
	// DefaultHelloTimeout is long enough for a card engine's device open
	// and program compile at the real model's shape.
	DefaultHelloTimeout = 10 * time.Minute
	// byeTimeout bounds the goodbye: the bye reply and the exit.
	byeTimeout = 2 * time.Second
)

// Client is a qwen3.Decoder over an engine process speaking the protocol
// on its stdin and stdout. One call at a time.
type Client struct {
	o       Options
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File
	limit   atomic.Int64 // the longest reply line the current call may get
	lines   chan lineOrErr
	stderr  *tailBuffer
	exited  chan struct{}
	quit    chan struct{}
	once    sync.Once
	waitErr error

	cfg   qwen3.Config
	hello Hello
	caps  Caps
	last  Reply
	dead  error
	calls int

	// helloRep and byeRep are the hello's and the bye's replies (byeRep
	// nil until bye is answered, an error reply included).
	helloRep Reply
	byeRep   *Reply
}

type lineOrErr struct {
	b   []byte
	err error
}

// Start starts the engine, sends hello and reads its capabilities. A
// failure to start the process or to complete the hello is a *StartError
// (naming the command and the tail of its stderr); the process is gone
// when Start fails.
func Start(o Options, h Hello) (*Client, error) {
	if len(o.Command) == 0 || strings.TrimSpace(o.Command[0]) == "" {
		return nil, errors.New("no engine command")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HelloTimeout <= 0 {
		o.HelloTimeout = DefaultHelloTimeout
	}
	cfg, err := qwen3.ParseConfig(h.Model.Config)
	if err != nil {
		return nil, fmt.Errorf("hello: model config: %w", err)
	}
	h.Op = OpHello
	if h.Version == 0 {
		h.Version = Version
	}
	c := &Client{o: o, cfg: cfg, hello: h, stderr: &tailBuffer{max: 2048}, exited: make(chan struct{}), quit: make(chan struct{}), lines: make(chan lineOrErr, 1)}
	c.cmd = exec.Command(o.Command[0], o.Command[1:]...)
	c.cmd.Dir = o.Dir
	c.cmd.Stderr = c.stderr
	c.cmd.WaitDelay = waitDelay
	setProcessGroup(c.cmd)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	// Not StdoutPipe: Wait closes that pipe when the process exits, racing
	// the reader for the replies written just before.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stdout = pw
	err = c.cmd.Start()
	pw.Close()
	if err != nil {
		stdout.Close()
		return nil, &StartError{Command: o.Command, Err: err}
	}
	c.stdout = stdout
	c.limit.Store(replyBase)
	go c.read(stdout)
	go func() { c.waitErr = c.cmd.Wait(); close(c.exited) }()
	if !track(c) {
		c.kill()
		return nil, errShutdown
	}
	r, err := c.roundTrip(OpHello, h, o.HelloTimeout)
	if err == nil {
		if r.Caps == nil {
			err = c.fault(Malformed, OpHello, "hello reply without a version")
		} else if cerr := checkCaps(r.Caps, h.Version); cerr != nil {
			err = cerr
		} else if oerr := r.Caps.CheckObs(OpHello, r.Obs); oerr != nil {
			err = c.fault(Malformed, OpHello, oerr.Error())
		}
	}
	if err != nil {
		c.kill()
		return nil, &StartError{Command: o.Command, Started: true, Err: err, Stderr: c.stderr.String()}
	}
	c.caps, c.helloRep = *r.Caps, r
	return c, nil
}

// read feeds c.lines with stdout's lines until EOF or an error.
func (c *Client) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 1<<16)
	for {
		var line []byte
		var err error
		for {
			var part []byte
			part, err = br.ReadSlice('\n')
			if cap(line)-len(line) < len(part) { // doubling: a long line costs twice its length
				line = append(make([]byte, 0, 2*cap(line)+len(part)), line...)
			}
			line = append(line, part...)
			if n := c.limit.Load(); int64(len(line)) > n {
				err = fmt.Errorf("a reply line longer than %d bytes (not read further)", n)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
				err = fmt.Errorf("a last line without newline: %q", clip(line))
			}
			select {
			case c.lines <- lineOrErr{err: err}:
			case <-c.quit:
			}
			return
		}
		select {
		case c.lines <- lineOrErr{b: line}:
		case <-c.quit:
			return
		}
	}
}

// Caps is what the engine said it can give.
func (c *Client) Caps() Caps { return c.caps }

// Hello is the hello the client sent.
func (c *Client) Hello() Hello { return c.hello }

// Last is the reply to the last call (outputs as sent, observations).
func (c *Client) Last() Reply { return c.last }

// HelloReply is the reply to the hello (caps, and with memory the
// device's memory once the model is built).
func (c *Client) HelloReply() Reply { return c.helloRep }

// ByeReply is the reply to bye, once Close has had one (an error reply is
// the engine's teardown failing), or nil.
func (c *Client) ByeReply() *Reply { return c.byeRep }

// Pid is the engine process's id.
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// Calls counts the calls answered so far (hello excluded).
func (c *Client) Calls() int { return c.calls }

// Config implements qwen3.Decoder.
func (c *Client) Config() qwen3.Config { return c.cfg }

// BlockSize implements qwen3.Decoder.
func (c *Client) BlockSize() int { return c.hello.BlockSize }

// Prefill implements qwen3.Decoder. The engine answers every prompt
// position or only the last one; logits are nil unless it sends full rows.
func (c *Client) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	req := Request{Op: OpAdmit, Seq: int(p.Seq), Prompt: p.Tokens, Blocks: p.Blocks}
	r, err := c.roundTrip(OpAdmit, req, c.o.Timeout)
	if err != nil {
		return nil, err
	}
	n := len(r.Outputs)
	if n != len(p.Tokens) && n != 1 {
		return nil, c.fault(Malformed, OpAdmit, fmt.Sprintf("%d outputs for a prompt of %d (want one per position, or the last only)", n, len(p.Tokens)))
	}
	first := len(p.Tokens) - n
	want := make([]Step, n)
	for i := range want {
		want[i] = Step{Seq: int(p.Seq), Pos: first + i}
	}
	return c.outputs(OpAdmit, r, want)
}

// Decode implements qwen3.Decoder.
func (c *Client) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	req := Request{Op: OpDecode, Batch: make([]Step, len(batch))}
	for i, s := range batch {
		req.Batch[i] = Step{Seq: int(s.Seq), Token: s.Token, Pos: s.Pos, Blocks: s.Blocks}
	}
	r, err := c.roundTrip(OpDecode, req, c.o.Timeout)
	if err != nil {
		return nil, err
	}
	if len(r.Outputs) != len(batch) {
		return nil, c.fault(Malformed, OpDecode, fmt.Sprintf("%d outputs for a batch of %d", len(r.Outputs), len(batch)))
	}
	return c.outputs(OpDecode, r, req.Batch)
}

func (c *Client) outputs(op string, r Reply, want []Step) ([]qwen3.Output, error) {
	outs := make([]qwen3.Output, len(r.Outputs))
	for i, o := range r.Outputs {
		if o.Seq != want[i].Seq || o.Pos != want[i].Pos {
			return nil, c.fault(Malformed, op, fmt.Sprintf("output %d is for seq %d pos %d, the request's is seq %d pos %d", i, o.Seq, o.Pos, want[i].Seq, want[i].Pos))
		}
		if o.Token < 0 || int(o.Token) >= c.cfg.VocabSize {
			return nil, c.fault(Malformed, op, fmt.Sprintf("output %d: token %d outside the vocabulary of %d", i, o.Token, c.cfg.VocabSize))
		}
		outs[i] = qwen3.Output{Seq: qwen3.SeqID(o.Seq), Pos: o.Pos, Token: o.Token}
		switch c.caps.Logits {
		case LogitsFull:
			row, err := DecodeLogits(o.Logits)
			if err == nil && len(row) != c.cfg.VocabSize {
				err = fmt.Errorf("%d logits, the vocabulary has %d", len(row), c.cfg.VocabSize)
			}
			if err != nil {
				return nil, c.fault(Malformed, op, fmt.Sprintf("output %d: %v", i, err))
			}
			outs[i].Logits = row
		case LogitsTopK:
			if len(o.TopIDs) != len(o.TopLogits) || len(o.TopIDs) == 0 || len(o.TopIDs) > c.caps.TopK {
				return nil, c.fault(Malformed, op, fmt.Sprintf("output %d: %d top ids and %d top logits (top_k %d)", i, len(o.TopIDs), len(o.TopLogits), c.caps.TopK))
			}
			for _, id := range o.TopIDs {
				if id < 0 || int(id) >= c.cfg.VocabSize {
					return nil, c.fault(Malformed, op, fmt.Sprintf("output %d: top id %d outside the vocabulary", i, id))
				}
			}
		}
	}
	return outs, nil
}

// Finish implements qwen3.Decoder.
func (c *Client) Finish(seq qwen3.SeqID) error {
	_, err := c.roundTrip(OpFinish, Request{Op: OpFinish, Seq: int(seq)}, c.o.Timeout)
	return err
}

// Reset asks the engine to re-capture: its next step starts cold.
func (c *Client) Reset() error {
	_, err := c.roundTrip(OpReset, Request{Op: OpReset}, c.o.Timeout)
	return err
}

// Close says bye and waits briefly for the engine to exit, then kills
// it. It returns the session's fault, if any.
func (c *Client) Close() error {
	if c.dead == nil {
		if _, err := c.roundTrip(OpBye, Request{Op: OpBye}, byeTimeout); err == nil {
			_ = c.stdin.Close()
			select {
			case <-c.exited:
			case <-time.After(byeTimeout):
			}
		}
	}
	c.kill()
	var f *FaultError
	if errors.As(c.dead, &f) {
		return c.dead
	}
	return nil
}

func (c *Client) kill() {
	c.once.Do(func() { close(c.quit) })
	_ = c.stdin.Close()
	// The group too when the engine has exited: what it started and left.
	killProcess(c.cmd)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
	}
	_ = c.stdout.Close() // a grandchild may hold its write end
	untrack(c)
}

// roundTrip sends one request and reads its reply within timeout.
func (c *Client) roundTrip(op string, req any, timeout time.Duration) (Reply, error) {
	if c.dead != nil {
		return Reply{}, c.dead
	}
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	b = append(b, '\n')
	c.limit.Store(c.replyLimit(req))
	// A write blocks when the engine does not read; the timer below covers
	// it by killing the process.
	written := make(chan error, 1)
	go func() { _, err := c.stdin.Write(b); written <- err }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	exited := c.exited
	var grace <-chan time.Time
	var line []byte
	for line == nil {
		select {
		case <-exited:
			// Replies still in the pipe come within the grace; the end of
			// file may never come (a grandchild holding stdout).
			exited, grace = nil, time.After(exitGrace)
		case <-grace:
			return Reply{}, c.crashed(op, "the engine exited")
		case err := <-written:
			written = nil
			if err != nil {
				return Reply{}, c.crashed(op, fmt.Sprintf("cannot write the request: %v", err))
			}
		case l := <-c.lines:
			if l.err != nil {
				if errors.Is(l.err, io.EOF) || errors.Is(l.err, io.ErrClosedPipe) {
					return Reply{}, c.crashed(op, "the engine closed its stdout")
				}
				return Reply{}, c.fault(Malformed, op, l.err.Error())
			}
			line = l.b
		case <-timer.C:
			killProcess(c.cmd)
			what := ""
			if op == OpHello {
				what = ", the hello timeout"
			}
			return Reply{}, c.fault(Hung, op, fmt.Sprintf("no answer within %v (killed%s)", timeout, what))
		}
	}
	r, err := ParseReply(line)
	if err != nil {
		return Reply{}, c.fault(Malformed, op, err.Error())
	}
	if op == OpBye {
		c.byeRep = &r
	}
	if !r.OK {
		return Reply{}, &RefusedError{Op: op, Msg: clipText(r.Error, maxErrorText)}
	}
	if op != OpHello {
		if err := c.caps.CheckObs(op, r.Obs); err != nil {
			return Reply{}, c.fault(Malformed, op, err.Error())
		}
	}
	if op != OpHello && op != OpBye {
		c.calls++
		c.last = r
	}
	return r, nil
}

// crashed reports a dead engine with its exit status when it has one.
func (c *Client) crashed(op, detail string) error {
	select {
	case <-c.exited:
		if c.waitErr != nil && !errors.Is(c.waitErr, exec.ErrWaitDelay) {
			detail += " (" + c.waitErr.Error() + ")"
		} else {
			detail += " (exit status 0)"
		}
	case <-time.After(time.Second):
	}
	return c.fault(Crashed, op, detail)
}

func (c *Client) fault(kind, op, detail string) error {
	if kind == Malformed || kind == Hung {
		killProcess(c.cmd)
		select {
		case <-c.exited:
		case <-time.After(time.Second):
		}
	}
	c.dead = &FaultError{Kind: kind, Op: op, Detail: clipText(detail, maxErrorText), Stderr: c.stderr.String()}
	return c.dead
}

// replyLimit bounds the reply line to req (see replyBase).
func (c *Client) replyLimit(req any) int64 {
	n := 0
	if r, ok := req.(Request); ok {
		n = len(r.Prompt) + len(r.Tokens)
		for _, s := range r.Batch {
			n += max(1, len(s.Tokens))
		}
	}
	return replyBase + int64(n)*(replyPerOutput+3*int64(c.cfg.VocabSize))
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return clipText(string(t.b), t.max)
}

// ParseReply parses one reply line: a JSON object with only the
// protocol's keys, either ok or carrying an error.
func ParseReply(line []byte) (Reply, error) {
	var r Reply
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("%v in %q", err, clip(line))
	}
	if dec.More() {
		return Reply{}, fmt.Errorf("more than one JSON value on a line: %q", clip(line))
	}
	if !r.OK && r.Error == "" {
		return Reply{}, fmt.Errorf("a reply with neither ok nor error: %q", clip(line))
	}
	return r, nil
}
