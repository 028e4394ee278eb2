package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/offcard/offcard/adjudicate"
	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/internal/inputfile"
	"github.com/offcard/offcard/internal/membudget"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/qwen3/tokenizer"
)

func init() {
	commands["adjudicate"] = command{"judge a token dump against ref (teacher-forced) or an oracle dump: near-tie or divergence", runAdjudicate}
}

// adjHelp follows the synopsis in offcard help adjudicate.
const adjHelp = `

Every generated position is judged on the dump's own prefix (teacher forcing,
one pass through the teacher's cache): agree, near-tie (gap within --band) or
divergence (far beyond --top). A gap is given in nats and in bf16 steps:
between two logits of the same sign, the number of bf16 values between them;
across zero (opposite signs, or one of them 0), the gap in steps of the larger
magnitude, ⌈|a − b| / spacing of bf16 values at the larger⌉: 0.5 and -0.2646
are 196 steps apart (counting every bf16 value between them, most of them tiny
numbers near 0, gave 32,135).

A dump that names its model (offcard's dumps do) is judged only against that
model; positions past the model's max_position_embeddings are refused.
Exit 0: every difference a near-tie; 1: a divergence; 2: bad input.
`

// adjShown is the number of non-agreeing positions listed under a
// sequence's summary line (--json lists every position).
const adjShown = 10

