package wire_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// TestSchemaLines: a table of good and bad lines for each definition of
// the protocol's schema. Each bad line differs from a good one in one
// thing, so a schema that lost that rule lets it through.
func TestSchemaLines(t *testing.T) {
	hello := `{"op":"hello","version":2,"model":{"preset":"tiny","seed":"1","config":{"vocab_size":512},"weights":"/tmp/w"},"block_size":32,"num_blocks":8,"capacity":2,"hints":{"width":"dynamic","mode":"captured","recapture_every":0,"strict":true}}`
	for _, tc := range []struct {
		def, line string
		ok        bool
	}{
		{"hello", hello, true},
		{"hello", `{"op":"hello","version":1,"model":{"preset":"tiny","seed":"1"},"block_size":32,"num_blocks":8,"capacity":2}`, true},
		{"hello", strings.Replace(hello, `"seed":"1"`, `"seed":1`, 1), false},                                                       // the seed is a string
		{"hello", strings.Replace(hello, `"block_size":32,`, ``, 1), false},                                                         // required
		{"hello", strings.Replace(hello, `"preset":"tiny"`, `"preset":""`, 1), true},                                                // a checkpoint (--model DIR)
		{"hello", `{"op":"hello","version":1,"model":{"preset":"","seed":"0"},"block_size":32,"num_blocks":8,"capacity":2}`, false}, // neither a preset nor weights
		{"hello", strings.Replace(hello, `"strict":true`, `"strict":true,"typo":1`, 1), false},                                      // unknown hint
		{"hello", strings.Replace(hello, `"version":2`, `"version":0`, 1), false},
		{"request", hello, true},
		{"admit", `{"op":"admit","seq":0,"prompt":[17,4,99],"blocks":[5]}`, true},
		{"admit", `{"op":"admit","seq":0,"prompt":[],"blocks":[5]}`, false},
		{"admit", `{"op":"admit","seq":0,"prompt":[1],"blocks":[-1]}`, false},
		{"admit", `{"op":"admit","prompt":[1],"blocks":[5]}`, false},
		{"decode", `{"op":"decode","batch":[{"seq":0,"token":324,"pos":3,"blocks":[5]},{"seq":4,"token":1,"pos":0,"blocks":[6]}]}`, true},
		{"decode", `{"op":"decode","batch":[]}`, false},
		{"decode", `{"op":"decode","seq":0,"batch":[{"seq":0,"token":324,"pos":3,"blocks":[5]}]}`, false}, // no seq on decode
		{"decode", `{"op":"decode","batch":[{"seq":0,"token":324,"pos":-1,"blocks":[5]}]}`, false},
		{"finish", `{"op":"finish","seq":3}`, true},
		{"finish", `{"op":"finish"}`, false},
		{"reset", `{"op":"reset"}`, true},
		{"bye", `{"op":"bye"}`, true},
		{"bye", `{"op":"bye","seq":0}`, false},
		{"request", `{"op":"rewind"}`, false},
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":32,"tokens":[7,8,9],"blocks":[0,4]}`, true},
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":0,"tokens":[7],"blocks":[4]}`, true},
		{"prefill_from", `{"op":"prefill_from","seq":2,"tokens":[7,8,9],"blocks":[0,4]}`, false}, // start is required
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":-1,"tokens":[7],"blocks":[4]}`, false},
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":32,"tokens":[],"blocks":[0,4]}`, false},
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":32,"prompt":[7],"blocks":[0,4]}`, false}, // tokens, not admit's prompt
		{"prefill_from", `{"op":"prefill_from","seq":2,"start":32,"tokens":[7]}`, false},
		{"request", `{"op":"prefill_from","seq":2,"start":32,"tokens":[7,8,9],"blocks":[0,4]}`, true},
		{"verify", `{"op":"verify","batch":[{"seq":0,"tokens":[324,17,9],"pos":30,"blocks":[5,6]},{"seq":4,"tokens":[1],"pos":3,"blocks":[2]}]}`, true},
		{"verify", `{"op":"verify","batch":[{"seq":0,"tokens":[],"pos":30,"blocks":[5,6]}]}`, false}, // k >= 1
		{"verify", `{"op":"verify","batch":[{"seq":0,"token":324,"pos":30,"blocks":[5,6]}]}`, false}, // decode's token
		{"verify", `{"op":"verify","batch":[{"seq":0,"tokens":[324],"blocks":[5,6]}]}`, false},
		{"verify", `{"op":"verify","batch":[]}`, false},
		{"request", `{"op":"verify","batch":[{"seq":0,"tokens":[324,17],"pos":30,"blocks":[5,6]}]}`, true},
		{"copy_blocks", `{"op":"copy_blocks","copies":[{"src":4,"dst":6},{"src":1,"dst":2}]}`, true},
		{"copy_blocks", `{"op":"copy_blocks","copies":[]}`, false},
		{"copy_blocks", `{"op":"copy_blocks","copies":[{"src":4}]}`, false},
		{"copy_blocks", `{"op":"copy_blocks","copies":[{"src":4,"dst":-6}]}`, false},
		{"copy_blocks", `{"op":"copy_blocks","copies":[{"src":4,"dst":6,"seq":1}]}`, false},
		{"request", `{"op":"copy_blocks","copies":[{"src":4,"dst":6}]}`, true},

		{"hello_reply", `{"ok":true,"version":1}`, true},
		{"hello_reply", `{"ok":true,"version":2,"engine":"x","logits":"top_k","top_k":5,"exact":false,"observes":["cur_pos","regime","memory","close"],"page_pad":0,"follows_hints":true,"obs":{"mem":{"persistent":12}}}`, true},
		{"hello_reply", `{"ok":true,"version":2,"logits":"top_k"}`, false}, // top_k needs its K
		{"hello_reply", `{"ok":true,"version":4}`, false},
		{"hello_reply", `{"ok":true,"version":3}`, true},
		{"hello_reply", `{"ok":true,"version":3,"serves":["prefill_from","verify","copy_blocks"]}`, true},
		{"hello_reply", `{"ok":true,"version":3,"serves":[]}`, true},
		{"hello_reply", `{"ok":true,"version":2,"serves":["verify"]}`, false}, // serves is version 3
		{"hello_reply", `{"ok":true,"version":1,"serves":["verify"]}`, false},
		{"hello_reply", `{"ok":true,"version":3,"serves":["verify","verify"]}`, false},
		{"hello_reply", `{"ok":true,"version":3,"serves":["rollback"]}`, false}, // rollback needs no call
		{"hello_reply", `{"ok":true,"version":3,"serves":"verify"}`, false},
		{"hello_reply", `{"ok":true,"version":1,"observes":["regime"]}`, false}, // a version 2 observation
		{"hello_reply", `{"ok":true,"version":1,"follows_hints":true}`, false},
		{"hello_reply", `{"ok":true,"version":2,"observes":["cur_pos","cur_pos"]}`, false},
		{"hello_reply", `{"ok":true,"version":2,"observes":["curpos"]}`, false},
		{"error_reply", `{"ok":false,"error":"no such sequence"}`, true},
		{"error_reply", `{"ok":false}`, false},
		{"error_reply", `{"ok":false,"error":""}`, false},
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":324,"logits":"pT3gO0K9"}],"obs":{"seqs":[{"seq":0,"cur_pos":3,"page_row":[5]}],"idle_rows":[[0]],"kv_writes":[{"layer":0,"kv":"k","seq":0,"pos":2,"block":5,"row":2},{"layer":0,"kv":"v","seq":-1,"pos":-1,"block":6,"row":0,"clear":true}],"regime":"eager","host_writes":3,"mem":{"persistent":12,"live":[{"id":40,"what":"page table"}],"page_table":40,"traces":[{"id":1,"buffers":[40]}]}}}`, true},
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":324,"top_ids":[324,7],"top_logits":[3.5,1.25],"digest":"0123456789abcdef"}]}`, true},
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":324,"top_ids":[324,7]}]}`, false},     // top_ids without top_logits
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":324,"logits":"pT3gO0K"}]}`, false},    // not base64
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":324,"digest":"0123"}]}`, false},       // a short digest
		{"admit_reply", `{"ok":true,"outputs":[]}`, false},                                                    // an admit answers
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":-1}]}`, false},                        // a token is an id
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":3}],"obs":{"regime":"cold"}}`, false}, // no such regime
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":3}],"obs":{"kv_writes":[{"layer":0,"kv":"q","seq":0,"pos":2,"block":5,"row":2}]}}`, false},
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":3}],"obs":{"mem":{"live":[]}}}`, false}, // persistent is required
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":3}],"obs":{"host_writes":-1}}`, false},
		{"admit_reply", `{"ok":true,"outputs":[{"seq":0,"pos":2,"token":3}],"surprise":1}`, false},
		{"decode_reply", `{"ok":true,"outputs":[{"seq":0,"pos":3,"token":183}],"obs":{"regime":"replay","host_writes":0}}`, true},
		{"prefill_from_reply", `{"ok":true,"outputs":[{"seq":2,"pos":32,"token":5},{"seq":2,"pos":33,"token":6}],"obs":{"seqs":[{"seq":2,"cur_pos":34,"page_row":[0,4]}],"regime":"eager","host_writes":4}}`, true},
		{"prefill_from_reply", `{"ok":true,"outputs":[]}`, false},
		{"verify_reply", `{"ok":true,"outputs":[{"seq":0,"pos":30,"token":5},{"seq":0,"pos":31,"token":6},{"seq":0,"pos":32,"token":7}],"obs":{"seqs":[{"seq":0,"cur_pos":33}]}}`, true},
		{"verify_reply", `{"ok":true}`, false}, // a verify answers
		{"copy_blocks_reply", `{"ok":true,"obs":{"regime":"eager","host_writes":1,"kv_writes":[{"layer":0,"kv":"k","seq":-1,"pos":-1,"block":6,"row":0}]}}`, true},
		{"copy_blocks_reply", `{"ok":true,"outputs":[{"seq":0,"pos":3,"token":183}]}`, false}, // a copy has no outputs
		{"finish_reply", `{"ok":true}`, true},
		{"finish_reply", `{"ok":true,"obs":{"regime":"none","host_writes":0,"kv_writes":[{"layer":1,"kv":"k","seq":3,"pos":0,"block":2,"row":0,"clear":true}]}}`, true},
		{"finish_reply", `{"ok":true,"outputs":[{"seq":0,"pos":3,"token":183}]}`, false},
		{"reset_reply", `{"ok":true,"obs":{"regime":"none"}}`, true},
		{"bye_reply", `{"ok":true,"obs":{"mem":{"persistent":0}}}`, true},
		{"bye_reply", `{"ok":false,"error":"close: free of t9: not allocated"}`, true},
		{"reply", `{"ok":true} {"ok":true}`, false},
		{"reply", `[1,2]`, false},
		{"", `{"op":"reset"}`, true},
		{"", `{"ok":true}`, true},
	} {
		err := wiretest.Validate(tc.def, []byte(tc.line))
		if tc.ok != (err == nil) {
			t.Errorf("%s %s: %v, want ok %v", tc.def, tc.line, err, tc.ok)
		}
	}
}

