package qwen3_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
)

// The qwen3-0.6b per-layer shape (one layer, vocabulary cut), one user,
// under stale L1 and strict, on both archs: a prompt of 30 tokens
// prefilled by decode steps, then decode steps to position 33 across the
// first block boundary. Every KV row must land in the block the host's
// table names. On the real engine it does; TestEngineOneColumnStale06B
// runs this with the seed's [C,1] page table put back and reads the lines
// it prints.
func TestEngineStale06BVictim(t *testing.T) {
	cfg, err := qwen3.Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NumHiddenLayers, cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 1, 2048, 1, 2
	w, err := qwen3.Synth(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	blocks := []int32{3, 5}
	bad := false
	for _, arch := range []sim.Arch{sim.Wormhole, sim.Blackhole} {
		dev, err := sim.New(sim.Options{Arch: arch, L1: sim.L1Stale, Strict: true, LogKV: true})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := qwen3.NewEngine(dev, w, qwen3.EngineOptions{Capacity: 1, BlockSize: 32, NumBlocks: 8,
			Width: kvpage.Dynamic(), Mode: qwen3.ModeEager, Prefill: qwen3.PrefillDecode})
		if err != nil {
			t.Fatal(err)
		}
		toks := make([]int32, 30)
		for i := range toks {
			toks[i] = int32(10 + 7*i)
		}
		if _, err := eng.Prefill(qwen3.Prefill{Seq: 0, Tokens: toks, Blocks: blocks}); err != nil {
			t.Fatalf("%v: prefill: %v", arch, err)
		}
		for pos := 30; pos < 34; pos++ {
			if _, err := eng.Decode([]qwen3.Step{{Seq: 0, Token: 7, Pos: pos, Blocks: blocks}}); err != nil {
				t.Fatalf("%v: decode pos %d: %v", arch, pos, err)
			}
		}
		for _, k := range dev.KVLog() {
			if int(k.Virtual) >= len(blocks) || k.Physical != uint32(blocks[k.Virtual]) {
				bad = true
				t.Logf("WRONG-BLOCK arch=%v op=%s pos=%d block=%d host=%d", arch, k.Op, k.Pos, k.Physical, blocks[min(int(k.Virtual), len(blocks)-1)])
			}
		}
		for _, f := range dev.Findings() {
			bad = true
			t.Logf("FINDING arch=%v %s", arch, f)
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if bad {
		t.Fatal("KV rows outside the host's blocks, or strict findings (lines above)")
	}
}

var (
	wrongBlockRE = regexp.MustCompile(`WRONG-BLOCK arch=(\w+) op=paged_update_cache pos=32 block=(\d+) host=(\d+)`)
	// strict's finding for the KV update's read of page_table[0][1]: the
	// word the kernel loaded lies just past the row's 4-byte CB c_3.
	pastRowRE = regexp.MustCompile(`FINDING arch=(\w+) ` + string(sim.PTReadPastRow) + `: paged_update_cache core 0 user 0 index 1 tensor t\d+ addr (0x[0-9a-f]+): ` +
		`page_table\[0\]\[1\] read but the row has 1 entries; the kernel loaded L1 (0x[0-9a-f]+), past the 4 B page-table CB at (0x[0-9a-f]+) \(stale L1, not the host's table\)`)
)

// The seed's [C,1] page table (pt-one-column) at the qwen3-0.6b per-layer
// geometry under stale L1: at position 32 the KV-update reader loads
// page_table_ptr[1], the word past the one-column row's 4-byte CB c_3
// (reader_update_cache_interleaved_start_id.cpp). With one user and head
// dim 128 that CB is created at +60 KiB from the CB base
// (ttnn/cpp/ttnn/operations/experimental/paged_cache/device/update_cache/
// paged_update_cache_program_factory.cpp:171-173, 183-266: c_0, c_24/25,
// c_26 of 16 KiB, c_16 of 8 KiB, the index tile c_2 of 4 KiB, then c_3),
// and on core 0 the word past it is c_20 + 4
// of the K head norm's rms_norm, the last program before the update whose
// CBs reach there (rotary_embedding_hf's and to_memory_config's end below
// 32 KiB): bf16 x*x of head 0's dims 2 and 3
// (layernorm_op_multi_core.cpp:221-239, 682-798). So the row goes, on both
// archs, to a block that is neither 0 (zero L1) nor the poison pattern:
// a word of two non-negative finite bf16 squares. Strict still names the
// read past the row.
func TestEngineOneColumnStale06B(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a mutated copy")
	}
	out, red := runMutant(t, seedMutants[0].edits, "^TestEngineStale06BVictim$")
	if !red {
		t.Fatalf("the victim passed with the [C,1] table:\n%s", out)
	}
	seen := map[string]uint32{}
	for _, m := range wrongBlockRE.FindAllStringSubmatch(out, -1) {
		b, _ := strconv.ParseUint(m[2], 10, 32)
		seen[m[1]] = uint32(b)
	}
	for _, arch := range []string{"wormhole", "blackhole"} {
		b, ok := seen[arch]
		if !ok {
			t.Fatalf("%s: no wrong-block write at position 32:\n%s", arch, out)
		}
		lo, hi := bf16.BF16(b&0xFFFF), bf16.BF16(b>>16)
		if b == 0 || b == 0x7FC17FC1 || lo.IsNaN() || hi.IsNaN() || lo.Float32() < 0 || hi.Float32() < 0 || lo&0x7FFF == 0x7F80 || hi&0x7FFF == 0x7F80 {
			t.Errorf("%s: position 32 went to block %#x: want a word of two non-negative finite bf16 squares (stale x*x), not 0 or poison", arch, b)
		}
		named := false
		for _, m := range pastRowRE.FindAllStringSubmatch(out, -1) {
			addr, _ := strconv.ParseUint(m[2], 0, 64)
			loaded, _ := strconv.ParseUint(m[3], 0, 64)
			cb, _ := strconv.ParseUint(m[4], 0, 64)
			named = named || (m[1] == arch && addr == loaded && loaded == cb+4)
		}
		if !named {
			t.Errorf("%s: strict did not name the read of page_table[0][1] past the row's 4 B CB:\n%s", arch, out)
		}
		t.Logf("%s: position 32's KV row went to block %d (%#x: bf16 %v, %v)", arch, b, b, lo.Float32(), hi.Float32())
	}
}
