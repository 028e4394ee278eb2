package dump

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

const good = `{"seq":0,"prompt":[1,2,3]}
{"seq":1,"prompt":[7]}
{"step":0,"seq":0,"pos":2,"token":5,"top_ids":[5,9],"top_logits":[1.5,1.25],"gap_steps":32,"digest":"00ff00ff00ff00ff"}
{"seq":1,"pos":0,"token":4}

{"seq":0,"pos":3,"token":6,"extra":"ignored"}
`

func TestReadGood(t *testing.T) {
	d, err := Read(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := &Dump{Seqs: []*Sequence{
		{Seq: 0, Prompt: []int32{1, 2, 3}, Steps: []Step{
			{Step: 0, Seq: 0, Pos: 2, Token: 5, TopIDs: []int32{5, 9}, TopLogits: []float32{1.5, 1.25}, GapSteps: 32, Digest: "00ff00ff00ff00ff"},
			{Step: -1, Seq: 0, Pos: 3, Token: 6, TopIDs: []int32{}, TopLogits: []float32{}, GapSteps: -1},
		}},
		{Seq: 1, Prompt: []int32{7}, Steps: []Step{{Step: -1, Seq: 1, Pos: 0, Token: 4, TopIDs: []int32{}, TopLogits: []float32{}, GapSteps: -1}}},
	}}
	normalize(d)
	normalize(want)
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	if got := d.Sequence(0).Tokens(); !reflect.DeepEqual(got, []int32{1, 2, 3, 5, 6}) {
		t.Errorf("Tokens = %v", got)
	}
	if d.Sequence(2) != nil {
		t.Error("Sequence(2) of a dump without seq 2 is not nil")
	}
}

// normalize makes empty and nil slices equal for DeepEqual.
func normalize(d *Dump) {
	for _, s := range d.Seqs {
		for i := range s.Steps {
			if len(s.Steps[i].TopIDs) == 0 {
				s.Steps[i].TopIDs = nil
			}
			if len(s.Steps[i].TopLogits) == 0 {
				s.Steps[i].TopLogits = nil
			}
		}
	}
}

func TestReadBad(t *testing.T) {
	p := `{"seq":0,"prompt":[1,2]}` + "\n"
	cases := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"not JSON", p + "hello\n", 2, "not a JSON object"},
		{"truncated", p + `{"seq":0,"pos":1` + "\n", 2, "not a JSON object"},
		{"array", `[1,2]`, 1, "not a JSON object"},
		{"two values", p + `{"seq":0,"pos":1,"token":3} {"seq":0}`, 2, "more than one JSON value"},
		{"wrong type", `{"seq":"0","prompt":[1]}`, 1, `field "seq" is a JSON string`},
		{"no seq", `{"prompt":[1]}`, 1, `without "seq"`},
		{"no pos", p + `{"seq":0,"token":3}`, 2, `without "pos"`},
		{"no token", p + `{"seq":0,"pos":1}`, 2, `without "token"`},
		{"negative token", p + `{"seq":0,"pos":1,"token":-3}`, 2, "token -3 is not a token id"},
		{"huge token", p + `{"seq":0,"pos":1,"token":4294967296}`, 2, "not a token id"},
		{"step before prompt", `{"seq":0,"pos":0,"token":3}` + "\n" + p, 1, "before its prompt record"},
		{"step of another seq", p + `{"seq":1,"pos":1,"token":3}`, 2, "seq 1 before its prompt record"},
		{"first pos wrong", p + `{"seq":0,"pos":2,"token":3}`, 2, "first step has pos 2, want 1"},
		{"out of order", p + `{"seq":0,"pos":1,"token":3}` + "\n" + `{"seq":0,"pos":3,"token":3}`, 3, "pos 3 out of order (previous step had pos 1, want 2)"},
		{"repeated pos", p + `{"seq":0,"pos":1,"token":3}` + "\n" + `{"seq":0,"pos":1,"token":3}`, 3, "pos 1 out of order"},
		{"second prompt", p + p, 2, "second prompt record"},
		{"empty prompt", `{"seq":0,"prompt":[]}`, 1, "empty prompt"},
		{"negative prompt id", `{"seq":0,"prompt":[1,-1]}`, 1, "prompt token -1 is negative"},
		{"negative seq", `{"seq":-1,"prompt":[1]}`, 1, "seq -1 is negative"},
		{"both kinds", `{"seq":0,"prompt":[1],"pos":0,"token":1}`, 1, "not both"},
		{"top lengths", p + `{"seq":0,"pos":1,"token":3,"top_ids":[3],"top_logits":[]}`, 2, "1 top_ids but 0 top_logits"},
		{"negative top id", p + `{"seq":0,"pos":1,"token":3,"top_ids":[-3],"top_logits":[1]}`, 2, "top id -3 is negative"},
		{"empty", "\n\n", 0, "empty dump"},
	}
	for _, c := range cases {
		_, err := Read(strings.NewReader(c.in))
		var de *Error
		if !errors.As(err, &de) {
			t.Errorf("%s: error %v, want a *dump.Error", c.name, err)
			continue
		}
		if de.Line != c.line || !strings.Contains(de.Msg, c.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q (line %d), want line %d containing %q, one line", c.name, err, de.Line, c.line, c.msg)
		}
		if Validate(strings.NewReader(c.in)) == nil {
			t.Errorf("%s: Validate accepts it", c.name)
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	d, err := Read(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, d)
	normalize(d)
	normalize(back)
	if !reflect.DeepEqual(d, back) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, d)
	}
}

