package proptest

import (
	"fmt"
	"math"
	"strings"

	"github.com/offcard/offcard/qwen3"
)

// Property logits (1, 4, 6), exact mode: every output's token and logits
// equal ref's bit for bit. (Tolerant mode: tolerant.go.)

func (r *runner) checkOutputs(ps *[]problem, k call, bs int) {
	if len(k.got) != len(k.want) {
		*ps = append(*ps, problem{prop: PropLogits, seq: -1, pos: -1, detail: fmt.Sprintf("%d outputs, ref has %d", len(k.got), len(k.want))})
		return
	}
	for i := range k.want {
		g, w := k.got[i], k.want[i]
		d := diffOutput(g, w)
		if d == "" {
			continue
		}
		off := 0
		if !k.decode {
			off = i
		}
		*ps = append(*ps, problem{prop: PropLogits, seq: int(w.Seq), pos: w.Pos, located: true, offset: off,
			detail: fmt.Sprintf("seq %d pos %d (block %d, row %d): %s", w.Seq, w.Pos, w.Pos/bs, w.Pos%bs, d)})
		return
	}
}

// diffOutput describes how got differs from ref's want, or "".
func diffOutput(got, want qwen3.Output) string {
	if got.Seq != want.Seq || got.Pos != want.Pos {
		return fmt.Sprintf("output for seq %d pos %d, ref's is seq %d pos %d", got.Seq, got.Pos, want.Seq, want.Pos)
	}
	if len(got.Logits) != len(want.Logits) {
		return fmt.Sprintf("%d logits, ref has %d", len(got.Logits), len(want.Logits))
	}
	n, first := 0, -1
	for i := range want.Logits {
		if math.Float32bits(got.Logits[i]) != math.Float32bits(want.Logits[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if got.Token == want.Token && n == 0 {
		return ""
	}
	var b strings.Builder
	if got.Token != want.Token {
		fmt.Fprintf(&b, "token %d, ref %d; ", got.Token, want.Token)
	}
	if n > 0 {
		fmt.Fprintf(&b, "%d of %d logits differ, first [%d] %v vs ref %v", n, len(want.Logits), first, got.Logits[first], want.Logits[first])
	} else {
		b.WriteString("logits equal")
	}
	return b.String()
}
