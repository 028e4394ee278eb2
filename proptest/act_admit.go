package proptest

import (
	"fmt"
	"math/rand"

	"github.com/offcard/offcard/qwen3"
)

// The admit action: how the generator draws it (prompt lengths around
// block boundaries, filling the pool) and how the runner plays it (a
// prefill of ref and the SUT through a fresh host table).

// drawAdmit draws an admit, its prompt length biased to k·bs-1, k·bs and
// k·bs+1 (k = 1, 2).
func drawAdmit(rng *rand.Rand, m model) (Cmd, bool) {
	if m.freeSlot() < 0 {
		return Cmd{}, false
	}
	bs := m.sc.BlockSize
	free := m.sc.NumBlocks - m.blocksInUse()
	limit := min(m.maxLen, free*bs, m.budget()-m.work+bs)
	if limit < 1 {
		return Cmd{}, false
	}
	var n int
	switch pick(rng, 7, 3, 1) {
	case 0:
		k := 1 + pick(rng, 3, 1)
		n = k*bs - 1 + rng.Intn(3)
	case 1:
		n = 1 + rng.Intn(bs/2)
	default:
		// Fill the pool (past the work budget when it takes a small
		// cache), or come one position short of it.
		n = min(m.maxLen, free*bs) - rng.Intn(2)
		limit = max(limit, min(m.maxLen, free*bs, 2*m.budget()))
	}
	if n > limit {
		n = limit - rng.Intn(min(limit, 2))
	}
	seq := -1
	if q := m.admits % MaxSeqs; rng.Intn(2) == 0 && !m.live[q] {
		seq = q
	} else {
		for q, l := range m.live {
			if !l {
				seq = q
				break
			}
		}
	}
	c := Cmd{Kind: Admit, Seq: seq, Prompt: n, Salt: m.admits}
	return c, m.check(c) == nil
}

func (r *runner) admit(c Cmd) *Failure {
	tab := r.pool.NewTable()
	if err := tab.Grow(c.Prompt); err != nil {
		panic(fmt.Sprintf("host pool: %v", err))
	}
	r.tabs[c.Seq] = tab
	p := qwen3.Prefill{Seq: qwen3.SeqID(c.Seq), Tokens: promptTokens(c.Seq, c.Salt, c.Prompt, r.cfg.VocabSize), Blocks: tab.Blocks()}
	want, err := r.ref.Prefill(p)
	if err != nil {
		panic(fmt.Sprintf("ref prefill: %v", err))
	}
	got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Prefill(p) })
	a := active{seq: c.Seq, slot: r.m.freeSlot(), blocks: p.Blocks}
	for i := 0; i < c.Prompt; i++ {
		a.pos = append(a.pos, i)
	}
	f := r.check(call{c: c, act: []active{a}, got: got, want: want, err: gerr})
	r.steps += c.Prompt
	r.next[c.Seq] = want[len(want)-1].Token
	if _, ok := r.tolerant(); ok && len(got) > 0 && f == nil {
		r.next[c.Seq] = got[len(got)-1].Token // teacher forcing
	}
	r.prev = map[int]stepState{a.slot: {seq: c.Seq, pos: c.Prompt - 1, token: want[len(want)-1].Token}}
	r.reach.add(ReachAdmit)
	if r.sc.Prefill == qwen3.PrefillDecode {
		r.reach.add(ReachPrefillByDecode)
	}
	if r.reach.afterReplay {
		r.reach.prefillAfterReplay = true
	}
	return f
}

// promptTokens is the prompt of an admit: token i is
// splitmix64(splitmix64(splitmix64(seq) + salt) + i) mod vocab.
func promptTokens(seq, salt, n, vocab int) []int32 {
	t := make([]int32, n)
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	for i := range t {
		t[i] = int32(splitmix64(base+uint64(i)) % uint64(vocab))
	}
	return t
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser of x+γ.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// streamToken is token pos of the token stream (seq, salt): a prompt's
// token pos, a teacher-forced token, a started sequence's first token.
func streamToken(seq, salt, pos, vocab int) int32 {
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	return int32(splitmix64(base+uint64(pos)) % uint64(vocab))
}
