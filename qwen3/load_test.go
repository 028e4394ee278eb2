package qwen3

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3/safetensors"
	"github.com/x448/float16"
)

// tinyWeights is the tiny preset with tied embeddings, as Qwen3-0.6B has
// them (the preset itself is untied).
func tinyWeights(t testing.TB, seed uint64) *Weights {
	t.Helper()
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TieWordEmbeddings = true
	w, err := Synth(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// tensorsOf lists w's tensors as safetensors entries (lm_head only if untied).
func tensorsOf(w *Weights) []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, s := range specs(w) {
		out = append(out, safetensors.Tensor{Name: s.name, DType: "BF16", Shape: s.shape, Data: bf16.Bytes(*s.dst)})
	}
	return out
}

func writeFile(t testing.TB, path string, ts []safetensors.Tensor) {
	t.Helper()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeModel writes config.json for cfg and model.safetensors holding ts.
func writeModel(t testing.TB, cfg Config, ts []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), configJSON(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, SafetensorsFile), ts)
	return dir
}

func sameWeights(t *testing.T, got, want *Weights) {
	t.Helper()
	if got.Config != want.Config {
		t.Fatalf("config %+v, want %+v", got.Config, want.Config)
	}
	gs, ws := specs(got), specs(want)
	if len(gs) != len(ws) {
		t.Fatalf("%d tensors, want %d", len(gs), len(ws))
	}
	for i := range ws {
		if !slices.Equal(*gs[i].dst, *ws[i].dst) {
			t.Fatalf("%s differs", ws[i].name)
		}
	}
	if !slices.Equal(got.LMHead, want.LMHead) {
		t.Fatal("LMHead differs")
	}
}

