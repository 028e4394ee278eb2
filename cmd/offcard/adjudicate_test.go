package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

const (
	adjPrompt = "1,2,3"
	adjSteps  = 30
	adjVocab  = 512 // the tiny preset
)

// adjFixture is ref's own generation on the tiny model (seed 1): its dump
// and the logits row of every step.
type adjFixture struct {
	dir  string
	d    *dump.Dump
	rows [][]float32
}

func newAdjFixture(t *testing.T) *adjFixture {
	t.Helper()
	f := &adjFixture{dir: t.TempDir()}
	f.d, f.rows = f.generate(t, adjPrompt, adjSteps)
	return f
}

// generate runs `offcard generate` and returns its dump and the logits
// rows of its steps.
func (f *adjFixture) generate(t *testing.T, promptIDs string, steps int) (*dump.Dump, [][]float32) {
	t.Helper()
	dp, lp := filepath.Join(f.dir, "gen.jsonl"), filepath.Join(f.dir, "gen.f32")
	if code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--seed", "1", "--prompt-ids", promptIDs, "--steps", strconv.Itoa(steps), "--dump", dp, "--logits-out", lp); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errs)
	}
	d := readDumpFile(t, dp)
	raw, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]float32
	for off := 0; off < len(raw); off += 4 * adjVocab {
		row := make([]float32, adjVocab)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[off+4*i:]))
		}
		all = append(all, row)
	}
	// Rows: every prompt position, then the decode steps; step i's row is
	// the one of pos len(prompt)-1+i.
	return d, all[len(d.Seqs[0].Prompt)-1:]
}

