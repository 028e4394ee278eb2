package wire

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
)

// Version is the newest protocol version this package speaks; MinVersion
// the oldest it still accepts. offcard's hello names Version; an engine
// answers with the version it speaks, at most the hello's (an engine
// written for version 1 answers 1 and is checked as a version 1 engine).
const (
	Version    = 3
	MinVersion = 1
)

// Operations (the "op" of a request).
const (
	OpHello  = "hello"
	OpAdmit  = "admit"
	OpDecode = "decode"
	OpFinish = "finish"
	OpReset  = "reset"
	OpBye    = "bye"

	// Version 3: the serving calls, sent only to an engine whose hello
	// reply lists them (Caps.Serves). Their names are qwen3's.

	// OpPrefillFrom: a prompt chunk from a start position over KV already
	// in the cache (qwen3.PrefixPrefiller).
	OpPrefillFrom = qwen3.ServePrefillFrom
	// OpVerify: speculative decoding's verify step, k tokens per sequence
	// (qwen3.Verifier).
	OpVerify = qwen3.ServeVerify
	// OpCopyBlocks: block copies, the copy-on-write of a shared block
	// (qwen3.BlockCopier).
	OpCopyBlocks = qwen3.ServeCopyBlocks
)

// servingCalls are the serving calls of version 3, in the order a hello
// reply lists them.
var servingCalls = []string{OpPrefillFrom, OpVerify, OpCopyBlocks}

// ServingCalls lists the serving calls protocol version v defines (none
// before version 3).
func ServingCalls(v int) []string {
	if v < 3 {
		return nil
	}
	return slices.Clone(servingCalls)
}

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

	// Version 2.

	// ObsRegime: what the device ran during each call (Observations.Regime:
	// none, eager, capture or replay).
	ObsRegime = "regime"
	// ObsHostWrites: the host-to-device writes each call made
	// (Observations.HostWrites).
	ObsHostWrites = "host_writes"
	// ObsMemory: the device's live allocations and traces after the hello
	// and after each call (Observations.Mem).
	ObsMemory = "memory"
	// ObsClose: what the device still holds after the engine tore itself
	// down at bye (Observations.Mem on the bye reply).
	ObsClose = "close"
)

// observations lists the observation names of each version.
var observations = map[int][]string{
	1: {ObsCurPos, ObsPageTable, ObsKVWrites, ObsFindings},
	2: {ObsCurPos, ObsPageTable, ObsKVWrites, ObsFindings, ObsRegime, ObsHostWrites, ObsMemory, ObsClose},
	3: {ObsCurPos, ObsPageTable, ObsKVWrites, ObsFindings, ObsRegime, ObsHostWrites, ObsMemory, ObsClose},
}

// Observes lists the observation names protocol version v defines.
func Observes(v int) []string { return append([]string(nil), observations[v]...) }

