package ref

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// servingMutants are one-idea edits of serving.go that the serving tests
// must kill (each shown red once before the tests were trusted). Building
// this package once per mutant costs several seconds each, so they run only
// with OFFCARD_REF_MUTANTS=1:
//
//	OFFCARD_REF_MUTANTS=1 go test ./ref -run TestServingMutants -v
var servingMutants = []struct{ name, from, to string }{
	{"prefillfrom-pos-from-0", "int(t), p.Start+i, p.Blocks", "int(t), i, p.Blocks"},
	{"verify-pos-not-advanced", "st.Pos+j, st.Blocks, st.Seq", "st.Pos, st.Blocks, st.Seq"},
	{"verify-outputs-reversed", "outs[i][j] = ", "outs[i][min(j, len(outs[i])-1-j)] = "},
	{"verify-checks-first-pos-only", "d.checkPos(t, st.Pos+j, st.Blocks)", "d.checkPos(t, st.Pos+0*j, st.Blocks)"},
	{"copy-keys-only", "range [][]bf16.BF16{s.k[l], s.v[l]}", "range [][]bf16.BF16{s.k[l]}"},
	{"copy-layer0-only", "for l := range s.layers {", "for l := range 1 {"},
	{"copyblocks-noop", "d.kv.copyBlock(int(c.Src), int(c.Dst))", "_ = c"},
	{"copy-zero-src-skipped", "if src >= held && dst >= held {", "if src >= held {"},
	{"copy-no-dup-dst-check", "if dsts[c.Dst] {", "if false {"},
	{"prefillfrom-live-check-dropped", "if p.Start == 0 && d.live[p.Seq] {", "if false {"},
}

func TestServingMutants(t *testing.T) {
	if os.Getenv("OFFCARD_REF_MUTANTS") != "1" {
		t.Skip("set OFFCARD_REF_MUTANTS=1 to build and run the serving mutants")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	src, err := os.ReadFile("serving.go")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("serving.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range servingMutants {
		t.Run(m.name, func(t *testing.T) {
			if n := strings.Count(string(src), m.from); n != 1 {
				t.Fatalf("mutant anchor found %d times (the source moved; update the mutant)", n)
			}
			dir := t.TempDir()
			mutated := filepath.Join(dir, "serving.go")
			if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), m.from, m.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: mutated}})
			overlayPath := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "test", "-count=1", "-overlay="+overlayPath,
				"-run=^(TestPrefixHitEqualsColdPrefill|TestChunkedPrefillEqualsCold|TestVerifyEqualsSequentialDecodes|TestRollbackThenDecode|TestPreemptRecompute|TestCopyBlocks|TestServingErrors)$", ".")
			out, err := cmd.CombinedOutput()
			switch {
			case err == nil:
				t.Fatalf("mutant survived the serving tests:\n%s", out)
			case strings.Contains(string(out), "[build failed]") || strings.Contains(string(out), "[setup failed]"):
				t.Fatalf("mutant did not build:\n%s", out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "serving_test.go:") || strings.HasPrefix(line, "panic:") {
					t.Logf("killed: %s", strings.TrimSpace(line))
					break
				}
			}
		})
	}
}