// TestSchemaMatchesPackage: the schema names the package's version and
// observations, and every request the client sends validates.
func TestSchemaMatchesPackage(t *testing.T) {
	var doc struct {
		Version    int `json:"x-protocol-version"`
		MinVersion int `json:"x-min-protocol-version"`
		Defs       map[string]struct {
			Enum []string `json:"enum"`
		} `json:"$defs"`
	}
	must(t, json.Unmarshal(wire.Schema(), &doc))
	check(t, doc.Version == wire.Version && doc.MinVersion == wire.MinVersion, "schema versions %d..%d, package %d..%d", doc.MinVersion, doc.Version, wire.MinVersion, wire.Version)
	check(t, slices.Equal(doc.Defs["observation"].Enum, wire.Observes(wire.Version)), "schema observations %v, package %v", doc.Defs["observation"].Enum, wire.Observes(wire.Version))
	check(t, slices.Equal(doc.Defs["serving_call"].Enum, wire.ServingCalls(wire.Version)), "schema serving calls %v, package %v", doc.Defs["serving_call"].Enum, wire.ServingCalls(wire.Version))
	h := hello(t)
	h.Op, h.Version = wire.OpHello, wire.Version
	for _, r := range []any{
		h,
		wire.Request{Op: wire.OpAdmit, Seq: 0, Prompt: []int32{1, 2}, Blocks: []int32{0}},
		wire.Request{Op: wire.OpDecode, Batch: []wire.Step{{Seq: 0, Token: 3, Pos: 2, Blocks: []int32{0}}}},
		wire.Request{Op: wire.OpFinish, Seq: 0},
		wire.Request{Op: wire.OpReset},
		wire.Request{Op: wire.OpBye},
		wire.Request{Op: wire.OpPrefillFrom, Seq: 1, Start: 0, Tokens: []int32{4}, Blocks: []int32{1}},
		wire.Request{Op: wire.OpPrefillFrom, Seq: 1, Start: 32, Tokens: []int32{4, 5}, Blocks: []int32{1, 2}},
		wire.Request{Op: wire.OpVerify, Batch: []wire.Step{{Seq: 0, Tokens: []int32{3, 4}, Pos: 2, Blocks: []int32{0}}}},
		wire.Request{Op: wire.OpCopyBlocks, Copies: []wire.BlockCopy{{Src: 0, Dst: 1}}},
		// A stray field of another op is not sent.
		wire.Request{Op: wire.OpDecode, Batch: []wire.Step{{Seq: 0, Token: 3, Tokens: []int32{3}, Pos: 2, Blocks: []int32{0}}}},
		wire.Request{Op: wire.OpVerify, Batch: []wire.Step{{Seq: 0, Token: 3, Tokens: []int32{3}, Pos: 2, Blocks: []int32{0}}}},
	} {
		b, err := json.Marshal(r)
		must(t, err)
		_, err = wiretest.ValidateRequest(b)
		check(t, err == nil, "%s: %v", b, err)
	}
}