func readDumpFile(t *testing.T, path string) *dump.Dump {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := dump.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// flipped is ref's run with the token of step k replaced by tok: with
// regen, the steps after k are ref's greedy continuation of the changed
// prefix (an engine that flipped there); without, they are the original's.
func (f *adjFixture) flipped(t *testing.T, k int, tok int32, regen bool) *dump.Sequence {
	t.Helper()
	orig := f.d.Seqs[0]
	s := &dump.Sequence{Seq: 0, Prompt: orig.Prompt, Steps: slices.Clone(orig.Steps)}
	s.Steps[k].Token = tok
	if regen && k+1 < len(s.Steps) {
		prefix := s.Tokens()[:len(s.Prompt)+k+1]
		ids := make([]string, len(prefix))
		for i, id := range prefix {
			ids[i] = strconv.Itoa(int(id))
		}
		cont, _ := f.generate(t, strings.Join(ids, ","), len(s.Steps)-k-1)
		for i, st := range cont.Seqs[0].Steps {
			s.Steps[k+1+i].Token = st.Token
		}
	}
	return s
}

func writeDumpFile(t *testing.T, path string, seqs ...*dump.Sequence) string {
	t.Helper()
	var buf bytes.Buffer
	w := dump.NewWriter(&buf)
	for _, s := range seqs {
		if err := w.Prompt(s.Seq, s.Prompt); err != nil {
			t.Fatal(err)
		}
		for _, st := range s.Steps {
			st.Seq = s.Seq
			if err := w.Step(st); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func rankOrder(row []float32) []int32 {
	ids := make([]int32, len(row))
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return row[ids[a]] > row[ids[b]] })
	return ids
}

func adjJSON(t *testing.T, out string) adjDoc {
	t.Helper()
	var doc adjDoc
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("--json output is not the document: %v\n%s", err, out)
	}
	return doc
}

func TestAdjudicateOwnGenerationClean(t *testing.T) {
	f := newAdjFixture(t)
	a := writeDumpFile(t, filepath.Join(f.dir, "a.jsonl"), f.d.Seqs...)
	code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--synth", "tiny", "--seed", "1")
	if code != 0 || !strings.Contains(out, "seq 0: 30 positions, 30 agree, 0 near-ties, 0 divergences: clean\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// Against another model the same stream is not clean: the verdict
	// depends on the teacher.
	if code, out, _ := runCLI(t, "adjudicate", "--ours", a, "--synth", "tiny", "--seed", "2"); code == 0 && strings.Contains(out, "30 agree") {
		t.Fatalf("seed 2 teacher agrees everywhere with seed 1's stream:\n%s", out)
	}
	// Its own dump as the oracle: clean too.
	if code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--oracle", a); code != 0 || !strings.Contains(out, "30 agree") {
		t.Fatalf("--oracle itself: exit %d\n%s%s", code, out, errs)
	}
}

// ref's runner-up at a step whose top-2 gap is inside the band, and ref's
// continuation after it: a near-tie, exit 0; the tokens after the flip
// differ from ref's free run (the cascade), and teacher forcing judges
// them all agree.
func TestAdjudicateNearTie(t *testing.T) {
	f := newAdjFixture(t)
	k := -1
	for i := 5; i < adjSteps-5; i++ {
		rk := rankOrder(f.rows[i])
		if g := f.rows[i][rk[0]] - f.rows[i][rk[1]]; g > 0 && g <= 0.5 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no step with a top-2 gap inside the band")
	}
	runnerUp := rankOrder(f.rows[k])[1]
	s := f.flipped(t, k, runnerUp, true)
	cascade := 0
	for i := k + 1; i < adjSteps; i++ {
		if s.Steps[i].Token != f.d.Seqs[0].Steps[i].Token {
			cascade++
		}
	}
	if cascade == 0 {
		t.Fatal("the flip changed nothing after it: the test would show nothing")
	}
	b := writeDumpFile(t, filepath.Join(f.dir, "b.jsonl"), s)
	pos := s.Steps[k].Pos
	code, out, errs := runCLI(t, "adjudicate", "--ours", b, "--synth", "tiny", "--seed", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
	}
	doc := adjJSON(t, out)
	sq := doc.Sequences[0]
	if sq.Verdict != "clean" || sq.NearTies != 1 || sq.Agree != adjSteps-1 || sq.FirstDifference == nil || sq.FirstDifference.Pos != pos ||
		sq.FirstDifference.Rank != 2 || sq.FirstDifference.Verdict != "near-tie" || sq.FirstDivergence != nil || len(sq.Judged) != adjSteps {
		t.Fatalf("flip to the runner-up at pos %d: %+v", pos, sq)
	}
	// Against ref's free-running dump as the oracle: the first difference
	// is the same near-tie; nothing after it can be judged.
	a := writeDumpFile(t, filepath.Join(f.dir, "a.jsonl"), f.d.Seqs...)
	code, out, errs = runCLI(t, "adjudicate", "--ours", b, "--oracle", a)
	if code != 0 || !strings.Contains(out, "clean, first near-tie at pos "+strconv.Itoa(pos)+": near-tie") || !strings.Contains(out, "not judged") {
		t.Fatalf("--oracle: exit %d\n%s%s", code, out, errs)
	}
}

// A token outside ref's top 20 (and beyond the band) at one step: a
// divergence at exactly that position, exit 1, in text, JSON and the plot.
func TestAdjudicateFarDivergence(t *testing.T) {
	f := newAdjFixture(t)
	const k = 17
	row := f.rows[k]
	rk := rankOrder(row)
	var tok int32 = -1
	for _, id := range rk[20:] {
		if float64(row[rk[0]]-row[id]) > 0.5 {
			tok = id
			break
		}
	}
	if tok < 0 {
		t.Fatal("no token outside the top 20 beyond the band")
	}
	pos := f.d.Seqs[0].Steps[k].Pos
	for _, regen := range []bool{true, false} {
		s := f.flipped(t, k, tok, regen)
		b := writeDumpFile(t, filepath.Join(f.dir, "b.jsonl"), s)
		svg := filepath.Join(f.dir, "gap.svg")
		code, out, errs := runCLI(t, "adjudicate", "--ours", b, "--synth", "tiny", "--plot", svg)
		want := "DIVERGENT, first divergence at pos " + strconv.Itoa(pos) + ": far " + strconv.Itoa(int(tok)) + ", rank "
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "0 clean, 1 divergent") {
			t.Fatalf("regen %v: exit %d, want 1 and %q\n%s%s", regen, code, want, out, errs)
		}
		if regen && !strings.Contains(out, "29 agree, 0 near-ties, 1 divergences") {
			t.Fatalf("with ref's continuation, only the flip diverges:\n%s", out)
		}
		doc, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		root, text := parseSVG(t, doc)
		if root != "svg" || !strings.Contains(text, " pos "+strconv.Itoa(pos)) {
			t.Fatalf("plot: root %q, text %q", root, text)
		}
		code, out, _ = runCLI(t, "adjudicate", "--ours", b, "--synth", "tiny", "--json")
		j := adjJSON(t, out)
		if fd := j.Sequences[0].FirstDivergence; code != 1 || j.Divergent != 1 || j.Synth != "tiny" || j.Seed != "1" || j.Oracle != "" || fd == nil || fd.Pos != pos || fd.Verdict != "far" || fd.Rank <= 20 || *fd.GapNats <= 0.5 {
			t.Fatalf("--json: exit %d, %+v", code, j.Sequences[0].FirstDivergence)
		}
	}
}