// Regimes of a call (Observations.Regime).
const (
	// RegimeNone: the call ran nothing on the device.
	RegimeNone = "none"
	// RegimeEager: it launched programs one by one, no trace.
	RegimeEager = "eager"
	// RegimeCapture: it captured a trace (and ran it, or the captured ops).
	RegimeCapture = "capture"
	// RegimeReplay: it executed a trace captured by an earlier call.
	RegimeReplay = "replay"
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
	// TraceRegion is the device's trace region in bytes (0:
	// ttnn's default, no region: traces in ordinary DRAM).
	TraceRegion uint64 `json:"trace_region,omitempty"`
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

// Step is one sequence's entry in a decode batch (Token) or, in version
// 3, a verify batch (Tokens: k >= 1 tokens at positions Pos..Pos+k-1).
type Step struct {
	Seq    int     `json:"seq"`
	Token  int32   `json:"token"`
	Tokens []int32 `json:"tokens,omitempty"`
	Pos    int     `json:"pos"`
	Blocks []int32 `json:"blocks"`
}

// BlockCopy is one copy of a copy_blocks request: every layer's keys and
// values of block Src, all block_size rows, written over block Dst.
type BlockCopy struct {
	Src int32 `json:"src"`
	Dst int32 `json:"dst"`
}

// Request is any request, as an engine parses it: Op says which fields
// mean something (hello: Version..Hints; admit: Seq, Prompt, Blocks;
// decode: Batch (Token); finish: Seq; reset, bye: nothing; version 3:
// prefill_from: Seq, Start, Tokens, Blocks; verify: Batch (Tokens);
// copy_blocks: Copies).
type Request struct {
	Op        string      `json:"op"`
	Version   int         `json:"version,omitempty"`
	Model     *Model      `json:"model,omitempty"`
	BlockSize int         `json:"block_size,omitempty"`
	NumBlocks int         `json:"num_blocks,omitempty"`
	Capacity  int         `json:"capacity,omitempty"`
	Hints     *Hints      `json:"hints,omitempty"`
	Seq       int         `json:"seq"`
	Prompt    []int32     `json:"prompt,omitempty"`
	Start     int         `json:"start,omitempty"`
	Tokens    []int32     `json:"tokens,omitempty"`
	Blocks    []int32     `json:"blocks,omitempty"`
	Batch     []Step      `json:"batch,omitempty"`
	Copies    []BlockCopy `json:"copies,omitempty"`
}

// decodeEntry and verifyEntry are a Step as decode and verify send it.
type decodeEntry struct {
	Seq    int     `json:"seq"`
	Token  int32   `json:"token"`
	Pos    int     `json:"pos"`
	Blocks []int32 `json:"blocks"`
}

type verifyEntry struct {
	Seq    int     `json:"seq"`
	Tokens []int32 `json:"tokens"`
	Pos    int     `json:"pos"`
	Blocks []int32 `json:"blocks"`
}

// MarshalJSON writes the fields op uses, and only those (admit: seq,
// prompt, blocks; decode: batch of seq, token, pos, blocks; finish: seq;
// reset, bye: none; hello: version to hints; prefill_from: seq, start,
// tokens, blocks; verify: batch of seq, tokens, pos, blocks; copy_blocks:
// copies), so that a request carries no key its op does not define
// (protocol.schema.json).
func (r Request) MarshalJSON() ([]byte, error) {
	switch r.Op {
	case OpHello:
		h := Hello{Op: r.Op, Version: r.Version, BlockSize: r.BlockSize, NumBlocks: r.NumBlocks, Capacity: r.Capacity, Hints: r.Hints}
		if r.Model != nil {
			h.Model = *r.Model
		}
		return json.Marshal(h)
	case OpAdmit:
		return json.Marshal(struct {
			Op     string  `json:"op"`
			Seq    int     `json:"seq"`
			Prompt []int32 `json:"prompt"`
			Blocks []int32 `json:"blocks"`
		}{r.Op, r.Seq, r.Prompt, r.Blocks})
	case OpDecode:
		b := make([]decodeEntry, len(r.Batch))
		for i, s := range r.Batch {
			b[i] = decodeEntry{s.Seq, s.Token, s.Pos, s.Blocks}
		}
		return json.Marshal(struct {
			Op    string        `json:"op"`
			Batch []decodeEntry `json:"batch"`
		}{r.Op, b})
	case OpPrefillFrom:
		return json.Marshal(struct {
			Op     string  `json:"op"`
			Seq    int     `json:"seq"`
			Start  int     `json:"start"`
			Tokens []int32 `json:"tokens"`
			Blocks []int32 `json:"blocks"`
		}{r.Op, r.Seq, r.Start, r.Tokens, r.Blocks})
	case OpVerify:
		b := make([]verifyEntry, len(r.Batch))
		for i, s := range r.Batch {
			b[i] = verifyEntry{s.Seq, s.Tokens, s.Pos, s.Blocks}
		}
		return json.Marshal(struct {
			Op    string        `json:"op"`
			Batch []verifyEntry `json:"batch"`
		}{r.Op, b})
	case OpCopyBlocks:
		return json.Marshal(struct {
			Op     string      `json:"op"`
			Copies []BlockCopy `json:"copies"`
		}{r.Op, r.Copies})
	case OpFinish:
		return json.Marshal(struct {
			Op  string `json:"op"`
			Seq int    `json:"seq"`
		}{r.Op, r.Seq})
	}
	return json.Marshal(struct {
		Op string `json:"op"`
	}{r.Op})
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
	// past the blocks that cover a sequence's positions, and of every
	// column of an idle row (then checked); absent: not checked.
	PagePad *int32 `json:"page_pad,omitempty"`
	// FollowsHints (version 2): the engine runs as the hello's hints say
	// (page-table width policy, eager or captured, prefill mode,
	// recapture period). The contract those options define is then
	// checked too: page-table rows exactly the width policy's width (with
	// page_table) and the regime cadence (with regime).
	FollowsHints bool `json:"follows_hints,omitempty"`
	// Serves (version 3) lists the serving calls the engine answers
	// (prefill_from, verify, copy_blocks); offcard sends no other. Absent:
	// none.
	Serves []string `json:"serves,omitempty"`
}

// Offers reports whether the engine offers observation o.
func (c Caps) Offers(o string) bool { return slices.Contains(c.Observes, o) }

// ServesCall reports whether the engine serves the serving call
// (OpPrefillFrom, OpVerify, OpCopyBlocks).
func (c Caps) ServesCall(call string) bool { return slices.Contains(c.Serves, call) }

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
// position it was written for (the device's cur_pos when it wrote), and
// the block and row it landed in. Layer -1: a buffer that is no KV cache
// of the engine; Seq -1: no sequence of the call.
//
// Clear (version 2) marks a write that stores no token's key or value:
// zeroing a freed or newly handed-out block, padding a prompt's last tile.
// A clear may land on any row that holds no position a live sequence has
// written (free blocks, rows past a sequence's length, rows it skipped);
// its Seq and Pos are then informational (-1 when none).
//
// A copy_blocks reply (version 3) reports each copy as writes of its
// destination block: every row 0..block_size-1 of Dst once per layer, K
// and V, with Seq -1 and Pos -1 (a copy stores rows for no sequence of
// the call and at no position: whatever Src's rows held), Clear false,
// and nothing else; the order is free. A copy that writes fewer rows of
// Dst, or any row of another block, is a wrong write.
type KVWrite struct {
	Layer int    `json:"layer"`
	KV    string `json:"kv"`
	Seq   int    `json:"seq"`
	Pos   int64  `json:"pos"`
	Block int64  `json:"block"`
	Row   int64  `json:"row"`
	Clear bool   `json:"clear,omitempty"`
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
	// Regime (version 2, with regime) is what the device ran during the
	// call: none, eager, capture or replay (Regime*). Required on every
	// admit, decode, finish and reset reply, and on every prefill_from,
	// verify and copy_blocks reply (version 3).
	Regime string `json:"regime,omitempty"`
	// HostWrites (version 2, with host_writes) counts the host-to-device
	// writes of the call (inputs, page table, anything). Required where
	// regime is.
	HostWrites *int `json:"host_writes,omitempty"`
	// Mem (version 2) is the device's memory after the call: with memory,
	// on the hello reply (after the model is built: the baseline) and on
	// every reply to a call (admit, decode, finish, reset; prefill_from,
	// verify, copy_blocks); with close, on the bye reply (after the engine
	// freed everything).
	Mem *Memory `json:"mem,omitempty"`
}

// Memory is what the device holds: the engine's buffers and traces, as
// the device layer counted them (not as the engine believes it left them).
type Memory struct {
	// Persistent counts the live buffers allocated before the hello reply
	// (weights, KV caches, anything built with the model).
	Persistent int `json:"persistent"`
	// Live lists the live buffers allocated after the hello reply.
	Live []Buffer `json:"live,omitempty"`
	// PageTable is the buffer of Live (or a persistent one) that the last
	// paged op (a KV update, paged attention, a paged prompt fill) read its
	// page table from; absent: no paged op ran yet.
	PageTable *int64 `json:"page_table,omitempty"`
	// Traces lists the live (captured, not released) traces.
	Traces []Trace `json:"traces,omitempty"`
}

// Buffer is one device buffer: an id unique within the session and,
// optionally, a description for reports (shape, dtype, address).
type Buffer struct {
	ID   int64  `json:"id"`
	What string `json:"what,omitempty"`
}

// Trace is one live trace and the buffers of Memory.Live it recorded (as
// an input or output of a captured op).
type Trace struct {
	ID      int64   `json:"id"`
	Buffers []int64 `json:"buffers,omitempty"`
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

// checkCaps validates a hello reply to a hello of version hv.
func checkCaps(c *Caps, hv int) error {
	if c == nil {
		return fmt.Errorf("hello reply without a version")
	}
	if c.Version < MinVersion || c.Version > hv {
		return fmt.Errorf("engine speaks protocol version %d, offcard %d to %d", c.Version, MinVersion, hv)
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
	known := observations[c.Version]
	for _, o := range c.Observes {
		if !slices.Contains(known, o) {
			return fmt.Errorf("observes %q: protocol version %d has %s", o, c.Version, strings.Join(known, ", "))
		}
	}
	if c.FollowsHints && c.Version < 2 {
		return fmt.Errorf("follows_hints is protocol version 2, the engine speaks %d", c.Version)
	}
	if len(c.Serves) > 0 && c.Version < 3 {
		return fmt.Errorf("serves is protocol version 3, the engine speaks %d", c.Version)
	}
	for i, s := range c.Serves {
		if !slices.Contains(servingCalls, s) {
			return fmt.Errorf("serves %q: protocol version %d has %s", s, c.Version, strings.Join(servingCalls, ", "))
		}
		if slices.Contains(c.Serves[:i], s) {
			return fmt.Errorf("serves %q twice", s)
		}
	}
	return nil
}

// CheckObs checks the observations of a reply to op (a request of the
// session) against what the engine offers: every field an offered
// observation requires on that reply is there and well-formed, and no
// field of an observation it does not offer is. Outputs are checked by
// the client.
func (c Caps) CheckObs(op string, o *Observations) error {
	var x Observations
	if o != nil {
		x = *o
	}
	call := op == OpAdmit || op == OpDecode || op == OpFinish || op == OpReset || slices.Contains(servingCalls, op)
	need := func(obs string, has bool, field string, required bool) error {
		switch {
		case has && !c.Offers(obs):
			return fmt.Errorf("obs.%s in the reply to %s, but the engine does not offer %s", field, op, obs)
		case required && !has && c.Offers(obs):
			return fmt.Errorf("no obs.%s in the reply to %s (the engine offers %s)", field, op, obs)
		}
		return nil
	}
	if err := need(ObsRegime, x.Regime != "", "regime", call); err != nil {
		return err
	}
	switch x.Regime {
	case "", RegimeNone, RegimeEager, RegimeCapture, RegimeReplay:
	default:
		return fmt.Errorf("obs.regime %q: want none, eager, capture or replay", x.Regime)
	}
	if err := need(ObsHostWrites, x.HostWrites != nil, "host_writes", call); err != nil {
		return err
	}
	if x.HostWrites != nil && *x.HostWrites < 0 {
		return fmt.Errorf("obs.host_writes %d: want a count", *x.HostWrites)
	}
	memObs := ObsMemory
	if op == OpBye {
		memObs = ObsClose
	}
	if err := need(memObs, x.Mem != nil, "mem", call || op == OpBye || op == OpHello); err != nil {
		return err
	}
	if m := x.Mem; m != nil {
		if m.Persistent < 0 {
			return fmt.Errorf("obs.mem.persistent %d: want a count", m.Persistent)
		}
		live := map[int64]bool{}
		for _, b := range m.Live {
			if live[b.ID] {
				return fmt.Errorf("obs.mem.live: buffer %d twice", b.ID)
			}
			live[b.ID] = true
		}
		for _, t := range m.Traces {
			for _, id := range t.Buffers {
				if !live[id] {
					return fmt.Errorf("obs.mem.traces: trace %d records buffer %d, which is not in live", t.ID, id)
				}
			}
		}
	}
	for _, w := range x.KVWrites {
		if w.Clear && c.Version < 2 {
			return fmt.Errorf("obs.kv_writes: clear is protocol version 2, the engine speaks %d", c.Version)
		}
	}
	return nil
}
