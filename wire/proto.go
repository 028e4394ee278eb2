package wire

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
)

// Version is the protocol version this package speaks.
const Version = 1

// Operations (the "op" of a request).
const (
	OpHello  = "hello"
	OpAdmit  = "admit"
	OpDecode = "decode"
	OpFinish = "finish"
	OpReset  = "reset"
	OpBye    = "bye"
)

// Logits modes an engine can offer (Caps.Logits).
const (
	// LogitsNone: tokens only (the minimum).
	LogitsNone = "none"
	// LogitsTopK: the top_k largest logits (ids and values) and the digest
	// of the full row.
	LogitsTopK = "top_k"
	// LogitsFull: the full row, bf16, base64.
	LogitsFull = "full"
)

// Observations an engine can offer (Caps.Observes).
const (
	// ObsCurPos: each sequence's device cur_pos after the call (its length).
	ObsCurPos = "cur_pos"
	// ObsPageTable: each sequence's page-table row as the device holds it.
	ObsPageTable = "page_table"
	// ObsKVWrites: every KV-cache row the call wrote.
	ObsKVWrites = "kv_writes"
	// ObsFindings: hazards the engine's own device checker saw.
	ObsFindings = "findings"
)

// Model names the weights: a synthetic preset and its seed (qwen3.Synth),
// the Hugging Face config.json of that model, and a directory holding it
// as config.json + model.safetensors (qwen3.Weights.Export), so an engine
// may either synthesise or load.
type Model struct {
	Preset  string          `json:"preset"`
	Seed    uint64          `json:"seed,string"`
	Config  json.RawMessage `json:"config,omitempty"`
	Weights string          `json:"weights,omitempty"`
}

// Hints are the scenario's options for offcard's own engine (page-table
// width policy, mode, prefill mode, recapture period, simulator arch and
// sanitizer, the engine's read-back check). Another engine ignores them.
type Hints struct {
	Width          string `json:"width,omitempty"`
	Mode           string `json:"mode,omitempty"`
	Prefill        string `json:"prefill,omitempty"`
	RecaptureEvery int    `json:"recapture_every,omitempty"`
	Arch           string `json:"arch,omitempty"`
	Strict         bool   `json:"strict,omitempty"`
	Verify         bool   `json:"verify,omitempty"`
}

// Hello is the first request: what to run.
type Hello struct {
	Op        string `json:"op"`
	Version   int    `json:"version"`
	Model     Model  `json:"model"`
	BlockSize int    `json:"block_size"`
	NumBlocks int    `json:"num_blocks"`
	Capacity  int    `json:"capacity"`
	Hints     *Hints `json:"hints,omitempty"`
}

// Step is one sequence's entry in a decode batch.
type Step struct {
	Seq    int     `json:"seq"`
	Token  int32   `json:"token"`
	Pos    int     `json:"pos"`
	Blocks []int32 `json:"blocks"`
}

// Request is any request, as an engine parses it: Op says which fields
// mean something (hello: Version..Hints; admit: Seq, Prompt, Blocks;
// decode: Batch; finish: Seq; reset, bye: nothing).
type Request struct {
	Op        string  `json:"op"`
	Version   int     `json:"version,omitempty"`
	Model     *Model  `json:"model,omitempty"`
	BlockSize int     `json:"block_size,omitempty"`
	NumBlocks int     `json:"num_blocks,omitempty"`
	Capacity  int     `json:"capacity,omitempty"`
	Hints     *Hints  `json:"hints,omitempty"`
	Seq       int     `json:"seq"`
	Prompt    []int32 `json:"prompt,omitempty"`
	Blocks    []int32 `json:"blocks,omitempty"`
	Batch     []Step  `json:"batch,omitempty"`
}

// Caps is what an engine answers to hello: what it can give.
type Caps struct {
	Version int    `json:"version"`
	Engine  string `json:"engine,omitempty"`
	// Logits is none, top_k or full; TopK the number of entries of top_k.
	Logits string `json:"logits,omitempty"`
	TopK   int    `json:"top_k,omitempty"`
	// Exact: the engine claims bit-exactness with the reference (full
	// rows and digests are then compared bit for bit).
	Exact bool `json:"exact,omitempty"`
	// Observes lists the observations the engine reports (Obs*).
	Observes []string `json:"observes,omitempty"`
	// PagePad, with page_table, is the value of every page-table column
	// past a sequence's blocks (then checked); absent: not checked.
	PagePad *int32 `json:"page_pad,omitempty"`
}

// Offers reports whether the engine offers observation o.
func (c Caps) Offers(o string) bool {
	for _, x := range c.Observes {
		if x == o {
			return true
		}
	}
	return false
}

