package qwen3

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/internal/inputfile"
	"github.com/offcard/offcard/internal/membudget"
	"github.com/offcard/offcard/qwen3/safetensors"
	"github.com/x448/float16"
)

// File names inside a model directory.
const (
	ConfigFile      = "config.json"
	SafetensorsFile = "model.safetensors"
	IndexFile       = safetensors.IndexFile
)

// LoadOptions tunes LoadWith.
type LoadOptions struct {
	// Notice, if set, receives one-line notices about things Load accepted
	// but changed: tensors converted to bf16, an lm_head.weight that
	// differs from the tied embeddings (and is ignored).
	Notice func(string)
}

// Load reads a Hugging Face Qwen3 checkpoint directory: config.json, then
// model.safetensors or, failing that, model.safetensors.index.json and its
// shards. See LoadWith.
func Load(dir string) (*Weights, error) { return LoadWith(dir, LoadOptions{}) }

// LoadWith is Load with options.
//
// Every tensor must carry its Hugging Face name, the shape the config
// implies, and dtype BF16, F32 or F16. BF16 tensors are used in place from
// the file's read-only image (safetensors.Open: on Linux the file read
// into huge pages, elsewhere a memory map; copied only when misaligned); F32 and F16 ones
// are rounded to bf16 (nearest, ties to even) into the heap, with a notice.
// A missing, unexpected, mis-shaped or mistyped tensor is an error naming
// it. With tie_word_embeddings, LMHead is Embed, and an lm_head.weight in
// the file is accepted but not used (a notice if it differs); without it,
// lm_head.weight is required.
//
// For a sharded checkpoint every tensor of the weight map must be in its
// shard, every tensor of a shard must be listed for that shard, and no
// tensor may appear twice.
//
// Close the Weights to unmap the files.
func LoadWith(dir string, opts LoadOptions) (*Weights, error) {
	notice := opts.Notice
	if notice == nil {
		notice = func(string) {}
	}
	cfg, err := LoadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	files, tensors, err := openTensors(dir)
	if err != nil {
		return nil, err
	}
	// The config's dimensions are checked against what the files hold
	// before the model is laid out (a config of a million layers took
	// gigabytes to lay out before its missing tensors were listed): a
	// layer count past the files' last layer, or weights of more than
	// twice the bytes of the files' tensors (a different model, not a
	// tensor or two missing, which assemble names one by one).
	if err := fitsTensors(cfg, files, tensors); err != nil {
		for _, f := range files {
			_ = f.Close()
		}
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	closeAll := func() error {
		var errs []error
		for _, f := range files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
	w, err := assemble(cfg, tensors, notice)
	if err != nil {
		_ = closeAll()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	w.closer = closeAll
	return w, nil
}

// fitsTensors checks cfg's layer count and size against the tensors.
func fitsTensors(cfg Config, files []*safetensors.File, tensors map[string]sourced) error {
	held, layers := int64(0), 0
	for name, t := range tensors {
		held = membudget.Add(held, int64(len(t.Data)))
		if rest, ok := strings.CutPrefix(name, "model.layers."); ok {
			i, _, _ := strings.Cut(rest, ".")
			if n, err := strconv.Atoi(i); err == nil && n >= layers && n < cfg.NumHiddenLayers {
				layers = n + 1
			}
		}
	}
	if cfg.NumHiddenLayers > layers+1 {
		last := fmt.Sprintf("stop at layer %d", layers-1)
		if layers == 0 {
			last = "have no layer"
		}
		return fmt.Errorf("config.json: num_hidden_layers %d, but the tensors of %s %s", cfg.NumHiddenLayers, tensorFiles(files), last)
	}
	if need := membudget.Mul(cfg.Params(), 2); need/2 > held {
		return fmt.Errorf("config.json (hidden_size %d, intermediate_size %d, num_hidden_layers %d, num_attention_heads %d, num_key_value_heads %d, head_dim %d, vocab_size %d) implies %d parameters (%s in bf16), more than twice the %s of tensors in %s",
			cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.VocabSize, cfg.Params(), membudget.Size(need), membudget.Size(held), tensorFiles(files))
	}
	return nil
}

// tensorFiles names the checkpoint's tensor files for a message.
func tensorFiles(files []*safetensors.File) string {
	if len(files) == 1 {
		return SafetensorsFile
	}
	return fmt.Sprintf("the %d shards of %s", len(files), IndexFile)
}

// sourced is a tensor and the file it came from.
type sourced struct {
	safetensors.Tensor
	file string
}

func openTensors(dir string) ([]*safetensors.File, map[string]sourced, error) {
	single := filepath.Join(dir, SafetensorsFile)
	if _, err := os.Stat(single); err == nil {
		f, err := safetensors.Open(single)
		if err != nil {
			return nil, nil, err
		}
		out := map[string]sourced{}
		for _, t := range f.Tensors() {
			out[t.Name] = sourced{t, SafetensorsFile}
		}
		return []*safetensors.File{f}, out, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}

	indexPath := filepath.Join(dir, IndexFile)
	data, err := inputfile.ReadFile(indexPath, inputfile.MaxJSON, "a safetensors index")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s: no %s or %s", dir, SafetensorsFile, IndexFile)
	}
	if err != nil {
		return nil, nil, err
	}
	ix, err := safetensors.ParseIndex(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", indexPath, err)
	}
	var files []*safetensors.File
	fail := func(err error) ([]*safetensors.File, map[string]sourced, error) {
		for _, f := range files {
			_ = f.Close()
		}
		return nil, nil, err
	}
	out := map[string]sourced{}
	for _, shard := range ix.Shards() {
		f, err := safetensors.Open(filepath.Join(dir, shard))
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
		for _, t := range f.Tensors() {
			listed, ok := ix.WeightMap[t.Name]
			switch {
			case !ok:
				return fail(fmt.Errorf("%s: tensor %s is in shard %s but not in the index's weight_map", dir, t.Name, shard))
			case listed != shard:
				if prev, dup := out[t.Name]; dup {
					return fail(fmt.Errorf("%s: tensor %s appears in shards %s and %s", dir, t.Name, prev.file, shard))
				}
				return fail(fmt.Errorf("%s: tensor %s is in shard %s, but the index lists it in %s", dir, t.Name, shard, listed))
			}
			if prev, dup := out[t.Name]; dup {
				return fail(fmt.Errorf("%s: tensor %s appears in shards %s and %s", dir, t.Name, prev.file, shard))
			}
			out[t.Name] = sourced{t, shard}
		}
	}
	names := make([]string, 0, len(ix.WeightMap))
	for n := range ix.WeightMap {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return fail(fmt.Errorf("%s: tensor %s is listed in the index for %s but is not in that shard", dir, n, ix.WeightMap[n]))
		}
	}
	return files, out, nil
}

// spec is one tensor the model needs: its HF name, shape, and where it goes.
type spec struct {
	name  string
	shape []int
	dst   *[]bf16.BF16
}

// specs lists w's tensors under their Hugging Face names. lm_head.weight is
// included only when the embeddings are untied.
func specs(w *Weights) []spec {
	c := w.Config
	h, q, kv, inter, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.HeadDim
	out := []spec{
		{"model.embed_tokens.weight", []int{c.VocabSize, h}, &w.Embed},
		{"model.norm.weight", []int{h}, &w.Norm},
	}
	if !c.TieWordEmbeddings {
		out = append(out, spec{"lm_head.weight", []int{c.VocabSize, h}, &w.LMHead})
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		out = append(out,
			spec{p + "input_layernorm.weight", []int{h}, &l.InputNorm},
			spec{p + "self_attn.q_proj.weight", []int{q, h}, &l.Q},
			spec{p + "self_attn.k_proj.weight", []int{kv, h}, &l.K},
			spec{p + "self_attn.v_proj.weight", []int{kv, h}, &l.V},
			spec{p + "self_attn.o_proj.weight", []int{h, q}, &l.O},
			spec{p + "self_attn.q_norm.weight", []int{hd}, &l.QNorm},
			spec{p + "self_attn.k_norm.weight", []int{hd}, &l.KNorm},
			spec{p + "post_attention_layernorm.weight", []int{h}, &l.PostNorm},
			spec{p + "mlp.gate_proj.weight", []int{inter, h}, &l.Gate},
			spec{p + "mlp.up_proj.weight", []int{inter, h}, &l.Up},
			spec{p + "mlp.down_proj.weight", []int{h, inter}, &l.Down},
		)
	}
	return out
}

func assemble(cfg Config, tensors map[string]sourced, notice func(string)) (*Weights, error) {
	w := &Weights{Config: cfg, Layers: make([]Layer, cfg.NumHiddenLayers)}
	want := specs(w)
	wanted := make(map[string]bool, len(want))
	for _, s := range want {
		wanted[s.name] = true
	}
	tiedHead := cfg.TieWordEmbeddings
	var problems []string
	for _, s := range want {
		if _, ok := tensors[s.name]; !ok {
			problems = append(problems, s.name+": missing")
		}
	}
	var extra []string
	for name := range tensors {
		if !wanted[name] && !(tiedHead && name == "lm_head.weight") {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		problems = append(problems, name+": unexpected tensor (not part of a Qwen3 model with this config)")
	}
	if len(problems) > 0 {
		return nil, summarize(problems)
	}

	converted := map[string]int{}
	for _, s := range want {
		t := tensors[s.name]
		if err := checkShape(t, s.shape); err != nil {
			return nil, err
		}
		v, err := toBF16(t)
		if err != nil {
			return nil, err
		}
		if t.DType != "BF16" {
			converted[t.DType]++
		}
		*s.dst = v
	}
	if tiedHead {
		w.LMHead = w.Embed
		if t, ok := tensors["lm_head.weight"]; ok {
			if err := checkShape(t, []int{cfg.VocabSize, cfg.HiddenSize}); err != nil {
				return nil, err
			}
			head, err := toBF16(t)
			if err != nil {
				return nil, err
			}
			if !slices.Equal(head, w.Embed) {
				notice("lm_head.weight differs from model.embed_tokens.weight although tie_word_embeddings is true; using model.embed_tokens.weight, as Hugging Face does")
			}
		}
	}
	if len(converted) > 0 {
		var parts []string
		for _, dt := range []string{"F32", "F16"} {
			if n := converted[dt]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, dt))
			}
		}
		notice(fmt.Sprintf("converted %s tensor(s) to bf16 (round to nearest, ties to even)", strings.Join(parts, " and ")))
	}
	return w, nil
}