func runAdjudicate(e *env, args []string) error {
	fs := newFlags(e, "adjudicate", "--ours A.jsonl (--oracle B.jsonl | --model DIR | --synth NAME --seed N) [--band NATS] [--top K] [--plot OUT.svg] [--json] [--prompt TEXT] [--tokenizer FILE] [--threads N]"+adjHelp)
	oursPath := fs.String("ours", "", "our dump `A.jsonl` (the engine under judgement)")
	oraclePath := fs.String("oracle", "", "an oracle's dump `B.jsonl` of the same prompts: compare the first differing token per sequence (no model needed)")
	m := modelFlags{e: e, cmd: "adjudicate"}
	m.register(fs)
	band := fs.Float64("band", adjudicate.DefaultBand, "near-tie band in `NATS`: a token whose gap to the teacher's top is within it is a near-tie")
	top := fs.Int("top", adjudicate.DefaultTopK, "a divergence whose token is outside the teacher's top `K` is far")
	plotPath := fs.String("plot", "", "write the gap over positions per sequence to `OUT.svg`")
	asJSON := fs.Bool("json", false, "print one JSON document with every judged position")
	prompt := fs.String("prompt", "", "the prompt `TEXT` the dump was made from: checked against every prompt record (needs a tokenizer)")
	tokPath := fs.String("tokenizer", "", "tokenizer.json `FILE` to show tokens as text (default DIR/tokenizer.json with --model)")
	threads := fs.Int("threads", 0, "worker threads of the teacher (0: GOMAXPROCS)")
	if err := fs.parse(args); err != nil {
		return err
	}
	switch {
	case *oursPath == "":
		return bad("need --ours A.jsonl")
	case (*oraclePath != "") == (m.dir != "" || m.synth != ""):
		return bad("need one teacher: --oracle B.jsonl, --model DIR or --synth NAME")
	case !(*band > 0) || math.IsInf(*band, 0):
		return bad("--band must be a positive number of nats, got %v", *band)
	case *top < 1:
		return bad("--top must be ≥ 1, got %d", *top)
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	opt := adjudicate.Options{Band: *band, TopK: *top}
	ours, err := readDump("--ours", *oursPath)
	if err != nil {
		return err
	}

	var tok *tokenizer.Tokenizer
	if *tokPath == "" && m.dir != "" {
		if p := filepath.Join(m.dir, "tokenizer.json"); fileExists(p) {
			*tokPath = p
		}
	}
	if *tokPath != "" {
		if tok, err = tokenizer.Load(*tokPath); err != nil {
			return badInput{err}
		}
	}
	if *prompt != "" {
		if tok == nil {
			return bad("--prompt needs a tokenizer: --model DIR with tokenizer.json, or --tokenizer FILE")
		}
		ids := tok.Encode(*prompt)
		for _, s := range ours.Seqs {
			if !slices.Equal(s.Prompt, ids) {
				return bad("--ours: seq %d's prompt (%d tokens) is not --prompt's %d tokens %s", s.Seq, len(s.Prompt), len(ids), joinIDs(ids))
			}
		}
	}

	var plotFile *atomicFile
	if *plotPath != "" {
		if plotFile, err = createAtomic(*plotPath); err != nil {
			return err
		}
		defer plotFile.Abort()
	}

	var reps []adjudicate.Report
	var teacher string
	if *oraclePath != "" {
		oracle, err := readDump("--oracle", *oraclePath)
		if err != nil {
			return err
		}
		if ours.Model != "" && oracle.Model != "" && ours.Model != oracle.Model {
			return bad("--ours %s and --oracle %s were not made with the same model: %s, and %s", *oursPath, *oraclePath, modelText(ours), modelText(oracle))
		}
		if reps, err = adjudicate.Compare(ours, oracle, opt); err != nil {
			return bad("%v", err)
		}
		teacher = "oracle dump " + *oraclePath
	} else {
		w, err := m.load(func(s string) { fmt.Fprintf(e.stderr, "offcard adjudicate: %s\n", s) })
		if err != nil {
			return err
		}
		defer w.Close()
		if ours.Model != "" {
			if d := w.Digest(); d != ours.Model {
				return bad("--ours %s was not made with this model: it names %s; the teacher is %s (%s)", *oursPath, modelText(ours), m.name(), d)
			}
		}
		vocab := w.Config.VocabSize
		for _, s := range ours.Seqs {
			for i, t := range s.Tokens() {
				if int(t) >= vocab {
					return bad("--ours %s: seq %d has token %d (stream index %d) outside the model's vocabulary of %d", dumpRecordLine(*oursPath, s, i), s.Seq, t, i, vocab)
				}
			}
		}
		if err := teacherFits(w.Config, ours, *threads); err != nil {
			return err
		}
		dec, err := adjudicate.NewTeacher(w, ours, *threads)
		if err != nil {
			return err
		}
		defer dec.Close()
		total := 0
		for _, s := range ours.Seqs {
			total += len(s.Steps)
		}
		prog := newProgress(e, "adjudicate: positions", total)
		reps, err = adjudicate.ForceAll(dec, ours, opt, func(done, _ int) { prog.update(done) })
		prog.done()
		if err != nil {
			return err
		}
		if m.dir != "" {
			teacher = "ref on " + m.dir
		} else {
			teacher = fmt.Sprintf("ref on synth %s seed %d", m.synth, m.seed)
		}
		teacher += fmt.Sprintf(", teacher-forced (%d positions)", total)
	}

	if plotFile != nil {
		if err := adjudicate.PlotSVG(plotFile, reps, *band); err != nil {
			return err
		}
		if err := plotFile.Commit(); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(e.stdout)
	divergent := 0
	for i := range reps {
		if reps[i].Bad() {
			divergent++
		}
	}
	summary := fmt.Sprintf("%d sequences: %d clean, %d divergent", len(reps), len(reps)-divergent, divergent)
	tx := tokText{tok}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		doc := adjDocument(reps, opt, *oursPath, teacher, tx)
		doc.Oracle, doc.Model, doc.Synth = *oraclePath, m.dir, m.synth
		if m.synth != "" {
			doc.Seed = strconv.FormatUint(m.seed, 10)
		}
		if err := enc.Encode(doc); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, summary)
	} else {
		fmt.Fprintf(out, "offcard adjudicate: %s against %s; band %g nats, top %d\n", *oursPath, teacher, *band, *top)
		for i := range reps {
			writeSeqReport(out, &reps[i], tx)
		}
		fmt.Fprintln(out, summary)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if divergent > 0 {
		return errFound
	}
	return nil
}

// modelText is a dump's model for a message: its name and identity.
func modelText(d *dump.Dump) string {
	if d.ModelName != "" {
		return fmt.Sprintf("%s (%s)", d.ModelName, d.Model)
	}
	return d.Model
}

// teacherFits refuses a dump whose positions run past the model's
// max_position_embeddings (as generate refuses them), or whose teacher
// would need more memory than the machine has, before the teacher is made.
func teacherFits(cfg qwen3.Config, d *dump.Dump, threads int) error {
	longest, prompt := 0, 0
	for _, s := range d.Seqs {
		// Positions fed to the teacher: the prompt's, then every step's
		// token but the last.
		n := len(s.Prompt) + max(len(s.Steps)-1, 0)
		if max := cfg.MaxPositionEmbeddings; n > max {
			return bad("--ours: seq %d has %d positions (a prompt of %d tokens and %d steps); the model has max_position_embeddings %d", s.Seq, n, len(s.Prompt), len(s.Steps), max)
		}
		longest, prompt = max(longest, n), max(prompt, len(s.Prompt))
	}
	if err := decoderFits(cfg, longest, prompt, threads); err != nil {
		return bad("--ours: judging its longest sequence (%d positions) %v", longest, err)
	}
	return nil
}

// readDump reads and validates a dump file; every problem is bad input
// named by its flag and file.
func readDump(flag, path string) (*dump.Dump, error) {
	f, size, err := inputfile.Open(path, inputfile.MaxDump, "a dump")
	if err != nil {
		return nil, badInput{err}
	}
	// Held in memory, a record takes about what its line does, up to four
	// times (a bare step record's 40 bytes become a 160-byte Step).
	if err := membudget.Check(membudget.Mul(4, size)); err != nil {
		f.Close()
		return nil, bad("%s %s (%s) %v", flag, path, membudget.Size(size), err)
	}
	defer f.Close()
	d, err := dump.Read(f)
	if err != nil {
		return nil, bad("%s %s: %v", flag, path, err)
	}
	return d, nil
}

// tokText shows tokens as text when a tokenizer is at hand.
type tokText struct{ t *tokenizer.Tokenizer }

func (x tokText) of(ids ...int32) (string, bool) {
	if x.t == nil {
		return "", false
	}
	return x.t.Decode(ids), true
}

// token is "id" or `id "text"`.
func (x tokText) token(id int32) string {
	if s, ok := x.of(id); ok {
		return fmt.Sprintf("%d %q", id, s)
	}
	return strconv.Itoa(int(id))
}

func gapText(p *adjudicate.Position) string {
	switch {
	case math.IsNaN(p.GapNats):
		return "gap unknown (the oracle dump carries no top logits)"
	case p.Bound:
		return fmt.Sprintf("rank > %d, gap ≥ %.4g nats (≥ %d bf16 steps; below the oracle's top list)", p.Rank-1, p.GapNats, p.GapSteps)
	}
	return fmt.Sprintf("rank %d, gap %.4g nats (%d bf16 steps)", p.Rank, p.GapNats, p.GapSteps)
}

func posLine(p *adjudicate.Position, x tokText) string {
	return fmt.Sprintf("pos %d: %s %s, %s; teacher's choice %s", p.Pos, p.Verdict, x.token(p.Token), gapText(p), x.token(p.TeacherTop))
}

// writeSeqReport prints a sequence's summary line and its first
// non-agreeing positions.
func writeSeqReport(w io.Writer, r *adjudicate.Report, x tokText) {
	n := len(r.Positions)
	ties, divs := r.Count(adjudicate.NearTie), r.Count(adjudicate.Divergence)+r.Count(adjudicate.Far)
	head := fmt.Sprintf("seq %d: %d positions, %d agree, %d near-ties, %d divergences", r.Seq, n, r.Count(adjudicate.Agree), ties, divs)
	switch fb, fd := r.FirstBad(), r.FirstDifference(); {
	case fb != nil:
		fmt.Fprintf(w, "%s: DIVERGENT, first divergence at %s\n", head, posLine(fb, x))
	case fd != nil:
		fmt.Fprintf(w, "%s: clean, first near-tie at %s\n", head, posLine(fd, x))
	default:
		fmt.Fprintf(w, "%s: clean\n", head)
	}
	if s, ok := x.of(r.Prompt...); ok {
		fmt.Fprintf(w, "  prompt %q\n", s)
	}
	shown := 0
	for i := range r.Positions {
		p := &r.Positions[i]
		if p.Verdict == adjudicate.Agree {
			continue
		}
		if shown == adjShown {
			fmt.Fprintf(w, "  … %d more\n", ties+divs-shown)
			break
		}
		fmt.Fprintf(w, "  %s\n", posLine(p, x))
		shown++
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
}

// The --json document.
type adjDoc struct {
	Ours      string   `json:"ours"`
	Teacher   string   `json:"teacher"`          // a description
	Oracle    string   `json:"oracle,omitempty"` // --oracle
	Model     string   `json:"model,omitempty"`  // --model
	Synth     string   `json:"synth,omitempty"`  // --synth
	Seed      string   `json:"seed,omitempty"`   // with --synth
	BandNats  float64  `json:"band_nats"`
	TopK      int      `json:"top_k"`
	Clean     int      `json:"clean"`
	Divergent int      `json:"divergent"`
	Sequences []adjSeq `json:"sequences"`
}

type adjSeq struct {
	Seq             int      `json:"seq"`
	Verdict         string   `json:"verdict"` // clean or divergent
	Prompt          []int32  `json:"prompt"`
	PromptText      *string  `json:"prompt_text,omitempty"`
	Positions       int      `json:"positions"`
	Agree           int      `json:"agree"`
	NearTies        int      `json:"near_ties"`
	Divergences     int      `json:"divergences"`
	Far             int      `json:"far"`
	FirstDifference *adjPos  `json:"first_difference"`
	FirstDivergence *adjPos  `json:"first_divergence"`
	Note            string   `json:"note,omitempty"`
	Judged          []adjPos `json:"judged"`
}

type adjPos struct {
	Pos         int      `json:"pos"`
	Token       int32    `json:"token"`
	Text        *string  `json:"text,omitempty"`
	TeacherTop  int32    `json:"teacher_top"`
	TeacherText *string  `json:"teacher_text,omitempty"`
	Rank        int      `json:"rank"`
	GapNats     *float64 `json:"gap_nats"`  // null: infinite or unknown
	GapSteps    *int     `json:"gap_steps"` // null: unknown
	Bound       bool     `json:"bound,omitempty"`
	Verdict     string   `json:"verdict"`
}

func adjDocument(reps []adjudicate.Report, opt adjudicate.Options, ours, teacher string, x tokText) adjDoc {
	doc := adjDoc{Ours: ours, Teacher: teacher, BandNats: opt.Band, TopK: opt.TopK, Sequences: []adjSeq{}}
	text := func(ids ...int32) *string {
		if s, ok := x.of(ids...); ok {
			return &s
		}
		return nil
	}
	pos := func(p *adjudicate.Position) *adjPos {
		if p == nil {
			return nil
		}
		j := adjPos{Pos: p.Pos, Token: p.Token, Text: text(p.Token), TeacherTop: p.TeacherTop, TeacherText: text(p.TeacherTop), Rank: p.Rank, Bound: p.Bound, Verdict: p.Verdict.String()}
		if g := p.GapNats; !math.IsNaN(g) && !math.IsInf(g, 0) {
			j.GapNats = &g
		}
		if s := p.GapSteps; !math.IsNaN(p.GapNats) && s >= 0 {
			j.GapSteps = &s
		}
		return &j
	}
	for i := range reps {
		r := &reps[i]
		s := adjSeq{Seq: r.Seq, Verdict: "clean", Prompt: r.Prompt, PromptText: text(r.Prompt...), Positions: len(r.Positions),
			Agree: r.Count(adjudicate.Agree), NearTies: r.Count(adjudicate.NearTie), Divergences: r.Count(adjudicate.Divergence), Far: r.Count(adjudicate.Far),
			FirstDifference: pos(r.FirstDifference()), FirstDivergence: pos(r.FirstBad()), Note: r.Note, Judged: []adjPos{}}
		if r.Bad() {
			s.Verdict = "divergent"
			doc.Divergent++
		} else {
			doc.Clean++
		}
		for k := range r.Positions {
			s.Judged = append(s.Judged, *pos(&r.Positions[k]))
		}
		doc.Sequences = append(doc.Sequences, s)
	}
	return doc
}