// parseSVG checks that doc is XML and returns its root element and the
// text of its <text> elements.
func parseSVG(t *testing.T, doc []byte) (string, string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	root, in := "", false
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return root, text.String()
		}
		if err != nil {
			t.Fatalf("the plot is not XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
			}
			in = e.Name.Local == "text"
		case xml.CharData:
			if in {
				text.Write(e)
			}
		case xml.EndElement:
			in = false
		}
	}
}

func TestAdjudicateBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	os.WriteFile(good, []byte(`{"seq":0,"prompt":[1,2]}`+"\n"+`{"seq":0,"pos":1,"token":3}`+"\n"), 0o644)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no ours", []string{"--synth", "tiny"}, "need --ours"},
		{"no teacher", []string{"--ours", good}, "need one teacher"},
		{"two teachers", []string{"--ours", good, "--oracle", good, "--synth", "tiny"}, "need one teacher"},
		{"missing file", []string{"--ours", filepath.Join(dir, "nope"), "--synth", "tiny"}, "no such file"},
		{"not JSON", []string{"--ours", write("nj", "{\"seq\":0,\"prompt\":[1]}\nhello\n"), "--synth", "tiny"}, "line 2: not a JSON object"},
		{"missing token", []string{"--ours", write("mt", "{\"seq\":0,\"prompt\":[1]}\n{\"seq\":0,\"pos\":0}\n"), "--synth", "tiny"}, `without "token"`},
		{"out of order", []string{"--ours", write("oo", "{\"seq\":0,\"prompt\":[1]}\n{\"seq\":0,\"pos\":0,\"token\":1}\n{\"seq\":0,\"pos\":2,\"token\":1}\n"), "--synth", "tiny"}, "line 3: seq 0: pos 2 out of order"},
		{"step without prompt", []string{"--ours", write("sp", "{\"seq\":0,\"pos\":0,\"token\":1}\n"), "--synth", "tiny"}, "before its prompt record"},
		{"bad oracle", []string{"--ours", good, "--oracle", write("bo", "[]")}, "--oracle"},
		{"oracle lacks seq", []string{"--ours", good, "--oracle", write("ol", "{\"seq\":1,\"prompt\":[1,2]}\n")}, "not in the oracle"},
		{"outside vocab", []string{"--ours", write("ov", "{\"seq\":0,\"prompt\":[1]}\n{\"seq\":0,\"pos\":0,\"token\":512}\n"), "--synth", "tiny"}, "outside the model's vocabulary of 512"},
		{"band 0", []string{"--ours", good, "--synth", "tiny", "--band", "0"}, "--band"},
		{"band NaN", []string{"--ours", good, "--synth", "tiny", "--band", "NaN"}, "--band"},
		{"top 0", []string{"--ours", good, "--synth", "tiny", "--top", "0"}, "--top"},
		{"prompt without tokenizer", []string{"--ours", good, "--synth", "tiny", "--prompt", "hi"}, "needs a tokenizer"},
		{"plot dir missing", []string{"--ours", good, "--synth", "tiny", "--plot", filepath.Join(dir, "no", "p.svg")}, "no such file"},
		{"unknown preset", []string{"--ours", good, "--synth", "huge"}, "unknown model preset"},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, append([]string{"adjudicate"}, c.args...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.msg) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.name, code, out, errs, c.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); err == nil {
		t.Error("a failed --plot left a directory")
	}
	if code, _, _ := runCLI(t, "adjudicate", "--help"); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
}

