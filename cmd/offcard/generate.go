package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/internal/membudget"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/qwen3/tokenizer"
	"github.com/offcard/offcard/ref"
)

const genBlockSize = 32

// maxThreads bounds --threads: more workers than cores only cost memory
// (each holds attention scratch for the whole context).
const maxThreads = 256

// decoderFits checks the memory a ref decoder takes for a sequence of
// positions (its KV cache, every worker's attention scratch) and the
// logits rows of a prefill of prompt tokens against what the machine has.
func decoderFits(cfg qwen3.Config, positions, prompt, threads int) error {
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	rows := int64(kvpage.BlocksFor(positions, genBlockSize) * genBlockSize)
	need := membudget.Add(cfg.KVBytes(int(rows)),
		membudget.Mul(int64(threads), rows, int64(4*cfg.HeadDim+4)),
		membudget.Mul(int64(prompt), int64(cfg.VocabSize), 4))
	return membudget.Check(need)
}

func checkThreads(n int) error {
	if n < 0 || n > maxThreads {
		return bad("--threads %d: want 0 (GOMAXPROCS) to %d", n, maxThreads)
	}
	return nil
}

// modelFlags selects a model: a checkpoint directory or a synthetic preset.
type modelFlags struct {
	dir   string
	synth string
	seed  uint64
	e     *env   // progress of a long synthesis (startPhase), if set,
	cmd   string // reported as this command's
}

func (m *modelFlags) register(fs interface {
	StringVar(*string, string, string, string)
	Uint64Var(*uint64, string, uint64, string)
}) {
	fs.StringVar(&m.dir, "model", "", "Hugging Face checkpoint `DIR` (config.json + model.safetensors)")
	fs.StringVar(&m.synth, "synth", "", "synthetic model preset: tiny or qwen3-0.6b")
	fs.Uint64Var(&m.seed, "seed", 1, "seed of the synthetic weights")
}

func (m *modelFlags) load(notice func(string)) (*qwen3.Weights, error) {
	switch {
	case m.dir != "" && m.synth != "":
		return nil, bad("--model and --synth are exclusive")
	case m.dir != "":
		w, err := qwen3.LoadWith(m.dir, qwen3.LoadOptions{Notice: notice})
		if err != nil {
			return nil, badInput{err}
		}
		return w, nil
	case m.synth != "":
		cfg, err := qwen3.Preset(m.synth)
		if err != nil {
			return nil, badInput{err}
		}
		defer startPhase(m.e, m.cmd, fmt.Sprintf("synthesising the %s weights (seed %d)", m.synth, m.seed), nil)()
		return qwen3.Synth(cfg, m.seed)
	}
	return nil, bad("need --model DIR or --synth tiny|qwen3-0.6b")
}

// needBOS refuses, before the weights load, a model whose config has no
// BOS token (bos_token_id null or absent) when there is no prompt to
// start from.
func needBOS(m modelFlags, noPrompt bool) error {
	if !noPrompt || m.dir == "" || m.synth != "" {
		return nil
	}
	p := filepath.Join(m.dir, "config.json")
	if cfg, err := qwen3.LoadConfig(p); err == nil && cfg.BOSTokenID < 0 {
		return bad("%s: bos_token_id is null, so there is no token to start from: give --prompt or --prompt-ids", p)
	}
	return nil
}

// name describes the model for a dump's model_name and messages.
func (m *modelFlags) name() string {
	if m.dir != "" {
		return "checkpoint " + m.dir
	}
	return synthName(m.synth, m.seed)
}