// Output is one processed position's result on the wire.
type Output struct {
	Seq   int   `json:"seq"`
	Pos   int   `json:"pos"`
	Token int32 `json:"token"`
	// Logits is the full row: little-endian bf16 values, base64 (std).
	Logits string `json:"logits,omitempty"`
	// TopIDs and TopLogits: the top_k largest logits, largest first.
	TopIDs    []int32   `json:"top_ids,omitempty"`
	TopLogits []float32 `json:"top_logits,omitempty"`
	// Digest is dump.Digest of the full row (the dump format's digest).
	Digest string `json:"digest,omitempty"`
}

// SeqObs is one sequence's device state after a call.
type SeqObs struct {
	Seq int `json:"seq"`
	// CurPos is the device's cur_pos for the sequence after the call:
	// its length (the position its next token will take).
	CurPos *int `json:"cur_pos,omitempty"`
	// PageRow is the sequence's page-table row as the device holds it.
	PageRow []int32 `json:"page_row,omitempty"`
}

// KVWrite is one KV-cache row write: layer, "k" or "v", the sequence, the
// position it was written for, and the block and row it landed in.
// Layer -1: a buffer that is no KV cache of the engine; Seq -1: no
// sequence of the call.
type KVWrite struct {
	Layer int    `json:"layer"`
	KV    string `json:"kv"`
	Seq   int    `json:"seq"`
	Pos   int64  `json:"pos"`
	Block int64  `json:"block"`
	Row   int64  `json:"row"`
}

// Observations are what an engine saw on its device during a call.
type Observations struct {
	Seqs []SeqObs `json:"seqs,omitempty"`
	// IdleRows (with page_table) are the page-table rows no sequence of
	// the call uses (free slots, live sequences not in the batch), as the
	// device holds them: all page_pad, when the engine names a pad.
	IdleRows [][]int32 `json:"idle_rows,omitempty"`
	KVWrites []KVWrite `json:"kv_writes,omitempty"`
	Findings []string  `json:"findings,omitempty"`
}

// Reply is any reply: ok, or error; hello's caps; a call's outputs and
// observations.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	*Caps
	Outputs []Output      `json:"outputs,omitempty"`
	Obs     *Observations `json:"obs,omitempty"`
}

// EncodeLogits is a row as Output.Logits carries it: every value rounded
// to bf16 (round to nearest even), little-endian, base64.
func EncodeLogits(row []float32) string {
	b := make([]byte, 2*len(row))
	for i, x := range row {
		binary.LittleEndian.PutUint16(b[2*i:], toBF16(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeLogits reads Output.Logits back, widened to float32 (exact).
func DecodeLogits(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("logits: %d bytes, not bf16 values", len(b))
	}
	row := make([]float32, len(b)/2)
	for i := range row {
		row[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
	return row, nil
}

// toBF16 rounds to bfloat16 (nearest even; NaN stays a quiet NaN).
func toBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if x != x {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FromOutputs turns a Decoder's outputs into wire outputs as caps say.
func FromOutputs(outs []qwen3.Output, c Caps) []Output {
	w := make([]Output, len(outs))
	for i, o := range outs {
		w[i] = Output{Seq: int(o.Seq), Pos: o.Pos, Token: o.Token}
		switch c.Logits {
		case LogitsFull:
			w[i].Logits = EncodeLogits(o.Logits)
		case LogitsTopK:
			w[i].TopIDs, w[i].TopLogits = dump.Top(o.Logits, c.TopK)
			w[i].Digest = dump.Digest(o.Logits)
		}
	}
	return w
}

// checkCaps validates a hello reply.
func checkCaps(c *Caps) error {
	if c == nil {
		return fmt.Errorf("hello reply without a version")
	}
	if c.Version != Version {
		return fmt.Errorf("engine speaks protocol version %d, offcard %d", c.Version, Version)
	}
	switch c.Logits {
	case "", LogitsNone:
		c.Logits = LogitsNone
	case LogitsFull:
	case LogitsTopK:
		if c.TopK < 1 {
			return fmt.Errorf("logits top_k with top_k %d: want at least 1", c.TopK)
		}
	default:
		return fmt.Errorf("logits %q: want none, top_k or full", c.Logits)
	}
	for _, o := range c.Observes {
		switch o {
		case ObsCurPos, ObsPageTable, ObsKVWrites, ObsFindings:
		default:
			return fmt.Errorf("observes %q: want %s", o, strings.Join([]string{ObsCurPos, ObsPageTable, ObsKVWrites, ObsFindings}, ", "))
		}
	}
	return nil
}