// A checkpoint directory with the real Qwen3 tokenizer: --prompt TEXT
// works and tokens are shown as text. The model is the tiny shape with
// the first 16384 ids of Qwen3's vocabulary, enough for "Hello world"
// (the full 151936 costs seconds of synthesis for nothing).
func TestAdjudicateModelDirText(t *testing.T) {
	tok := realTokenizer(t)
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.VocabSize = 16384 // > 9707 and 1879, the ids of "Hello world"
	w, err := qwen3.Synth(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Export(dir); err != nil {
		t.Fatal(err)
	}
	if err := copyFileAtomic(tok, filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.jsonl")
	if code, _, errs := runCLI(t, "generate", "--model", dir, "--prompt", "Hello world", "--steps", "6", "--dump", a); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--model", dir, "--prompt", "Hello world")
	if code != 0 || !strings.Contains(out, "6 agree") || !strings.Contains(out, `prompt "Hello world"`) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// Flip the last token to another one: shown with its text.
	d := readDumpFile(t, a)
	s := d.Seqs[0]
	s.Steps[5].Token = 9707 // "Hello"
	b := writeDumpFile(t, filepath.Join(dir, "b.jsonl"), s)
	code, out, _ = runCLI(t, "adjudicate", "--ours", b, "--model", dir, "--json")
	j := adjJSON(t, out)
	p := j.Sequences[0].FirstDifference
	if code == 2 || p == nil || p.Text == nil || *p.Text != "Hello" || p.TeacherText == nil || j.Sequences[0].PromptText == nil || *j.Sequences[0].PromptText != "Hello world" {
		t.Fatalf("exit %d: %+v", code, p)
	}
	if code, _, errs := runCLI(t, "adjudicate", "--ours", a, "--model", dir, "--prompt", "Goodbye"); code != 2 || !strings.Contains(errs, "not --prompt's") {
		t.Fatalf("another prompt: exit %d: %s", code, errs)
	}
}

// `offcard sim --dump` writes the engine's tokens; ref adjudicates them
// clean (the engine on sim is bit-exact with ref).
func TestSimDumpAdjudicatesClean(t *testing.T) {
	dp := filepath.Join(t.TempDir(), "sim.jsonl")
	if code, out, errs := runCLI(t, "sim", "--batch", "2", "--prompt-len", "30", "--steps", "6", "--dump", dp); code != 0 {
		t.Fatalf("sim: exit %d\n%s%s", code, out, errs)
	}
	d := readDumpFile(t, dp)
	// Sequence i: prompt 30+i, finishes after max(6-2i, 1) decode steps;
	// the prefill gives one token more.
	if len(d.Seqs) != 2 || len(d.Seqs[0].Prompt) != 30 || len(d.Seqs[1].Prompt) != 31 || len(d.Seqs[0].Steps) != 7 || len(d.Seqs[1].Steps) != 5 {
		t.Fatalf("dump: %d sequences", len(d.Seqs))
	}
	if code, out, errs := runCLI(t, "adjudicate", "--ours", dp, "--synth", "tiny", "--seed", "1"); code != 0 || !strings.Contains(out, "2 clean, 0 divergent") {
		t.Fatalf("adjudicate: exit %d\n%s%s", code, out, errs)
	}
}

// flipSUT is an engine that, at every block start, emits the token ref
// likes least: check fails, --dump writes the failing case's tokens, and
// adjudicate finds a far divergence at a block start.
type flipSUT struct {
	proptest.SUT
	bs int
}

type flipDecoder struct {
	qwen3.Decoder
	bs int
}

func (s flipSUT) Decoder() qwen3.Decoder { return flipDecoder{s.SUT.Decoder(), s.bs} }

func (d flipDecoder) flip(o []qwen3.Output) []qwen3.Output {
	for i := range o {
		if o[i].Pos > 0 && o[i].Pos%d.bs == 0 {
			worst := 0
			for k, x := range o[i].Logits {
				if x < o[i].Logits[worst] {
					worst = k
				}
			}
			o[i].Token = int32(worst)
		}
	}
	return o
}

func (d flipDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	o, err := d.Decoder.Prefill(p)
	return d.flip(o), err
}

func (d flipDecoder) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := d.Decoder.Decode(b)
	return d.flip(o), err
}

func TestCheckDump(t *testing.T) {
	dir := t.TempDir()
	dp := filepath.Join(dir, "fail.jsonl")
	// Every case passes: nothing written.
	code, out, errs := runCLI(t, "check", "--cases", "1", "--seed", "3", "--dump", dp)
	if _, err := os.Stat(dp); code != 0 || err == nil || !strings.Contains(out, "no dump written") {
		t.Fatalf("passing check: exit %d, file %v\n%s%s", code, err, out, errs)
	}
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return flipSUT{s, sc.BlockSize}, err
	}
	code, out, errs = runCLI(t, "check", "--cases", "1", "--seed", "3", "--dump", dp)
	i := strings.Index(out, "judge it: ")
	if code != 1 || i < 0 {
		t.Fatalf("failing check: exit %d\n%s%s", code, out, errs)
	}
	cmd := strings.Fields(strings.SplitN(out[i+len("judge it: "):], "\n", 2)[0])
	if len(cmd) < 2 || cmd[0] != "offcard" || cmd[1] != "adjudicate" {
		t.Fatalf("command %q", cmd)
	}
	code, out, errs = runCLI(t, append(cmd[1:], "--json")...)
	if code != 1 {
		t.Fatalf("%v: exit %d, want 1\n%s%s", cmd, code, out, errs)
	}
	doc := adjJSON(t, out)
	for _, s := range doc.Sequences {
		if fd := s.FirstDivergence; fd != nil && (fd.Verdict != "far" || (fd.Pos%32 != 0 && fd.Pos%64 != 0)) {
			t.Fatalf("seq %d: first divergence %+v, want far at a block start", s.Seq, fd)
		}
	}
}

