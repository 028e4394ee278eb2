package dump

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Step is one step record. Step and GapSteps are -1 when the record
// carries none; TopIDs, TopLogits and Digest are empty when absent.
type Step struct {
	Step      int
	Seq       int
	Pos       int
	Token     int32
	TopIDs    []int32
	TopLogits []float32
	GapSteps  int
	Digest    string
}

// Sequence is one sequence of a dump: its prompt and its generated steps,
// in position order.
type Sequence struct {
	Seq    int
	Prompt []int32
	Steps  []Step
	// Model and ModelName are the prompt record's model identity and its
	// description ("" when the record carries none).
	Model, ModelName string
}

// Tokens returns the sequence's token stream: the prompt, then every
// step's token.
func (s *Sequence) Tokens() []int32 {
	out := make([]int32, 0, len(s.Prompt)+len(s.Steps))
	out = append(out, s.Prompt...)
	for _, st := range s.Steps {
		out = append(out, st.Token)
	}
	return out
}

// Dump is a whole dump: its sequences ordered by seq.
type Dump struct {
	Seqs []*Sequence
	// Model is the identity of the model the dump was made with, as its
	// prompt records carry it (all that carry one agree), and ModelName
	// its description; "" when no record carries one (an older offcard,
	// another engine).
	Model, ModelName string
}

// Sequence returns the sequence with id seq, or nil.
func (d *Dump) Sequence(seq int) *Sequence {
	i := sort.Search(len(d.Seqs), func(i int) bool { return d.Seqs[i].Seq >= seq })
	if i < len(d.Seqs) && d.Seqs[i].Seq == seq {
		return d.Seqs[i]
	}
	return nil
}

// Error is a violation of the format, at a 1-based line (0: the dump as a
// whole).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// MaxLine is the longest line Read accepts, in bytes.
const MaxLine = 16 << 20

// wire is a record as JSON carries it; pointers tell absent from zero.
type wire struct {
	Step      *int      `json:"step,omitempty"`
	Seq       *int      `json:"seq"`
	Pos       *int      `json:"pos,omitempty"`
	Token     *int64    `json:"token,omitempty"`
	Prompt    *[]int64  `json:"prompt,omitempty"`
	TopIDs    []int64   `json:"top_ids,omitempty"`
	TopLogits []float32 `json:"top_logits,omitempty"`
	GapSteps  *int      `json:"gap_steps,omitempty"`
	Digest    *string   `json:"digest,omitempty"`
	Model     *string   `json:"model,omitempty"`
	ModelName *string   `json:"model_name,omitempty"`
}

// state checks the rules record by record; Read and Writer share it.
type state struct {
	seqs map[int]*Sequence
	line int
	// The dump's model identity, from the first prompt record with one.
	model, modelName string
	modelSeq         int
}

func newState() *state { return &state{seqs: map[int]*Sequence{}} }

func (st *state) errf(format string, a ...any) error {
	return &Error{Line: st.line, Msg: fmt.Sprintf(format, a...)}
}

func (st *state) prompt(seq int, ids []int32, model, modelName string) error {
	if seq < 0 {
		return st.errf("seq %d is negative", seq)
	}
	if len(ids) == 0 {
		return st.errf("seq %d: empty prompt", seq)
	}
	for _, id := range ids {
		if id < 0 {
			return st.errf("seq %d: prompt token %d is negative", seq, id)
		}
	}
	if _, ok := st.seqs[seq]; ok {
		return st.errf("seq %d has a second prompt record", seq)
	}
	if model != "" {
		if st.model == "" {
			st.model, st.modelName, st.modelSeq = model, modelName, seq
		} else if model != st.model {
			return st.errf("seq %d: model %s differs from seq %d's model %s (a dump is of one model)", seq, model, st.modelSeq, st.model)
		}
	}
	st.seqs[seq] = &Sequence{Seq: seq, Prompt: append([]int32(nil), ids...), Model: model, ModelName: modelName}
	return nil
}