func parseIDs(s string, vocab int) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 || int(n) >= vocab {
			return nil, bad("--prompt-ids: %q is not a token id in [0,%d)", f, vocab)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

func runGenerate(e *env, args []string) error {
	fs := newFlags(e, "generate", "[--model DIR | --synth tiny|qwen3-0.6b] [--seed N] [--prompt TEXT | --prompt-ids 1,2,3] [--steps N] [--threads N] [--dump FILE.jsonl] [--logits-out FILE]")
	m := modelFlags{e: e, cmd: "generate"}
	m.register(fs)
	prompt := fs.String("prompt", "", "prompt `TEXT` (needs a tokenizer: --model DIR with tokenizer.json, or --tokenizer)")
	promptIDs := fs.String("prompt-ids", "", "prompt as comma-separated token `ids`")
	tokPath := fs.String("tokenizer", "", "tokenizer.json `FILE` (default DIR/tokenizer.json with --model)")
	steps := fs.Int("steps", 16, "number of tokens to generate (0: process the prompt only)")
	threads := fs.Int("threads", 0, "worker threads (0: GOMAXPROCS)")
	dumpPath := fs.String("dump", "", "write the dump (a prompt record, then one step record per generated token) to `FILE.jsonl`")
	logitsPath := fs.String("logits-out", "", "write raw little-endian float32 logits of every processed position to `FILE` ([positions × vocab])")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *steps < 0 {
		return bad("--steps must be ≥ 0, got %d", *steps)
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	if *prompt != "" && *promptIDs != "" {
		return bad("--prompt and --prompt-ids are exclusive")
	}
	if err := needBOS(m, *prompt == "" && *promptIDs == ""); err != nil {
		return err
	}
	if err := checkOutputFiles(*dumpPath, *logitsPath); err != nil {
		return err
	}
	w, err := m.load(func(s string) { fmt.Fprintf(e.stderr, "offcard generate: %s\n", s) })
	if err != nil {
		return err
	}
	defer w.Close()
	cfg := w.Config

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
	var ids []int32
	switch {
	case *prompt != "":
		if tok == nil {
			return bad("--prompt needs a tokenizer: --model DIR with tokenizer.json, or --tokenizer FILE")
		}
		ids = tok.Encode(*prompt)
		for _, id := range ids {
			if int(id) >= cfg.VocabSize {
				return bad("prompt token %d is outside the model's vocabulary of %d", id, cfg.VocabSize)
			}
		}
	case *promptIDs != "":
		if ids, err = parseIDs(*promptIDs, cfg.VocabSize); err != nil {
			return err
		}
	default:
		ids = []int32{int32(cfg.BOSTokenID)}
		fmt.Fprintf(e.stderr, "offcard generate: no --prompt or --prompt-ids: starting from the BOS token %d alone\n", cfg.BOSTokenID)
	}
	if len(ids) == 0 {
		return bad("the prompt is empty")
	}
	if n, max := len(ids)+max(*steps-1, 0), cfg.MaxPositionEmbeddings; max > 0 && n > max {
		return bad("a prompt of %d tokens and --steps %d need %d positions; the model has max_position_embeddings %d", len(ids), *steps, n, max)
	}
	if err := decoderFits(cfg, len(ids)+max(*steps-1, 0), len(ids), *threads); err != nil {
		return bad("a prompt of %d tokens and --steps %d %v", len(ids), *steps, err)
	}

	var dumpFile, logits *atomicFile
	for _, o := range []struct {
		path string
		f    **atomicFile
	}{{*dumpPath, &dumpFile}, {*logitsPath, &logits}} {
		if o.path == "" {
			continue
		}
		if *o.f, err = createAtomic(o.path); err != nil {
			return err
		}
		defer (*o.f).Abort()
	}

	total := len(ids) + max(*steps-1, 0)
	pool, err := kvpage.NewPool(kvpage.BlocksFor(total, genBlockSize), genBlockSize)
	if err != nil {
		return err
	}
	dec, err := ref.New(w, ref.Options{BlockSize: genBlockSize, NumBlocks: pool.NumBlocks(), Threads: *threads})
	if err != nil {
		return err
	}
	defer dec.Close()
	table := pool.NewTable()
	if err := table.Grow(len(ids)); err != nil {
		return err
	}

	var lw *bufio.Writer
	if logits != nil {
		lw = bufio.NewWriterSize(logits, 1<<20)
	}
	var dw *dump.Writer
	if dumpFile != nil {
		dw = dump.NewWriter(dumpFile)
		dw.SetModel(w.Digest(), m.name())
		if err := dw.Prompt(0, ids); err != nil {
			return err
		}
	}
	writeLogits := func(outs []qwen3.Output) error {
		if lw == nil {
			return nil
		}
		var b [4]byte
		for _, o := range outs {
			for _, x := range o.Logits {
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
				lw.Write(b[:])
			}
		}
		return nil
	}

	start := time.Now()
	prog := newProgress(e, "generate", *steps)
	outs, err := dec.Prefill(qwen3.Prefill{Seq: 0, Tokens: ids, Blocks: table.Blocks()})
	if err != nil {
		return err
	}
	writeLogits(outs)
	var gen []int32
	last := outs[len(outs)-1]
	for step := 0; step < *steps; step++ {
		gen = append(gen, last.Token)
		if dw != nil {
			if err := dw.Step(dumpStep(step, last)); err != nil {
				return err
			}
		}
		prog.update(step + 1)
		if step == *steps-1 {
			break
		}
		pos := last.Pos + 1
		if err := table.Grow(pos + 1); err != nil {
			return err
		}
		o, err := dec.Decode([]qwen3.Step{{Seq: 0, Token: last.Token, Pos: pos, Blocks: table.Blocks()}})
		if err != nil {
			return err
		}
		writeLogits(o)
		last = o[0]
	}
	prog.done()
	if lw != nil {
		if err := lw.Flush(); err != nil {
			return fmt.Errorf("write %s: %v", *logitsPath, pathErr(err))
		}
		if err := logits.Commit(); err != nil {
			return err
		}
	}
	if dw != nil {
		if err := dw.Flush(); err != nil {
			return fmt.Errorf("write %s: %v", *dumpPath, pathErr(err))
		}
		if err := dumpFile.Commit(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "prompt ids: %s\n", joinIDs(ids))
	fmt.Fprintf(e.stdout, "generated ids: %s\n", joinIDs(gen))
	if tok != nil {
		fmt.Fprintf(e.stdout, "text: %q\n", tok.Decode(gen))
	}
	if el := time.Since(start); *steps > 1 && e.stderrTTY {
		fmt.Fprintf(e.stderr, "%d positions in %v (%.1f positions/s)\n", total, el.Round(time.Millisecond), float64(total)/el.Seconds())
	}
	return nil
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, " ")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// progress draws "name k/N" on a terminal's stderr and stays quiet when piped.
type progress struct {
	w     io.Writer
	name  string
	total int
	last  time.Time
}

func newProgress(e *env, name string, total int) *progress {
	if !e.stderrTTY {
		return &progress{}
	}
	return &progress{w: e.stderr, name: name, total: total}
}

func (p *progress) update(k int) {
	if p.w == nil || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r%s %d/%d", p.name, k, p.total)
}

func (p *progress) done() {
	if p.w != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
