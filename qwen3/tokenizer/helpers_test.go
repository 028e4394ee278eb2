package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"testing"
)

const realFile = "testdata/tokenizer.json"

var (
	realOnce sync.Once
	realTok  *Tokenizer
	realErr  error
)

// needReal returns the tokenizer built from Qwen3's tokenizer.json (fetched
// by `make testdata`). Without the file the test is skipped, or fails when
// the CI environment variable is set.
func needReal(tb testing.TB) *Tokenizer {
	tb.Helper()
	if _, err := os.Stat(realFile); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing (run `make testdata`); required when CI is set", realFile)
		}
		tb.Skipf("%s is missing; run `make testdata` to fetch it", realFile)
	}
	realOnce.Do(func() { realTok, realErr = Load(realFile) })
	if realErr != nil {
		tb.Fatal(realErr)
	}
	return realTok
}

type vector struct {
	Kind    string  `json:"kind"` // "" (encode) or "decode"
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	NodeIDs []int32 `json:"node_ids"`
	Why     string  `json:"why"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	f, err := os.Open("testdata/vectors.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(vs) < 100 {
		tb.Fatalf("only %d vectors", len(vs))
	}
	return vs
}