func (st *state) step(s Step) error {
	if s.Seq < 0 {
		return st.errf("seq %d is negative", s.Seq)
	}
	if s.Token < 0 {
		return st.errf("seq %d pos %d: token %d is negative", s.Seq, s.Pos, s.Token)
	}
	if len(s.TopIDs) != len(s.TopLogits) {
		return st.errf("seq %d pos %d: %d top_ids but %d top_logits", s.Seq, s.Pos, len(s.TopIDs), len(s.TopLogits))
	}
	for _, id := range s.TopIDs {
		if id < 0 {
			return st.errf("seq %d pos %d: top id %d is negative", s.Seq, s.Pos, id)
		}
	}
	sq := st.seqs[s.Seq]
	if sq == nil {
		return st.errf("step for seq %d before its prompt record", s.Seq)
	}
	want := len(sq.Prompt) - 1 + len(sq.Steps)
	if s.Pos != want {
		if len(sq.Steps) == 0 {
			return st.errf("seq %d: first step has pos %d, want %d (pos is the position whose logits chose the token: prompt length - 1)", s.Seq, s.Pos, want)
		}
		return st.errf("seq %d: pos %d out of order (previous step had pos %d, want %d)", s.Seq, s.Pos, want-1, want)
	}
	s.TopIDs = append([]int32(nil), s.TopIDs...)
	s.TopLogits = append([]float32(nil), s.TopLogits...)
	sq.Steps = append(sq.Steps, s)
	return nil
}

func (st *state) dump() *Dump {
	d := &Dump{Model: st.model, ModelName: st.modelName}
	for _, s := range st.seqs {
		d.Seqs = append(d.Seqs, s)
	}
	sort.Slice(d.Seqs, func(i, j int) bool { return d.Seqs[i].Seq < d.Seqs[j].Seq })
	return d
}

// record decodes and checks one non-blank line.
func (st *state) record(line []byte) error {
	if t := bytes.TrimSpace(line); t[0] != '{' {
		return st.errf("not a JSON object")
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&w); err != nil {
		return st.errf("not a JSON object: %v", jsonMsg(err))
	}
	if dec.More() {
		return st.errf("more than one JSON value on the line")
	}
	if w.Seq == nil {
		return st.errf("record without \"seq\"")
	}
	if w.Prompt != nil {
		if w.Pos != nil || w.Token != nil {
			return st.errf("seq %d: a record is a prompt record or a step record, not both (it has \"prompt\" and \"pos\"/\"token\")", *w.Seq)
		}
		ids := make([]int32, len(*w.Prompt))
		for i, id := range *w.Prompt {
			if id > math.MaxInt32 || id < math.MinInt32 {
				return st.errf("seq %d: prompt token %d out of range", *w.Seq, id)
			}
			ids[i] = int32(id)
		}
		var model, name string
		if w.Model != nil {
			model = *w.Model
		}
		if w.ModelName != nil {
			name = *w.ModelName
		}
		return st.prompt(*w.Seq, ids, model, name)
	}
	switch {
	case w.Pos == nil:
		return st.errf("seq %d: step record without \"pos\"", *w.Seq)
	case w.Token == nil:
		return st.errf("seq %d pos %d: step record without \"token\"", *w.Seq, *w.Pos)
	case *w.Token < 0 || *w.Token > math.MaxInt32:
		return st.errf("seq %d pos %d: token %d is not a token id", *w.Seq, *w.Pos, *w.Token)
	}
	s := Step{Step: -1, Seq: *w.Seq, Pos: *w.Pos, Token: int32(*w.Token), GapSteps: -1, TopLogits: w.TopLogits}
	if w.Step != nil {
		s.Step = *w.Step
	}
	if w.GapSteps != nil {
		s.GapSteps = *w.GapSteps
	}
	if w.Digest != nil {
		s.Digest = *w.Digest
	}
	for _, id := range w.TopIDs {
		if id > math.MaxInt32 || id < math.MinInt32 {
			return st.errf("seq %d pos %d: top id %d out of range", s.Seq, s.Pos, id)
		}
		s.TopIDs = append(s.TopIDs, int32(id))
	}
	return st.step(s)
}

// jsonMsg shortens encoding/json's messages to their point.
func jsonMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf("a JSON %s", te.Value)
		}
		return fmt.Sprintf("field %q is a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	return err.Error()
}

// Read reads and validates a whole dump.
func Read(r io.Reader) (*Dump, error) {
	st := newState()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			st.line++
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if e := st.record(line); e != nil {
				return nil, e
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, st.errf("%v", err)
		}
	}
	if len(st.seqs) == 0 {
		return nil, &Error{Msg: "empty dump: no prompt record"}
	}
	return st.dump(), nil
}

// readLine returns the next line without its newline; io.EOF after the last.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		return buf, err
	}
}

