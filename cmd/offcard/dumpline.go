package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/offcard/offcard/dump"
)

// dumpRecordLine names the record of dump file path that holds token i
// of sequence s (its prompt record, or the step record of a generated
// token) as "path:LINE"; path alone when the file no longer has it. It
// re-reads the file, so it is for error messages only.
func dumpRecordLine(path string, s *dump.Sequence, i int) string {
	f, err := os.Open(path)
	if err != nil {
		return path
	}
	defer f.Close()
	step := -1
	if i >= len(s.Prompt) && i-len(s.Prompt) < len(s.Steps) {
		step = s.Steps[i-len(s.Prompt)].Step
	}
	br := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		var r struct {
			Seq    *int            `json:"seq"`
			Step   *int            `json:"step"`
			Prompt json.RawMessage `json:"prompt"`
		}
		if len(line) > 0 && json.Unmarshal(line, &r) == nil && r.Seq != nil && *r.Seq == s.Seq {
			if step < 0 && r.Prompt != nil || step >= 0 && r.Step != nil && *r.Step == step {
				return fmt.Sprintf("%s:%d", path, n)
			}
		}
		if err != nil {
			return path
		}
	}
}