func summarize(problems []string) error {
	if len(problems) == 1 {
		return errors.New(problems[0])
	}
	return fmt.Errorf("%s (and %d more problems)", problems[0], len(problems)-1)
}

func checkShape(t sourced, want []int) error {
	if !slices.Equal(t.Shape, want) {
		return fmt.Errorf("%s: shape %v, config wants %v", t.Name, t.Shape, want)
	}
	return nil
}

// toBF16 gives t's values as bf16: in place for BF16, rounded for F32/F16.
func toBF16(t sourced) ([]bf16.BF16, error) {
	p := t.Data
	switch t.DType {
	case "BF16":
		return bf16.FromBytes(p), nil
	case "F32":
		out := make([]bf16.BF16, len(p)/4)
		for i := range out {
			out[i] = bf16.FromFloat32(math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:])))
		}
		return out, nil
	case "F16":
		out := make([]bf16.BF16, len(p)/2)
		for i := range out {
			out[i] = bf16.FromFloat32(float16.Frombits(binary.LittleEndian.Uint16(p[2*i:])).Float32())
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: dtype %s, want BF16 (or F32/F16, converted)", t.Name, t.DType)
}

// Export writes w as a Hugging Face checkpoint directory, creating dir if
// needed: config.json (model_type "qwen3", architectures
// ["Qwen3ForCausalLM"], torch_dtype "bfloat16", every Config field) and
// model.safetensors (all BF16, __metadata__ {"format":"pt"}, laid out as the
// reference writer does, without lm_head.weight when the embeddings are
// tied). Each file is written to a temporary file in dir and renamed into
// place, so a failure never leaves a partly written config.json or
// model.safetensors. With tied embeddings LMHead must equal Embed.
func (w *Weights) Export(dir string) error {
	c := w.Config
	if err := c.Validate(); err != nil {
		return err
	}
	if len(w.Layers) != c.NumHiddenLayers {
		return fmt.Errorf("export: %d layers, config says %d", len(w.Layers), c.NumHiddenLayers)
	}
	all := specs(w)
	ts := make([]safetensors.Tensor, 0, len(all))
	for _, s := range all {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		if len(*s.dst) != n {
			return fmt.Errorf("export: %s has %d values, config wants %v (%d)", s.name, len(*s.dst), s.shape, n)
		}
		ts = append(ts, safetensors.Tensor{Name: s.name, DType: "BF16", Shape: s.shape, Data: bf16View(*s.dst)})
	}
	if c.TieWordEmbeddings && !sameValues(w.LMHead, w.Embed) {
		return errors.New("export: tie_word_embeddings is set but LMHead differs from Embed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeAtomic(dir, SafetensorsFile, func(f *os.File) error {
		return safetensors.Write(f, ts, map[string]string{"format": "pt"})
	}); err != nil {
		return err
	}
	return writeAtomic(dir, ConfigFile, func(f *os.File) error {
		_, err := f.Write(configJSON(c))
		return err
	})
}

func sameValues(a, b []bf16.BF16) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(bf16View(a), bf16View(b))
}

// writeAtomic writes dir/name through a temporary file and a rename.
func writeAtomic(dir, name string, write func(*os.File) error) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bf16View is s's little-endian bytes: s's own memory on little-endian
// hosts, a copy elsewhere. Read it only.
func bf16View(s []bf16.BF16) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
	}
	return bf16.Bytes(s)
}
