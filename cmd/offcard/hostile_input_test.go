package main

// The hostile-input sweep of issue 33 (points 1, 2, 3, 4 and 8), each
// command as a case: offcard must answer every one with one line and
// exit 2 (or a verdict), promptly and without taking the machine's memory.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/internal/membudget"
)

// oneLineExit2 fails unless the run exited 2 with one stderr line holding
// every one of want, and nothing on stdout.
func oneLineExit2(t *testing.T, name string, code int, out, errs string, want ...string) {
	t.Helper()
	ok := code == 2 && out == "" && strings.Count(errs, "\n") == 1
	for _, w := range want {
		ok = ok && strings.Contains(errs, w)
	}
	if !ok {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", name, code, clipText(out), clipText(errs), want)
	}
}

func clipText(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// runBounded runs the command and fails the test when it takes more than
// limit or allocates more than maxAlloc bytes of Go heap (unblock, if set,
// is called on a timeout to release a blocked open).
func runBounded(t *testing.T, limit time.Duration, maxAlloc uint64, unblock func(), args ...string) (int, string, string) {
	t.Helper()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	type res struct {
		code      int
		out, errs string
	}
	done := make(chan res, 1)
	go func() {
		code, out, errs := runCLI(t, args...)
		done <- res{code, out, errs}
	}()
	select {
	case r := <-done:
		runtime.ReadMemStats(&m1)
		if a := m1.TotalAlloc - m0.TotalAlloc; a > maxAlloc {
			t.Errorf("%v: allocated %d MB (more than %d MB)", args, a>>20, maxAlloc>>20)
		}
		return r.code, r.out, r.errs
	case <-time.After(limit):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("%v: no answer within %v", args, limit)
	}
	return 0, "", ""
}

// Issue 33 point 1: an oracle dump whose sequence has no steps (what
// generate --steps 0 writes) panicked adjudicate ("index out of range [-1]").
func TestAdjudicateOracleWithoutSteps(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "A.jsonl"), filepath.Join(dir, "B.jsonl")
	for _, c := range [][]string{
		{"generate", "--synth", "tiny", "--prompt-ids", "1,2,3", "--steps", "5", "--dump", a},
		{"generate", "--synth", "tiny", "--prompt-ids", "1,2,3", "--steps", "0", "--dump", b},
	} {
		if code, _, errs := runCLI(t, c...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, errs)
		}
	}
	code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--oracle", b)
	if code != 0 || !strings.Contains(out, "not judged: the oracle dump has no steps for this sequence") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and the sequence named as not judged", code, out, errs)
	}
	// Both ways round: ours without steps is judged clean, nothing to judge.
	if code, out, errs := runCLI(t, "adjudicate", "--ours", b, "--oracle", a); code != 0 {
		t.Fatalf("ours without steps: exit %d, %q %q", code, out, errs)
	}
}

// withBudget states the machine's available memory for the test.
func withBudget(t *testing.T, bytes int64) {
	old := membudget.Available
	membudget.Available = func() int64 { return bytes }
	t.Cleanup(func() { membudget.Available = old })
}

// Issue 33 point 2: sizes in a replay script are checked against the
// memory and the device capacity they imply before anything is allocated.
func TestReplayHugeScenarioRefused(t *testing.T) {
	withBudget(t, 2<<30) // a 2 GiB machine
	dir := t.TempDir()
	script := func(engine string) string {
		p := filepath.Join(dir, strings.NewReplacer(" ", "_", "=", "").Replace(engine)+".script")
		os.WriteFile(p, []byte("model tiny seed=1\ndevice sim arch=wormhole\n"+engine+"\nadmit seq=0 prompt=3\ndecode steps=2\n"), 0o644)
		return p
	}
	for _, c := range []struct {
		engine string
		want   []string
	}{
		{"engine block=32 blocks=100000", []string{"blocks=100000", "GiB of memory", "2.0 GiB available"}},
		{"engine block=32 blocks=1000000", []string{"blocks=1000000", "GiB"}},
		{"engine block=32 blocks=2000000", []string{"blocks=2000000", "GiB"}},
		{"engine block=1048576 blocks=1", []string{"block size 1048576", "max_position_embeddings 4096"}},
		{"engine block=32 blocks=9223372036854775807", []string{"blocks=9223372036854775807"}},
	} {
		code, out, errs := runBounded(t, 20*time.Second, 256<<20, nil, "replay", script(c.engine))
		oneLineExit2(t, c.engine, code, out, errs, c.want...)
	}
	// The device's DRAM holds the cache whatever the machine: 1e6 blocks of
	// tiny are 15.3 GiB of KV, more than Wormhole's 12 GiB.
	withBudget(t, 1<<50)
	code, out, errs := runBounded(t, 20*time.Second, 256<<20, nil, "replay", script("engine block=32 blocks=1000000"))
	oneLineExit2(t, "1e6 blocks on a big machine", code, out, errs, "DRAM", "12.0 GiB")
}

// exportTiny writes the tiny model (seed 1) to a fresh directory.
func exportTiny(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if code, _, errs := runCLI(t, "export", "--synth", "tiny", "--seed", "1", "--out", dir); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	return dir
}

