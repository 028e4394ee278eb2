package adjudicate

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// tinyWeights is the synthetic tiny model, seed 1.
func tinyWeights(t testing.TB) *qwen3.Weights {
	t.Helper()
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := qwen3.Synth(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// generate runs ref greedily from prompt for n steps, except that at the
// positions in force our token is the given one instead of ref's choice
// (a card that flipped there); the continuation after a forced token is
// ref's greedy choice on the modified prefix. It returns the dump sequence
// and ref's logits row at every step.
func generate(t testing.TB, w *qwen3.Weights, prompt []int32, n int, force map[int]int32) (*dump.Sequence, [][]float32) {
	t.Helper()
	dec, err := ref.New(w, ref.Options{NumBlocks: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	blocks := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	outs, err := dec.Prefill(qwen3.Prefill{Seq: 0, Tokens: prompt, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	s := &dump.Sequence{Seq: 0, Prompt: prompt}
	var rows [][]float32
	o := outs[len(outs)-1]
	for i := range n {
		rows = append(rows, slices.Clone(o.Logits))
		tok := o.Token
		if f, ok := force[o.Pos]; ok {
			tok = f
		}
		s.Steps = append(s.Steps, dump.Step{Step: i, Pos: o.Pos, Token: tok, GapSteps: -1})
		if i == n-1 {
			break
		}
		got, err := dec.Decode([]qwen3.Step{{Seq: 0, Token: tok, Pos: o.Pos + 1, Blocks: blocks}})
		if err != nil {
			t.Fatal(err)
		}
		o = got[0]
	}
	return s, rows
}

// ranked returns the token ids of row, best first.
func ranked(row []float32) []int32 {
	ids := make([]int32, len(row))
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return row[ids[a]] > row[ids[b]] })
	return ids
}

func forceSeq(t testing.TB, w *qwen3.Weights, s *dump.Sequence, opt Options) Report {
	t.Helper()
	d := &dump.Dump{Seqs: []*dump.Sequence{s}}
	teacher, err := NewTeacher(w, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	r, err := Force(teacher, s, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var prompt = []int32{1, 2, 3}

const steps = 40

func TestForceOwnGenerationClean(t *testing.T) {
	w := tinyWeights(t)
	s, _ := generate(t, w, prompt, steps, nil)
	r := forceSeq(t, w, s, Options{})
	if len(r.Positions) != steps || r.FirstDifference() != nil {
		t.Fatalf("ref's own generation: %d positions, first difference %+v", len(r.Positions), r.FirstDifference())
	}
	for i, p := range r.Positions {
		if p.Pos != len(prompt)-1+i || p.Rank != 1 || p.GapNats != 0 {
			t.Fatalf("position %d: %+v", i, p)
		}
	}
}

// A flip to ref's runner-up where the gap is inside the band, followed by
// ref's own continuation of that prefix: a near-tie there and nothing else,
// although the tokens after the flip differ from ref's free run (the
// cascade teacher forcing stops).
func TestForceNearTieStopsCascade(t *testing.T) {
	w := tinyWeights(t)
	free, rows := generate(t, w, prompt, steps, nil)
	opt := Options{Band: 0.5} // the default band: about one position in eight of the tiny model has its top-2 gap inside it
	flip := -1
	for i, row := range rows[5:] {
		rk := ranked(row)
		if g := float64(row[rk[0]] - row[rk[1]]); g > 0 && g <= opt.Band {
			flip = i + 5
			break
		}
	}
	if flip < 0 {
		t.Fatal("no position with a top-2 gap inside the band")
	}
	pos := free.Steps[flip].Pos
	runnerUp := ranked(rows[flip])[1]
	ours, _ := generate(t, w, prompt, steps, map[int]int32{pos: runnerUp})
	cascade := 0
	for i := flip + 1; i < steps; i++ {
		if ours.Steps[i].Token != free.Steps[i].Token {
			cascade++
		}
	}
	if cascade == 0 {
		t.Fatalf("the flip at pos %d did not change the continuation: the test shows nothing", pos)
	}
	r := forceSeq(t, w, ours, opt)
	for i, p := range r.Positions {
		want := Agree
		if i == flip {
			want = NearTie
		}
		if p.Verdict != want {
			t.Fatalf("pos %d: %v (%+v), want %v (flip at pos %d)", p.Pos, p.Verdict, p, want, pos)
		}
	}
	if p := r.Positions[flip]; p.Rank != 2 || p.Token != runnerUp || p.TeacherTop != free.Steps[flip].Token {
		t.Fatalf("flip: %+v", p)
	}
	// Without teacher forcing (ours against ref's free run), the streams
	// part at the flip and nothing after it can be judged.
	cr, err := Compare(&dump.Dump{Seqs: []*dump.Sequence{ours}}, &dump.Dump{Seqs: []*dump.Sequence{free}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(cr[0].Positions) != flip+1 || cr[0].Note == "" {
		t.Fatalf("compare judged %d positions (note %q), want %d", len(cr[0].Positions), cr[0].Note, flip+1)
	}
	t.Logf("flip at pos %d to the runner-up (gap %.4g nats); %d later tokens differ from ref's free run, all agree under teacher forcing", pos, r.Positions[flip].GapNats, cascade)
}

// A token outside ref's top 20 at one position: a far divergence there and
// nowhere else, with the default band.
func TestForceFarDivergence(t *testing.T) {
	w := tinyWeights(t)
	_, rows := generate(t, w, prompt, steps, nil)
	const at = 17
	rk := ranked(rows[at])
	// The lowest-ranked token whose gap is beyond the default band.
	var bad int32 = -1
	for _, id := range slices.Backward(rk[DefaultTopK:]) {
		if float64(rows[at][rk[0]]-rows[at][id]) > DefaultBand {
			bad = id
			break
		}
	}
	if bad < 0 {
		t.Fatal("no token beyond the band")
	}
	pos := len(prompt) - 1 + at
	ours, _ := generate(t, w, prompt, steps, map[int]int32{pos: bad})
	r := forceSeq(t, w, ours, Options{})
	fb := r.FirstBad()
	if fb == nil || fb.Pos != pos || fb.Verdict != Far || fb.Rank <= DefaultTopK {
		t.Fatalf("first bad %+v, want far at pos %d", fb, pos)
	}
	for _, p := range r.Positions {
		if p.Pos != pos && p.Verdict != Agree {
			t.Fatalf("pos %d: %+v, want agree", p.Pos, p)
		}
	}
	// The same token, band wider than its gap: a near-tie.
	r = forceSeq(t, w, ours, Options{Band: math.Inf(1)})
	if r.Bad() {
		t.Fatalf("infinite band: %+v", r.FirstBad())
	}
}

func TestForceRefusesOutsideVocab(t *testing.T) {
	w := tinyWeights(t)
	s, _ := generate(t, w, prompt, 3, nil)
	s.Steps[1].Token = int32(w.Config.VocabSize)
	d := &dump.Dump{Seqs: []*dump.Sequence{s}}
	teacher, err := NewTeacher(w, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	if _, err := Force(teacher, s, Options{}); err == nil {
		t.Fatal("a token outside the vocabulary was judged")
	}
}

func TestForceAllProgress(t *testing.T) {
	w := tinyWeights(t)
	a, _ := generate(t, w, prompt, 4, nil)
	b, _ := generate(t, w, []int32{5}, 3, nil)
	b.Seq = 1
	d := &dump.Dump{Seqs: []*dump.Sequence{a, b}}
	teacher, err := NewTeacher(w, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	var seen []int
	rs, err := ForceAll(teacher, d, Options{}, func(done, total int) {
		if total != 7 {
			t.Fatalf("total %d, want 7", total)
		}
		seen = append(seen, done)
	})
	if err != nil || len(rs) != 2 || AnyBad(rs) || !slices.Equal(seen, []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("%v, %d reports, progress %v", err, len(rs), seen)
	}
}
