// Package wiretest validates protocol lines against the protocol's JSON
// Schema (wire.Schema), for tests: Validate checks one line, Serve is
// wire.Serve with every request it reads and every reply it writes
// validated, so that a test engine built on it checks both directions of
// every session it takes part in.
package wiretest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/offcard/offcard/wire"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaURL = "https://github.com/offcard/offcard/wire/protocol.schema.json"

var (
	once    sync.Once
	schemas map[string]*jsonschema.Schema
	loadErr error
)

// Defs are the schema's definitions Validate takes: request, reply, each
// request op, and the reply to each op.
var Defs = []string{"request", "reply", "error_reply",
	"hello", "admit", "decode", "finish", "reset", "bye",
	"hello_reply", "admit_reply", "decode_reply", "finish_reply", "reset_reply", "bye_reply",
	"prefill_from", "verify", "copy_blocks", "prefill_from_reply", "verify_reply", "copy_blocks_reply"}

func load() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(wire.Schema()))
	if err != nil {
		loadErr = fmt.Errorf("protocol.schema.json: %w", err)
		return
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		loadErr = err
		return
	}
	schemas = map[string]*jsonschema.Schema{}
	if schemas[""], err = c.Compile(schemaURL); err != nil {
		loadErr = err
		return
	}
	for _, d := range Defs {
		if schemas[d], err = c.Compile(schemaURL + "#/$defs/" + d); err != nil {
			loadErr = err
			return
		}
	}
}

// Validate checks line (one JSON value) against the schema's definition
// def (Defs; "" the whole schema: any request or reply).
func Validate(def string, line []byte) error {
	once.Do(load)
	if loadErr != nil {
		return loadErr
	}
	s, ok := schemas[def]
	if !ok {
		return fmt.Errorf("no definition %q in the protocol schema", def)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if dec.More() {
		return errors.New("more than one JSON value on a line")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", def, err)
	}
	return nil
}

// ValidateRequest checks a request line and returns its op.
func ValidateRequest(line []byte) (string, error) {
	if err := Validate("request", line); err != nil {
		return "", err
	}
	var r struct{ Op string }
	_ = json.Unmarshal(line, &r)
	return r.Op, nil
}

// ValidateReply checks the reply line to a request of op: a refusal
// (error_reply) or op's reply.
func ValidateReply(op string, line []byte) error {
	var r struct {
		OK bool `json:"ok"`
	}
	if json.Unmarshal(line, &r) == nil && !r.OK {
		return Validate("error_reply", line)
	}
	return Validate(op+"_reply", line)
}

// Serve is wire.Serve over r and w with every line checked against the
// schema: a request that does not validate, or a reply, ends the session
// with an error naming the line (a test engine exits on it, and its
// stderr tail names the line in offcard's report).
func Serve(r io.Reader, w io.Writer, open wire.Open) error {
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := wire.Serve(reqR, repW, open)
		repW.CloseWithError(io.EOF)
		served <- err
	}()
	in := bufio.NewReaderSize(r, 1<<16)
	replies := bufio.NewReaderSize(repR, 1<<16)
	fail := func(err error) error {
		reqW.CloseWithError(err)
		repR.CloseWithError(err)
		<-served
		return err
	}
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && errors.Is(err, io.EOF) {
			reqW.Close()
			return <-served
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fail(err)
		}
		op, verr := ValidateRequest(line)
		if verr != nil {
			return fail(fmt.Errorf("request %s does not validate: %w", clip(line), verr))
		}
		if _, err := reqW.Write(line); err != nil {
			return fail(err)
		}
		rep, err := replies.ReadBytes('\n')
		if err != nil {
			return fail(fmt.Errorf("no reply to %s: %w", clip(line), err))
		}
		if verr := ValidateReply(op, rep); verr != nil {
			return fail(fmt.Errorf("reply %s to %s does not validate: %w", clip(rep), op, verr))
		}
		if _, err := w.Write(rep); err != nil {
			return fail(err)
		}
		if op == wire.OpBye {
			reqW.Close()
			return <-served
		}
	}
}

func clip(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf("%q", s)
}