// Issue 33 point 2: a config.json whose dimensions imply more weights than
// the checkpoint holds is refused before the model is laid out.
func TestHugeConfigRefused(t *testing.T) {
	base := exportTiny(t)
	cfg, _ := os.ReadFile(filepath.Join(base, "config.json"))
	for _, c := range []struct {
		key  string
		val  int
		want string
	}{
		{"num_hidden_layers", 1000000, "num_hidden_layers"},
		{"hidden_size", 1 << 24, "parameters"},
		{"vocab_size", 1 << 24, "parameters"},
		{"intermediate_size", 1 << 24, "parameters"},
		{"num_attention_heads", 1 << 20, "parameters"},
	} {
		var m map[string]any
		json.Unmarshal(cfg, &m)
		m[c.key] = c.val
		if c.key == "num_attention_heads" {
			m["num_key_value_heads"] = c.val
		}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(base, "config.json"), b, 0o644)
		code, out, errs := runBounded(t, 20*time.Second, 256<<20, nil, "generate", "--model", base, "--prompt-ids", "1", "--steps", "1")
		oneLineExit2(t, c.key, code, out, errs, c.want, "model.safetensors")
	}
}

// Issue 33 point 2: a 2 GiB sparse model.safetensors with header length
// -1 is refused from its first 8 bytes (it was read whole first).
func TestSafetensorsHeaderCheckedFirst(t *testing.T) {
	dir := exportTiny(t)
	p := filepath.Join(dir, "model.safetensors")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], ^uint64(0))
	f.Write(hdr[:])
	if err := f.Truncate(2 << 30); err != nil {
		t.Skip(err)
	}
	f.Close()
	start := time.Now()
	code, out, errs := runBounded(t, 20*time.Second, 64<<20, nil, "generate", "--model", dir, "--prompt-ids", "1", "--steps", "1")
	oneLineExit2(t, "header -1", code, out, errs, "header length 18446744073709551615")
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v: the file was read before its header was checked", el)
	}
}

// Issue 33 point 2: counts from flags are checked before anything is
// allocated for them.
func TestHugeFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--cases", "1000000000"}, "--cases 1000000000"},
		{[]string{"generate", "--synth", "tiny", "--prompt-ids", "1", "--threads", "1000000"}, "--threads 1000000"},
		{[]string{"adjudicate", "--ours", "x.jsonl", "--synth", "tiny", "--threads", "1000000"}, "--threads 1000000"},
	} {
		code, out, errs := runBounded(t, 20*time.Second, 256<<20, nil, c.args...)
		oneLineExit2(t, strings.Join(c.args, " "), code, out, errs, c.want)
	}
}

