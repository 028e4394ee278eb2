package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/dump"
)

// runCLI runs offcard in-process and returns its exit code and streams.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &env{stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func TestGenerateIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	var outs [2]string
	var logits [2][]byte
	for i := range outs {
		lp := filepath.Join(dir, "l"+string(rune('0'+i)))
		code, out, errs := runCLI(t, "generate", "--synth", "tiny", "--seed", "7", "--prompt-ids", "5,6,7", "--steps", "5", "--logits-out", lp)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		outs[i] = out
		var err error
		if logits[i], err = os.ReadFile(lp); err != nil {
			t.Fatal(err)
		}
	}
	if outs[0] != outs[1] || !bytes.Equal(logits[0], logits[1]) {
		t.Fatal("two identical runs differ")
	}
	// 3 prompt positions + 4 decode steps, vocab 512, float32.
	if want := (3 + 4) * 512 * 4; len(logits[0]) != want {
		t.Fatalf("logits-out has %d bytes, want %d", len(logits[0]), want)
	}
	if !strings.Contains(outs[0], "generated ids: ") || len(strings.Fields(strings.SplitN(outs[0], "generated ids: ", 2)[1])) != 5 {
		t.Fatalf("want 5 generated ids in %q", outs[0])
	}
}

func TestDumpRecords(t *testing.T) {
	dp := filepath.Join(t.TempDir(), "d.jsonl")
	code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1,2", "--steps", "4", "--dump", dp)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(dp)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1+4 {
		t.Fatalf("%d dump lines, want a prompt record and 4 steps", len(lines))
	}
	d, err := dump.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Seqs) != 1 || !slices.Equal(d.Seqs[0].Prompt, []int32{1, 2}) {
		t.Fatalf("want one sequence with prompt 1 2: %s", data)
	}
	for i, r := range d.Seqs[0].Steps {
		if r.Step != i || r.Pos != 1+i || len(r.TopIDs) != dumpTopK || r.TopIDs[0] != r.Token || len(r.Digest) != 16 || r.GapSteps < 0 {
			t.Fatalf("bad record %d: %+v", i, r)
		}
		if r.TopLogits[0] < r.TopLogits[1] {
			t.Fatalf("top logits not sorted: %v", r.TopLogits)
		}
	}
}

// Export then load gives the in-memory synthetic model's logits, bit for bit.
func TestExportLoadSameLogits(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m")
	if code, _, errs := runCLI(t, "export", "--synth", "tiny", "--seed", "3", "--out", model); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, c := range [][]string{
		{"generate", "--synth", "tiny", "--seed", "3", "--prompt-ids", "9,8,7,6", "--steps", "6", "--logits-out", a},
		{"generate", "--model", model, "--prompt-ids", "9,8,7,6", "--steps", "6", "--logits-out", b},
	} {
		if code, _, errs := runCLI(t, c...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, errs)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatalf("exported model's logits differ from the in-memory model's (%d vs %d bytes)", len(da), len(db))
	}
}

// st is a safetensors file taken apart for editing in tests.
type st struct {
	header map[string]any
	data   []byte
}

func readST(t *testing.T, path string) st {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var h map[string]any
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	return st{h, b[8+n:]}
}

func (s st) bytes(t *testing.T) []byte {
	t.Helper()
	h, err := json.Marshal(s.header)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), s.data...)
}

func (s st) tensor(name string) map[string]any { return s.header[name].(map[string]any) }