// tolerantFlipSUT is checked in the tolerant mode: its logits are off by
// a little everywhere (not bit-exact, within tolerance) and its token at
// every block start is ref's worst. check --dump must re-run it tolerant,
// or the dump would stop at its first output.
type tolerantFlipSUT struct{ flipSUT }

func (tolerantFlipSUT) Tolerance() proptest.Tolerance { return proptest.DefaultTolerance }

func (s tolerantFlipSUT) Decoder() qwen3.Decoder { return nudgeDecoder{s.flipSUT.Decoder()} }

type nudgeDecoder struct{ qwen3.Decoder }

// nudge moves the smallest logit down one bf16 step (never the argmax).
func nudge(o []qwen3.Output) []qwen3.Output {
	for i := range o {
		worst := 0
		for k, x := range o[i].Logits {
			if x < o[i].Logits[worst] {
				worst = k
			}
		}
		b := math.Float32bits(o[i].Logits[worst])
		if b&0xffff == 0 && o[i].Logits[worst] != 0 {
			o[i].Logits[worst] = math.Float32frombits(b + 1<<16) // away from zero: one bf16 step
		}
	}
	return o
}

func (d nudgeDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	o, err := d.Decoder.Prefill(p)
	return nudge(o), err
}

func (d nudgeDecoder) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := d.Decoder.Decode(b)
	return nudge(o), err
}

func TestCheckDumpTolerant(t *testing.T) {
	dp := filepath.Join(t.TempDir(), "tol.jsonl")
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return tolerantFlipSUT{flipSUT{s, sc.BlockSize}}, err
	}
	code, out, errs := runCLI(t, "check", "--cases", "1", "--seed", "3", "--dump", dp)
	i := strings.Index(out, "judge it: ")
	if code != 1 || i < 0 {
		t.Fatalf("failing check: exit %d\n%s%s", code, out, errs)
	}
	cmd := strings.Fields(strings.SplitN(out[i+len("judge it: "):], "\n", 2)[0])
	code, out, errs = runCLI(t, append(cmd[1:], "--json")...)
	doc := adjJSON(t, out)
	if code != 1 || doc.Divergent == 0 {
		t.Fatalf("%v: exit %d, want 1 (the dump ends before the flip?)\n%s%s", cmd, code, out, errs)
	}
}