// Validate reads a dump and reports its first violation, or nil.
func Validate(r io.Reader) error {
	_, err := Read(r)
	return err
}

// Writer writes a dump record by record, refusing (with the error Read
// would give) any record that would make the dump invalid.
type Writer struct {
	w   *bufio.Writer
	st  *state
	err error
	// The model identity written on every prompt record (SetModel).
	model, modelName string
}

// NewWriter returns a Writer on w; call Flush at the end.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w), st: newState()}
}

// SetModel makes every later prompt record carry the identity of the
// model the dump is made with (model, e.g. qwen3's Weights.Digest) and its
// description (name, e.g. "synth tiny seed 1"; may be empty). Call it
// before the first prompt record: a dump is of one model.
func (w *Writer) SetModel(model, name string) { w.model, w.modelName = model, name }

// Prompt writes a sequence's prompt record.
func (w *Writer) Prompt(seq int, ids []int32) error {
	if w.err != nil {
		return w.err
	}
	w.st.line++
	if err := w.st.prompt(seq, ids, w.model, w.modelName); err != nil {
		return err
	}
	w.w.WriteString(`{"seq":`)
	w.w.WriteString(fmt.Sprint(seq))
	w.w.WriteString(`,"prompt":`)
	writeInts(w.w, ids)
	for _, f := range []struct{ key, v string }{{"model", w.model}, {"model_name", w.modelName}} {
		if f.v != "" {
			js, _ := json.Marshal(f.v)
			w.w.WriteString(`,"` + f.key + `":`)
			w.w.Write(js)
		}
	}
	w.w.WriteString("}\n")
	return nil
}

// Step writes one step record; Step and GapSteps are written when ≥ 0,
// the top lists and the digest when not empty. Top logits must be finite
// (JSON has no NaN or infinity).
func (w *Writer) Step(s Step) error {
	if w.err != nil {
		return w.err
	}
	w.st.line++
	for _, x := range s.TopLogits {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return w.st.errf("seq %d pos %d: top logit %v is not finite", s.Seq, s.Pos, x)
		}
	}
	if err := w.st.step(s); err != nil {
		return err
	}
	b := w.w
	b.WriteString("{")
	if s.Step >= 0 {
		fmt.Fprintf(b, `"step":%d,`, s.Step)
	}
	fmt.Fprintf(b, `"seq":%d,"pos":%d,"token":%d`, s.Seq, s.Pos, s.Token)
	if len(s.TopIDs) > 0 {
		b.WriteString(`,"top_ids":`)
		writeInts(b, s.TopIDs)
		b.WriteString(`,"top_logits":[`)
		for i, x := range s.TopLogits {
			if i > 0 {
				b.WriteByte(',')
			}
			js, _ := json.Marshal(x)
			b.Write(js)
		}
		b.WriteString("]")
	}
	if s.GapSteps >= 0 {
		fmt.Fprintf(b, `,"gap_steps":%d`, s.GapSteps)
	}
	if s.Digest != "" {
		js, _ := json.Marshal(s.Digest)
		b.WriteString(`,"digest":`)
		b.Write(js)
	}
	b.WriteString("}\n")
	return nil
}

// Flush writes out what is buffered.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

func writeInts(b *bufio.Writer, v []int32) {
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(b, x)
	}
	b.WriteByte(']')
}

// Top returns the indices of the k largest values of logits, larger first,
// lower index first among equals, and their values; NaN and infinite
// values are left out (JSON cannot carry them).
func Top(logits []float32, k int) ([]int32, []float32) {
	k = min(k, len(logits))
	ids := make([]int32, 0, k+1)
	for i, x := range logits {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			continue
		}
		j := len(ids)
		for j > 0 && logits[ids[j-1]] < x {
			j--
		}
		if j >= k {
			continue
		}
		ids = append(ids, 0)
		copy(ids[j+1:], ids[j:])
		ids[j] = int32(i)
		if len(ids) > k {
			ids = ids[:k]
		}
	}
	vals := make([]float32, len(ids))
	for i, id := range ids {
		vals[i] = logits[id]
	}
	return ids, vals
}

// Digest is the digest field of a logits row: the first 16 hex digits of
// sha256 over the row as little-endian float32.
func Digest(logits []float32) string {
	h := sha256.New()
	b := make([]byte, 4*len(logits))
	for i, x := range logits {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