// Bad inputs: one clear line on stderr, exit 2, no panic, no output file.
func TestBadInputs(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	if code, _, errs := runCLI(t, "export", "--synth", "tiny", "--seed", "1", "--out", base); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	cfg, err := os.ReadFile(filepath.Join(base, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(base, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	editConfig := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(cfg, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	editModel := func(f func(s st)) []byte {
		s := readST(t, filepath.Join(base, "model.safetensors"))
		f(s)
		return s.bytes(t)
	}
	offsets := func(s st, name string) []any { return s.tensor(name)["data_offsets"].([]any) }
	const (
		q0 = "model.layers.0.self_attn.q_proj.weight"
		k0 = "model.layers.0.self_attn.k_proj.weight"
	)
	cases := []struct {
		name    string
		config  []byte
		model   []byte
		wantErr string // a word the error line must contain
	}{
		{"truncated file", nil, model[:len(model)-10], "safetensors"},
		{"tiny file", nil, model[:5], "safetensors"},
		{"header length past end of file", nil, func() []byte {
			b := bytes.Clone(model)
			binary.LittleEndian.PutUint64(b, uint64(len(b)))
			return b
		}(), "header"},
		{"header over 100 MB", nil, func() []byte {
			b := bytes.Clone(model)
			binary.LittleEndian.PutUint64(b, 200_000_000)
			return b
		}(), "header"},
		{"overlapping offsets", nil, editModel(func(s st) {
			o := offsets(s, q0)
			o[0] = o[0].(float64) - 2
		}), "offset"},
		{"gapped offsets", nil, editModel(func(s st) {
			o := offsets(s, q0)
			o[0] = o[0].(float64) + 2
		}), "offset"},
		{"unknown dtype", nil, editModel(func(s st) { s.tensor(q0)["dtype"] = "BF17" }), "BF17"},
		{"shape contradicts config", nil, editModel(func(s st) {
			sh := s.tensor(k0)["shape"].([]any) // [64,128] in tiny: swapped, same bytes
			sh[0], sh[1] = sh[1], sh[0]
		}), "k_proj"},
		{"missing tensor", nil, editModel(func(s st) {
			// Turn the final norm into an unknown name: contiguity holds, the name is missing.
			s.header["model.norm.weightX"] = s.header["model.norm.weight"]
			delete(s.header, "model.norm.weight")
		}), "model.norm.weight"},
		{"config with zero heads", editConfig(func(m map[string]any) { m["num_attention_heads"] = 0 }), nil, "num_attention_heads"},
		{"kv heads do not divide heads", editConfig(func(m map[string]any) { m["num_key_value_heads"] = 3 }), nil, "num_key_value_heads"},
		{"config not JSON", []byte("{not json"), nil, "config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mc, mm := cfg, model
			if c.config != nil {
				mc = c.config
			}
			if c.model != nil {
				mm = c.model
			}
			os.WriteFile(filepath.Join(dir, "config.json"), mc, 0o644)
			os.WriteFile(filepath.Join(dir, "model.safetensors"), mm, 0o644)
			out := filepath.Join(dir, "logits.f32")
			dump := filepath.Join(dir, "dump.jsonl")
			code, _, errs := runCLI(t, "generate", "--model", dir, "--steps", "2", "--logits-out", out, "--dump", dump)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errs)
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n") {
				t.Errorf("want exactly one error line, got %q", errs)
			}
			if !strings.Contains(errs, c.wantErr) {
				t.Errorf("error %q does not mention %q", errs, c.wantErr)
			}
			for _, p := range []string{out, dump} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("output file %s was left behind", filepath.Base(p))
				}
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{},
		{"frobnicate"},
		{"generate"},
		{"generate", "--synth", "huge"},
		{"generate", "--synth", "tiny", "--prompt-ids", "1,x"},
		{"generate", "--synth", "tiny", "--prompt-ids", "99999"},
		{"generate", "--synth", "tiny", "--steps", "-1"},
		{"generate", "--synth", "tiny", "--prompt", "hi"},
		{"generate", "--synth", "tiny", "--bogus"},
		{"generate", "--synth", "tiny", "extra"},
		{"export", "--synth", "tiny"},
	}
	for _, args := range cases {
		code, _, errs := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%q)", args, code, errs)
		}
		if errs == "" {
			t.Errorf("%v: no message", args)
		}
	}
	if code, _, _ := runCLI(t, "generate", "--help"); code != 0 {
		t.Errorf("--help exit %d", code)
	}
}
