package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/offcard/offcard/qwen3/tokenizer"
)

func init() {
	commands["tokenize"] = command{"text on stdin to token ids (or ids to text with --decode)", runTokenize}
}

// stdin is the tokenize command's input; tests replace it.
var stdin io.Reader = os.Stdin

func runTokenize(e *env, args []string) error {
	fs := newFlags(e, "tokenize", "[--tokenizer FILE | --model DIR] [--jsonl] [--decode]  < input")
	path := fs.String("tokenizer", "", "tokenizer.json `FILE`")
	dir := fs.String("model", "", "checkpoint `DIR` holding tokenizer.json")
	jsonl := fs.Bool("jsonl", false, "one JSON string per input line → one JSON array of ids per output line (with --decode, the inverse)")
	decode := fs.Bool("decode", false, "read token ids, print text")
	if err := fs.parse(args); err != nil {
		return err
	}
	switch {
	case *path != "" && *dir != "":
		return bad("--tokenizer and --model are exclusive")
	case *dir != "":
		*path = filepath.Join(*dir, "tokenizer.json")
	case *path == "":
		return bad("need --tokenizer FILE or --model DIR")
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return badInput{err}
	}
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	if !*jsonl {
		in, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		if !*decode {
			fmt.Fprintln(out, joinIDs(tok.Encode(string(in))))
			return nil
		}
		ids, err := parseIDList(tok.VocabSize(), strings.FieldsFunc(string(in), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }))
		if err != nil {
			return err
		}
		fmt.Fprint(out, tok.Decode(ids))
		return nil
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		if *decode {
			var ids []int32
			if err := json.Unmarshal(sc.Bytes(), &ids); err != nil {
				return bad("line %d: want a JSON array of token ids: %v", line, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					return bad("line %d: token id %d is outside the tokenizer's vocabulary [0,%d)", line, id, tok.VocabSize())
				}
			}
			if err := enc.Encode(tok.Decode(ids)); err != nil {
				return err
			}
			continue
		}
		var s string
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return bad("line %d: want a JSON string: %v", line, err)
		}
		ids := tok.Encode(s)
		if ids == nil {
			ids = []int32{}
		}
		if err := enc.Encode(ids); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parseIDList parses token ids in [0,vocab).
func parseIDList(vocab int, fields []string) ([]int32, error) {
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, bad("%q is not a token id", f)
		}
		if n >= int64(vocab) {
			return nil, bad("token id %d is outside the tokenizer's vocabulary [0,%d)", n, vocab)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}