func TestExportLoadRoundTrip(t *testing.T) {
	w := tinyWeights(t, 42)
	dir := filepath.Join(t.TempDir(), "out")
	if err := w.Export(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{ConfigFile, SafetensorsFile}) {
		t.Fatalf("dir holds %v", names)
	}
	var notices []string
	got, err := LoadWith(dir, LoadOptions{Notice: func(s string) { notices = append(notices, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	sameWeights(t, got, w)
	if &got.LMHead[0] != &got.Embed[0] {
		t.Error("tied LMHead does not alias Embed")
	}
	if len(notices) != 0 {
		t.Errorf("notices %v", notices)
	}

	// The file is all BF16, has format=pt metadata, and no lm_head.
	f, err := safetensors.Open(filepath.Join(dir, SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["format"] != "pt" || f.HeaderSize()%8 != 0 {
		t.Errorf("metadata %v, header %d", f.Metadata(), f.HeaderSize())
	}
	if _, ok := f.Tensor("lm_head.weight"); ok {
		t.Error("tied export wrote lm_head.weight")
	}
	for _, tn := range f.Tensors() {
		if tn.DType != "BF16" {
			t.Errorf("%s is %s", tn.Name, tn.DType)
		}
	}
	if f.Len() != 2+11*w.Config.NumHiddenLayers {
		t.Errorf("%d tensors", f.Len())
	}

	// config.json is HF style.
	var m map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["model_type"] != "qwen3" || m["torch_dtype"] != "bfloat16" || m["tie_word_embeddings"] != true ||
		m["architectures"].([]any)[0] != "Qwen3ForCausalLM" || m["head_dim"] != 32.0 || m["rope_theta"] != 1e6 {
		t.Errorf("config.json: %s", data)
	}

	// Exporting the loaded (mmap-backed) weights gives the same bytes.
	dir2 := t.TempDir()
	if err := got.Export(dir2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConfigFile, SafetensorsFile} {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, _ := os.ReadFile(filepath.Join(dir2, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs on re-export", name)
		}
	}
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
}

// The real 0.6B config round-trips through Export's config.json.
func TestConfigJSONRoundTrip(t *testing.T) {
	for _, name := range PresetNames() {
		c, _ := Preset(name)
		got, err := ParseConfig(configJSON(c))
		if err != nil || got != c {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
}

func TestLoadSharded(t *testing.T) {
	w := tinyWeights(t, 3)
	ts := tensorsOf(w)
	// Shard 1: embeddings and layer 0; shard 2: the rest.
	var s1, s2 []safetensors.Tensor
	wm := map[string]string{}
	for _, tn := range ts {
		if strings.HasPrefix(tn.Name, "model.embed") || strings.HasPrefix(tn.Name, "model.layers.0.") {
			s1 = append(s1, tn)
			wm[tn.Name] = "model-00001-of-00002.safetensors"
		} else {
			s2 = append(s2, tn)
			wm[tn.Name] = "model-00002-of-00002.safetensors"
		}
	}
	setup := func(t *testing.T, s1, s2 []safetensors.Tensor, wm map[string]string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ConfigFile), configJSON(w.Config), 0o644)
		writeFile(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), s1)
		writeFile(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), s2)
		ix, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": wm})
		os.WriteFile(filepath.Join(dir, IndexFile), ix, 0o644)
		return dir
	}
	t.Run("ok", func(t *testing.T) {
		got, err := Load(setup(t, s1, s2, wm))
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		sameWeights(t, got, w)
	})
	t.Run("listed in the wrong shard", func(t *testing.T) {
		m := clone(wm)
		m["model.norm.weight"] = "model-00001-of-00002.safetensors"
		_, err := Load(setup(t, s1, s2, m))
		wantErr(t, err, "model.norm.weight is in shard model-00002-of-00002.safetensors, but the index lists it in model-00001-of-00002.safetensors")
	})
	t.Run("unlisted tensor in a shard", func(t *testing.T) {
		m := clone(wm)
		delete(m, "model.norm.weight")
		_, err := Load(setup(t, s1, s2, m))
		wantErr(t, err, "model.norm.weight is in shard model-00002-of-00002.safetensors but not in the index")
	})
	t.Run("listed but absent", func(t *testing.T) {
		m := clone(wm)
		m["model.extra.weight"] = "model-00001-of-00002.safetensors"
		_, err := Load(setup(t, s1, s2, m))
		wantErr(t, err, "model.extra.weight is listed in the index for model-00001-of-00002.safetensors but is not in that shard")
	})
	t.Run("tensor in two shards", func(t *testing.T) {
		dup := append(slices.Clone(s2), s1[0])
		_, err := Load(setup(t, s1, dup, wm))
		wantErr(t, err, s1[0].Name+" appears in shards")
	})
	t.Run("missing shard file", func(t *testing.T) {
		dir := setup(t, s1, s2, wm)
		os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		_, err := Load(dir)
		wantErr(t, err, "model-00002-of-00002.safetensors")
	})
	t.Run("shard outside dir", func(t *testing.T) {
		m := clone(wm)
		m["model.norm.weight"] = "../model-00002-of-00002.safetensors"
		_, err := Load(setup(t, s1, s2, m))
		wantErr(t, err, "not a plain file name")
	})
}

func clone(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
}

func TestLoadRejects(t *testing.T) {
	w := tinyWeights(t, 5)
	cfg := w.Config
	ts := tensorsOf(w)

	t.Run("shape contradicts config.json", func(t *testing.T) {
		c := cfg
		c.NumKeyValueHeads = 4 // k/v want [128 128]; the file has [64 128]
		_, err := Load(writeModel(t, c, ts))
		wantErr(t, err, "model.layers.0.self_attn.k_proj.weight: shape [64 128], config wants [128 128]")
	})
	t.Run("missing tensor", func(t *testing.T) {
		var less []safetensors.Tensor
		for _, tn := range ts {
			if tn.Name != "model.layers.1.mlp.up_proj.weight" {
				less = append(less, tn)
			}
		}
		_, err := Load(writeModel(t, cfg, less))
		wantErr(t, err, "model.layers.1.mlp.up_proj.weight: missing")
	})
	t.Run("unexpected tensor", func(t *testing.T) {
		more := append(slices.Clone(ts), safetensors.Tensor{Name: "model.layers.0.self_attn.q_proj.bias", DType: "BF16", Shape: []int{128}, Data: make([]byte, 256)})
		_, err := Load(writeModel(t, cfg, more))
		wantErr(t, err, "model.layers.0.self_attn.q_proj.bias: unexpected tensor")
	})
	t.Run("extra layer", func(t *testing.T) {
		more := append(slices.Clone(ts), safetensors.Tensor{Name: "model.layers.2.input_layernorm.weight", DType: "BF16", Shape: []int{128}, Data: make([]byte, 256)})
		_, err := Load(writeModel(t, cfg, more))
		wantErr(t, err, "model.layers.2.input_layernorm.weight: unexpected tensor")
	})
	t.Run("several problems", func(t *testing.T) {
		_, err := Load(writeModel(t, cfg, ts[2:]))
		wantErr(t, err, "(and 1 more problems)")
	})
	t.Run("wrong dtype", func(t *testing.T) {
		bad := slices.Clone(ts)
		for i := range bad {
			if bad[i].Name == "model.norm.weight" {
				bad[i].DType = "I16"
			}
		}
		_, err := Load(writeModel(t, cfg, bad))
		wantErr(t, err, "model.norm.weight: dtype I16, want BF16")
	})
	t.Run("untied without lm_head", func(t *testing.T) {
		c := cfg
		c.TieWordEmbeddings = false
		_, err := Load(writeModel(t, c, ts))
		wantErr(t, err, "lm_head.weight: missing")
	})
	t.Run("tied lm_head of the wrong shape", func(t *testing.T) {
		more := append(slices.Clone(ts), safetensors.Tensor{Name: "lm_head.weight", DType: "BF16", Shape: []int{2, 128}, Data: make([]byte, 512)})
		_, err := Load(writeModel(t, cfg, more))
		wantErr(t, err, "lm_head.weight: shape [2 128], config wants [512 128]")
	})
	t.Run("no weights", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ConfigFile), configJSON(cfg), 0o644)
		_, err := Load(dir)
		wantErr(t, err, "no model.safetensors or model.safetensors.index.json")
	})
	t.Run("no config", func(t *testing.T) {
		_, err := Load(t.TempDir())
		wantErr(t, err, "config.json")
	})
	t.Run("bad config", func(t *testing.T) {
		dir := writeModel(t, cfg, ts)
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte("{"), 0o644)
		_, err := Load(dir)
		wantErr(t, err, "config.json: not a JSON object")
	})
	t.Run("corrupt safetensors", func(t *testing.T) {
		dir := writeModel(t, cfg, ts)
		p := filepath.Join(dir, SafetensorsFile)
		data, _ := os.ReadFile(p)
		os.WriteFile(p, append(data, 0), 0o644)
		_, err := Load(dir)
		wantErr(t, err, "trailing bytes")
	})
}

func TestLoadConvertsF32AndF16(t *testing.T) {
	w := tinyWeights(t, 9)
	ts := tensorsOf(w)
	// q_norm of layer 0 as F32 with values that need rounding, ties included;
	// k_norm of layer 0 as F16, likewise.
	n := w.Config.HeadDim
	f32 := make([]float32, n)
	f16 := make([]uint16, n)
	for i := range n {
		f32[i] = math.Float32frombits(0x3F800000 + uint32(i)*0x1357)
		f16[i] = 0x3C00 + uint16(i)
	}
	f32[0] = math.Float32frombits(0x3F808000) // tie, to even: 0x3F80
	f32[1] = math.Float32frombits(0x3F818000) // tie, to even: 0x3F82
	f16[2] = 0x3C04                           // 1 + 2^-8: a bf16 tie, to even: 0x3F80
	f16[3] = 0x3C0C                           // 1 + 3·2^-8: a tie, to even: 0x3F82
	f32b := make([]byte, 4*n)
	f16b := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint32(f32b[4*i:], math.Float32bits(f32[i]))
		binary.LittleEndian.PutUint16(f16b[2*i:], f16[i])
	}
	for i := range ts {
		switch ts[i].Name {
		case "model.layers.0.self_attn.q_norm.weight":
			ts[i].DType, ts[i].Data = "F32", f32b
		case "model.layers.0.self_attn.k_norm.weight":
			ts[i].DType, ts[i].Data = "F16", f16b
		}
	}
	var notices []string
	got, err := LoadWith(writeModel(t, w.Config, ts), LoadOptions{Notice: func(s string) { notices = append(notices, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	for i := range n {
		if want := bf16.FromFloat32(f32[i]); got.Layers[0].QNorm[i] != want {
			t.Fatalf("F32 %d: %#04x, want %#04x", i, got.Layers[0].QNorm[i], want)
		}
		if want := bf16.FromFloat32(float16.Frombits(f16[i]).Float32()); got.Layers[0].KNorm[i] != want {
			t.Fatalf("F16 %d: %#04x, want %#04x", i, got.Layers[0].KNorm[i], want)
		}
	}
	if got.Layers[0].QNorm[0] != 0x3F80 || got.Layers[0].QNorm[1] != 0x3F82 || got.Layers[0].KNorm[2] != 0x3F80 || got.Layers[0].KNorm[3] != 0x3F82 {
		t.Fatal("ties not rounded to even")
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "converted 1 F32 and 1 F16 tensor(s) to bf16") {
		t.Fatalf("notices %q", notices)
	}
	if !slices.Equal(got.Layers[1].QNorm, w.Layers[1].QNorm) {
		t.Fatal("BF16 neighbour changed")
	}
}

func TestLoadUntiedAndTiedHeads(t *testing.T) {
	t.Run("untied preset round trip", func(t *testing.T) {
		cfg, _ := Preset("tiny")
		u, err := Synth(cfg, 11)
		if err != nil {
			t.Fatal(err)
		}
		if &u.LMHead[0] == &u.Embed[0] {
			t.Fatal("untied preset shares its head with the embeddings")
		}
		dir := t.TempDir()
		if err := u.Export(dir); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		sameWeights(t, got, u)
	})
	w := tinyWeights(t, 11)
	head := slices.Clone(w.Embed)
	for i := range head {
		head[i] ^= 1
	}
	t.Run("untied with lm_head", func(t *testing.T) {
		u := *w
		u.Config.TieWordEmbeddings = false
		u.LMHead = head
		dir := t.TempDir()
		if err := u.Export(dir); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if got.Config.TieWordEmbeddings || !slices.Equal(got.LMHead, head) || !slices.Equal(got.Embed, w.Embed) {
			t.Fatal("untied head not loaded")
		}
		sameWeights(t, got, &u)
	})
	t.Run("tied with equal lm_head present", func(t *testing.T) {
		ts := append(tensorsOf(w), safetensors.Tensor{Name: "lm_head.weight", DType: "BF16", Shape: []int{512, 128}, Data: bf16.Bytes(w.Embed)})
		var notices []string
		got, err := LoadWith(writeModel(t, w.Config, ts), LoadOptions{Notice: func(s string) { notices = append(notices, s) }})
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if &got.LMHead[0] != &got.Embed[0] || len(notices) != 0 {
			t.Fatalf("LMHead not Embed, or notices %v", notices)
		}
	})
	t.Run("tied with differing lm_head present", func(t *testing.T) {
		ts := append(tensorsOf(w), safetensors.Tensor{Name: "lm_head.weight", DType: "BF16", Shape: []int{512, 128}, Data: bf16.Bytes(head)})
		var notices []string
		got, err := LoadWith(writeModel(t, w.Config, ts), LoadOptions{Notice: func(s string) { notices = append(notices, s) }})
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if !slices.Equal(got.LMHead, w.Embed) || len(notices) != 1 || !strings.Contains(notices[0], "lm_head.weight differs") {
			t.Fatalf("notices %v", notices)
		}
	})
	t.Run("export refuses tied with a different head", func(t *testing.T) {
		u := *w
		u.LMHead = head
		if err := u.Export(t.TempDir()); err == nil {
			t.Fatal("exported")
		}
	})
}

// A header of odd length puts every BF16 tensor at an odd address: Load
// must copy rather than reinterpret, and still give the same values.
func TestLoadMisalignedBF16(t *testing.T) {
	w := tinyWeights(t, 13)
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensorsOf(w), nil); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	n := binary.LittleEndian.Uint64(data)
	odd := make([]byte, 8, len(data)+1)
	binary.LittleEndian.PutUint64(odd, n+1)
	odd = append(odd, data[8:8+n]...)
	odd = append(odd, ' ')
	odd = append(odd, data[8+n:]...)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ConfigFile), configJSON(w.Config), 0o644)
	os.WriteFile(filepath.Join(dir, SafetensorsFile), odd, 0o644)
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	sameWeights(t, got, w)
}

func TestExportFailureLeavesNoPartialFile(t *testing.T) {
	w := tinyWeights(t, 1)
	dir := t.TempDir()
	// model.safetensors is a non-empty directory: the final rename fails.
	if err := os.MkdirAll(filepath.Join(dir, SafetensorsFile, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Export(dir); err == nil {
		t.Fatal("export succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != SafetensorsFile {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("dir holds %v", names)
	}

	// Inconsistent weights are refused before anything is written.
	bad := *w
	bad.Norm = bad.Norm[:10]
	dir2 := t.TempDir()
	if err := bad.Export(dir2); err == nil || !strings.Contains(err.Error(), "model.norm.weight") {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(dir2); len(entries) != 0 {
		t.Fatalf("wrote %d files", len(entries))
	}
}

// BenchmarkLoad06B exports Synth(qwen3-0.6b) once and times Load (mmap, no
// conversion) of the 1.2 GB checkpoint.
func BenchmarkLoad06B(b *testing.B) {
	cfg, _ := Preset("qwen3-0.6b")
	w, err := Synth(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := w.Export(dir); err != nil {
		b.Fatal(err)
	}
	w = nil
	b.ResetTimer()
	for b.Loop() {
		got, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Layers) != 28 {
			b.Fatal("layers")
		}
		got.Close()
	}
}