// writeLongDump writes a dump of one sequence with a 3-token prompt and n
// steps.
func writeLongDump(t *testing.T, path string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"seq":0,"prompt":[1,2,3]}` + "\n")
	for i := range n {
		fmt.Fprintf(&b, `{"seq":0,"pos":%d,"token":%d}`+"\n", 2+i, (i*7)%512)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 33 point 3: positions past the model's max_position_embeddings are
// refused as generate refuses them (5,000 with tiny, whose limit is 4,096).
func TestAdjudicatePositionLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "long.jsonl")
	writeLongDump(t, p, 5000)
	code, out, errs := runBounded(t, 20*time.Second, 1<<30, nil, "adjudicate", "--ours", p, "--synth", "tiny")
	oneLineExit2(t, "5000 positions", code, out, errs, "5002 positions", "max_position_embeddings 4096")
}

// Issue 33 point 3: a dump judged against a model it was not made with
// says so, naming both.
func TestAdjudicateModelMismatch(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "A.jsonl"), filepath.Join(dir, "B.jsonl")
	for _, c := range [][]string{
		{"generate", "--synth", "tiny", "--seed", "1", "--prompt-ids", "1,2,3", "--steps", "4", "--dump", a},
		{"generate", "--synth", "tiny", "--seed", "2", "--prompt-ids", "1,2,3", "--steps", "4", "--dump", b},
	} {
		if code, _, errs := runCLI(t, c...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, errs)
		}
	}
	code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--synth", "tiny", "--seed", "2")
	oneLineExit2(t, "dump of seed 1 against seed 2", code, out, errs, "synth tiny seed 1", "synth tiny seed 2", "not made with")
	code, out, errs = runCLI(t, "adjudicate", "--ours", a, "--oracle", b)
	oneLineExit2(t, "oracle of another model", code, out, errs, "synth tiny seed 1", "synth tiny seed 2")
	// The same model through a checkpoint directory is the same model.
	m := exportTiny(t)
	if code, out, errs := runCLI(t, "adjudicate", "--ours", a, "--model", m); code != 0 {
		t.Errorf("dump of synth tiny seed 1 against its export: exit %d: %s %s", code, out, errs)
	}
	// A dump without the model field (an older offcard, another engine) is
	// judged as before.
	old := filepath.Join(dir, "old.jsonl")
	raw, _ := os.ReadFile(a)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec map[string]any
		json.Unmarshal([]byte(l), &rec)
		delete(rec, "model")
		delete(rec, "model_source")
		nb, _ := json.Marshal(rec)
		lines = append(lines, string(nb))
	}
	os.WriteFile(old, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	if code, out, errs := runCLI(t, "adjudicate", "--ours", old, "--synth", "tiny", "--seed", "2"); code == 2 {
		t.Errorf("a dump without a model field is refused: %s %s", out, errs)
	}
}

// Issue 33 point 4: the step distance is defined in offcard help adjudicate.
func TestAdjudicateHelpDefinesSteps(t *testing.T) {
	code, out, _ := runCLI(t, "help", "adjudicate")
	out = strings.Join(strings.Fields(out), " ")
	if code != 0 || !strings.Contains(out, "across zero") || !strings.Contains(out, "in steps of the larger magnitude") {
		t.Errorf("help adjudicate does not define bf16 steps across zero: %q", out)
	}
	// Its example is what bf16 computes.
	a, b := bf16.FromFloat32(0.5), bf16.FromFloat32(-0.2646)
	claim := fmt.Sprintf("0.5 and -0.2646 are %d steps apart (counting every bf16 value between them, most of them tiny numbers near 0, gave %s)", bf16.Steps(a, b), thousands(int(bf16.Key(a)-bf16.Key(b))))
	if !strings.Contains(out, claim) {
		t.Errorf("help adjudicate lacks %q", claim)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), claim) {
		t.Errorf("README lacks %q", claim)
	}
}

// Issue 33 point 8: every input file must be a regular file; a FIFO must
// not block, a symlink to /dev/zero must not be read.
func TestInputFilesRegularOnly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	good := filepath.Join(t.TempDir(), "good.jsonl")
	os.WriteFile(good, []byte(`{"seq":0,"prompt":[1,2]}`+"\n"+`{"seq":0,"pos":1,"token":3}`+"\n"), 0o644)
	type hostile struct {
		name string
		make func(p string) error
	}
	kinds := []hostile{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"/dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
	}
	for _, k := range kinds {
		for _, c := range []struct {
			file string // the hostile file's name in a model directory, or "" for a plain path
			args func(dir, p string) []string
		}{
			{"config.json", func(dir, _ string) []string { return []string{"generate", "--model", dir, "--prompt-ids", "1"} }},
			{"model.safetensors", func(dir, _ string) []string { return []string{"generate", "--model", dir, "--prompt-ids", "1"} }},
			{"model.safetensors.index.json", func(dir, _ string) []string { return []string{"generate", "--model", dir, "--prompt-ids", "1"} }},
			{"tokenizer.json", func(dir, _ string) []string { return []string{"generate", "--model", dir, "--prompt-ids", "1"} }},
			{"", func(_, p string) []string {
				return []string{"generate", "--synth", "tiny", "--tokenizer", p, "--prompt-ids", "1"}
			}},
			{"", func(_, p string) []string { return []string{"tokenize", "--tokenizer", p} }},
			{"", func(_, p string) []string { return []string{"adjudicate", "--ours", p, "--synth", "tiny"} }},
			{"", func(_, p string) []string { return []string{"adjudicate", "--ours", good, "--oracle", p} }},
			{"", func(_, p string) []string { return []string{"replay", p} }},
		} {
			dir := exportTiny(t)
			p := filepath.Join(t.TempDir(), "input")
			if c.file != "" {
				p = filepath.Join(dir, c.file)
				os.Remove(p)
				if c.file == "model.safetensors.index.json" {
					os.Remove(filepath.Join(dir, "model.safetensors"))
				}
			}
			if err := k.make(p); err != nil {
				t.Skip(err)
			}
			unblock := func() {
				if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			}
			args := c.args(dir, p)
			code, out, errs := runBounded(t, 10*time.Second, 256<<20, unblock, args...)
			oneLineExit2(t, k.name+" as "+strings.Join(args, " "), code, out, errs, "not a regular file")
		}
	}
}

// Issue 33 point 2: generate and adjudicate check the teacher's memory
// (KV cache, scratch, prompt logits) before they make it.
func TestDecoderMemoryChecked(t *testing.T) {
	withBudget(t, 1<<20) // a 1 MiB machine
	p := filepath.Join(t.TempDir(), "d.jsonl")
	writeLongDump(t, p, 4000)
	code, out, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1", "--steps", "4000")
	oneLineExit2(t, "generate", code, out, errs, "--steps 4000", "needs about", "1.0 MiB available")
	code, out, errs = runCLI(t, "adjudicate", "--ours", p, "--synth", "tiny")
	oneLineExit2(t, "adjudicate", code, out, errs, "4002 positions", "needs about", "1.0 MiB available")
	withBudget(t, 256<<10) // the dump itself (116 KiB) does not fit four times
	code, out, errs = runCLI(t, "adjudicate", "--ours", p, "--synth", "tiny")
	oneLineExit2(t, "adjudicate, dump", code, out, errs, "--ours "+p, "KiB) needs about", "256.0 KiB available")
}

// thousands writes n with commas: 32,135.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