// roundTrip writes d with a Writer and reads it back.
func roundTrip(t *testing.T, d *Dump) *Dump {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, s := range d.Seqs {
		w.SetModel(s.Model, s.ModelName)
		if err := w.Prompt(s.Seq, s.Prompt); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range d.Seqs {
		for _, st := range s.Steps {
			if err := w.Step(st); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatalf("Read of the Writer's output: %v\n%s", err, buf.String())
	}
	return back
}

func TestWriterRefuses(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.Step(Step{Seq: 0, Pos: 0, Token: 1}); err == nil || !strings.Contains(err.Error(), "before its prompt") {
		t.Errorf("step before prompt: %v", err)
	}
	if err := w.Prompt(0, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(Step{Seq: 0, Pos: 1, Token: 1}); err == nil || !strings.Contains(err.Error(), "want 0") {
		t.Errorf("wrong first pos: %v", err)
	}
	if err := w.Step(Step{Seq: 0, Pos: 0, Token: 1, TopIDs: []int32{1}, TopLogits: []float32{float32(math.Inf(1))}}); err == nil {
		t.Error("infinite top logit accepted")
	}
	if err := w.Step(Step{Seq: 0, Pos: 0, Token: 1, Step: -1, GapSteps: -1}); err != nil {
		t.Errorf("a good step after refused ones: %v", err)
	}
}

func TestTop(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	ids, vals := Top([]float32{1, 3, nan, 3, inf, 2, -1}, 3)
	if !reflect.DeepEqual(ids, []int32{1, 3, 5}) || !reflect.DeepEqual(vals, []float32{3, 3, 2}) {
		t.Errorf("Top = %v %v", ids, vals)
	}
	if ids, _ := Top([]float32{1, 2}, 5); !reflect.DeepEqual(ids, []int32{1, 0}) {
		t.Errorf("Top with k > len = %v", ids)
	}
}

func TestDigest(t *testing.T) {
	// sha256 of the 8 bytes 00 00 80 3f 00 00 00 40 (1.0, 2.0 little-endian).
	if got := Digest([]float32{1, 2}); got != "b9c80b5adeca4507" {
		t.Errorf("Digest = %s", got)
	}
}

func ExampleWriter() {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Prompt(0, []int32{9707, 11})
	w.Step(Step{Step: 0, Seq: 0, Pos: 1, Token: 1879, GapSteps: -1})
	w.Step(Step{Step: 1, Seq: 0, Pos: 2, Token: 0, TopIDs: []int32{0, 7}, TopLogits: []float32{12.5, 11.75}, GapSteps: 6})
	w.Flush()
	fmt.Print(buf.String())
	// Output:
	// {"seq":0,"prompt":[9707,11]}
	// {"step":0,"seq":0,"pos":1,"token":1879}
	// {"step":1,"seq":0,"pos":2,"token":0,"top_ids":[0,7],"top_logits":[12.5,11.75],"gap_steps":6}
}

// A line longer than the reader's buffer (a long prompt) reads whole.
func TestReadLongLine(t *testing.T) {
	ids := make([]string, 30000)
	for i := range ids {
		ids[i] = "151643"
	}
	in := `{"seq":0,"prompt":[` + strings.Join(ids, ",") + "]}\n" + `{"seq":0,"pos":29999,"token":1}`
	d, err := Read(strings.NewReader(in))
	if err != nil || len(d.Seqs[0].Prompt) != 30000 || len(d.Seqs[0].Steps) != 1 {
		t.Fatalf("%v", err)
	}
}

// The model identity of the prompt records (issue 33: a dump judged
// against a model it was not made with must say so).
func TestModelIdentity(t *testing.T) {
	const with = `{"seq":0,"prompt":[1,2],"model":"sha256:0123456789abcdef","model_name":"synth tiny seed 1"}
{"seq":1,"prompt":[3]}
{"seq":2,"prompt":[4],"model":"sha256:0123456789abcdef"}
{"seq":0,"pos":1,"token":5}
`
	d, err := Read(strings.NewReader(with))
	if err != nil {
		t.Fatal(err)
	}
	if d.Model != "sha256:0123456789abcdef" || d.ModelName != "synth tiny seed 1" || d.Seqs[1].Model != "" {
		t.Errorf("model %q name %q, seq 1's %q", d.Model, d.ModelName, d.Seqs[1].Model)
	}
	old, _ := Read(strings.NewReader(good)) // an older dump: no model
	if old.Model != "" {
		t.Errorf("older dump: model %q", old.Model)
	}
	_, err = Read(strings.NewReader(with + `{"seq":3,"prompt":[4],"model":"sha256:fedcba9876543210"}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 5: seq 3: model sha256:fedcba9876543210 differs from seq 0's model sha256:0123456789abcdef") {
		t.Errorf("two models: %v", err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.SetModel("sha256:0123456789abcdef", `synth "x"`)
	w.Prompt(0, []int32{1})
	w.Flush()
	if got := buf.String(); got != `{"seq":0,"prompt":[1],"model":"sha256:0123456789abcdef","model_name":"synth \"x\""}`+"\n" {
		t.Errorf("written: %s", got)
	}
	w = NewWriter(&bytes.Buffer{})
	w.SetModel("a", "")
	w.Prompt(0, []int32{1})
	w.SetModel("b", "")
	if err := w.Prompt(1, []int32{1}); err == nil || !strings.Contains(err.Error(), "a dump is of one model") {
		t.Errorf("Writer with two models: %v", err)
	}
}
