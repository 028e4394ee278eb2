package proptest

import (
	"fmt"
	"slices"

	"github.com/offcard/offcard/qwen3"
)

// model is the host's abstract truth between commands: which sequences are
// live, how long each is, which slot each holds. It is a value (arrays
// only), so NextState returns a fresh copy, as gopter requires. Block
// counts follow from the lengths: the pool is all-or-nothing and every
// table holds exactly BlocksFor(len) blocks, so availability depends on
// the lengths alone.
type model struct {
	sc     *Scenario
	maxLen int
	live   [MaxSeqs]bool
	length [MaxSeqs]int
	slot   [MaxSeqs]int
	used   [MaxCapacity]bool
	admits int // admissions so far (the generator's salt)
	work   int // device steps so far (the generator's budget)
	// last is the batch of the last decode when nothing but admits
	// followed it (the generator replays it to interleave prefills
	// between replays of one active set); lastOK says it is set.
	last   [MaxSeqs]bool
	lastOK bool

	// serve is what serving calls the SUT supports (the actions drawn and
	// accepted need them).
	serve Serving
	// tab is each live sequence's block table as abstract block ids (an
	// id held by two tables is a shared block; shared blocks sit at the
	// same index of every table holding them: Fork and SharePrefix share
	// prefixes). A table holds exactly blocksFor(length) blocks. apply
	// never writes into a slice it did not make: a changed table is a
	// fresh slice, so earlier states stay as they were.
	tab    [MaxSeqs][]int32
	nextID int32
	// contig is the sequence's length of gapless history: positions
	// 0..contig-1 hold its tokens' KV (a position jump leaves a gap), so a
	// prefix hit of up to contig positions and a recompute (when contig is
	// the length) are well defined.
	contig [MaxSeqs]int
	// preempted is the length of a preempted sequence awaiting Readmit (0:
	// none).
	preempted [MaxSeqs]int
}

func newModel(sc *Scenario, maxLen int) model {
	return model{sc: sc, maxLen: maxLen}
}

// Serving is the serving calls a SUT's decoder supports (qwen3.Serves):
// a schedule draws an action only when the calls it makes are supported.
type Serving struct {
	PrefillFrom, Verify, CopyBlocks bool
}

// ServingOf is what d supports.
func ServingOf(d qwen3.Decoder) Serving {
	return Serving{
		PrefillFrom: qwen3.Serves(d, qwen3.ServePrefillFrom),
		Verify:      qwen3.Serves(d, qwen3.ServeVerify),
		CopyBlocks:  qwen3.Serves(d, qwen3.ServeCopyBlocks),
	}
}

// Missing lists the calls s lacks, by their protocol names.
func (s Serving) Missing() []string {
	var out []string
	for _, x := range []struct {
		ok   bool
		name string
	}{{s.PrefillFrom, qwen3.ServePrefillFrom}, {s.Verify, qwen3.ServeVerify}, {s.CopyBlocks, qwen3.ServeCopyBlocks}} {
		if !x.ok {
			out = append(out, x.name)
		}
	}
	return out
}

// holders is the number of live tables holding block index i of q's table
// (q's included), not counting the sequences in skip.
func (m *model) holders(q, i int, skip *[MaxSeqs]bool) int {
	id, n := m.tab[q][i], 0
	for p, l := range m.live {
		if l && !skip[p] && i < len(m.tab[p]) && m.tab[p][i] == id {
			n++
		}
	}
	return n
}

// newIDs returns n fresh abstract block ids.
func (m *model) newIDs(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = m.nextID
		m.nextID++
	}
	return out
}

// writeNeed is the blocks a write of positions from..to-1 of q's table
// takes from the pool (kvpage PrepareWrite: a copy of the shared block
// the positions land in, and the growth), given that the sequences in
// copied already took their own copies in this batch. Only the table's
// last block can be written (a table holds blocksFor(length) blocks and
// writes start at length or later).
func (m *model) writeNeed(q, from, to int, copied *[MaxSeqs]bool) (copies, grow int) {
	bs := m.sc.BlockSize
	n := len(m.tab[q])
	if i := from / bs; i < n && m.holders(q, i, copied) > 1 {
		copies = 1
	}
	return copies, max(blocksFor(to, bs)-n, 0)
}

// write applies writeNeed's copy and growth to q's table.
func (m *model) write(q, from, to int, copied *[MaxSeqs]bool) {
	bs := m.sc.BlockSize
	t := slices.Clone(m.tab[q])
	if i := from / bs; i < len(t) && m.holders(q, i, copied) > 1 {
		t[i] = m.newIDs(1)[0]
	}
	copied[q] = true
	if g := blocksFor(to, bs) - len(t); g > 0 {
		t = append(t, m.newIDs(g)...)
	}
	m.tab[q] = t
}

func (m *model) nLive() int {
	n := 0
	for _, l := range m.live {
		if l {
			n++
		}
	}
	return n
}

// blocksInUse is the number of distinct blocks the live tables hold.
func (m *model) blocksInUse() int {
	n := 0
	for q, l := range m.live {
		if !l {
			continue
		}
		for i, id := range m.tab[q] {
			first := true
			for p := 0; p < q; p++ {
				if m.live[p] && i < len(m.tab[p]) && m.tab[p][i] == id {
					first = false
					break
				}
			}
			if first {
				n++
			}
		}
	}
	return n
}

func (m *model) freeSlots() int {
	n := 0
	for s := 0; s < m.sc.Capacity; s++ {
		if !m.used[s] {
			n++
		}
	}
	return n
}

func (m *model) freeSlot() int {
	for s := 0; s < m.sc.Capacity; s++ {
		if !m.used[s] {
			return s
		}
	}
	return -1
}

// batch is the sequences a decode command steps: c.Seqs or every live one,
// then the ones it starts, in increasing id order.
func (m *model) batch(c Cmd) []int {
	var b []int
	if c.Seqs != nil {
		b = append(b, c.Seqs...)
	} else {
		for q, l := range m.live {
			if l {
				b = append(b, q)
			}
		}
	}
	b = append(b, c.Start...)
	slices.Sort(b)
	return b
}

// startSlots returns the slots the sequences a decode starts take: in
// increasing id order, each the lowest slot no live sequence (nor an
// earlier started one) holds (qwen3.Decoder: a sequence not live yet takes
// the lowest free slot).
func (m *model) startSlots(c Cmd) map[int]int {
	if len(c.Start) == 0 {
		return nil
	}
	used := m.used
	out := map[int]int{}
	for _, q := range c.Start {
		for s := 0; s < m.sc.Capacity; s++ {
			if !used[s] {
				used[s] = true
				out[q] = s
				break
			}
		}
	}
	return out
}

// firstPos is the position sequence q decodes at in the first step of c.
func (m *model) firstPos(c Cmd, q int) int {
	if !m.live[q] {
		return 0
	}
	return m.length[q] + c.Skip
}

// check reports why c cannot run in m, or nil. Every argument is checked,
// so a shrunk schedule is valid or rejected, never half-run.
func (m *model) check(c Cmd) error {
	bs := m.sc.BlockSize
	free := m.sc.NumBlocks - m.blocksInUse()
	switch c.Kind {
	case Admit, Share, Readmit:
		switch {
		case !validSeq(c.Seq):
			return fmt.Errorf("seq %d out of range", c.Seq)
		case m.live[c.Seq]:
			return fmt.Errorf("seq %d is already live", c.Seq)
		case c.Chunk < 0:
			return fmt.Errorf("negative chunk")
		case c.Chunk > 0 && !m.serve.PrefillFrom:
			return fmt.Errorf("chunked prefill needs %s, which the SUT does not serve", qwen3.ServePrefillFrom)
		case m.freeSlot() < 0:
			return fmt.Errorf("all %d slots in use", m.sc.Capacity)
		}
	}
	switch c.Kind {
	case Admit:
		switch {
		case c.Prompt < 1 || c.Prompt > m.maxLen:
			return fmt.Errorf("prompt %d outside 1..%d", c.Prompt, m.maxLen)
		case c.Salt < 0:
			return fmt.Errorf("negative salt")
		case blocksFor(c.Prompt, bs) > free:
			return fmt.Errorf("prompt %d needs %d blocks, %d free", c.Prompt, blocksFor(c.Prompt, bs), free)
		}
	case Share:
		switch {
		case !m.serve.PrefillFrom:
			return fmt.Errorf("a prefix hit needs %s, which the SUT does not serve", qwen3.ServePrefillFrom)
		case !validSeq(c.From) || !m.live[c.From]:
			return fmt.Errorf("donor seq %d is not live", c.From)
		case c.Len < 1 || c.Len > m.contig[c.From]:
			return fmt.Errorf("prefix %d outside 1..%d (the donor's gapless history)", c.Len, m.contig[c.From])
		case c.Prompt <= c.Len || c.Prompt > m.maxLen:
			return fmt.Errorf("prompt %d outside %d..%d", c.Prompt, c.Len+1, m.maxLen)
		case c.Salt < 0:
			return fmt.Errorf("negative salt")
		case c.Len%bs != 0 && !m.serve.CopyBlocks:
			return fmt.Errorf("a prefix hit inside a block needs %s (copy-on-write), which the SUT does not serve", qwen3.ServeCopyBlocks)
		}
		need := blocksFor(c.Prompt, bs) - blocksFor(c.Len, bs)
		if c.Len%bs != 0 {
			need++
		}
		if need > free {
			return fmt.Errorf("the prefix hit needs %d blocks, %d free", need, free)
		}
	case Readmit:
		L := m.preempted[c.Seq]
		switch {
		case L == 0:
			return fmt.Errorf("seq %d is not preempted", c.Seq)
		case blocksFor(L, bs) > free:
			return fmt.Errorf("the re-admit needs %d blocks, %d free", blocksFor(L, bs), free)
		}
	case Decode:
		if c.Steps < 1 || c.Steps > MaxDecodeSteps {
			return fmt.Errorf("steps %d outside 1..%d", c.Steps, MaxDecodeSteps)
		}
		if c.Force < 0 || c.Skip < 0 || c.Skip > MaxSkip {
			return fmt.Errorf("force %d / skip %d out of range", c.Force, c.Skip)
		}
		prev := -1
		for _, q := range c.Start {
			switch {
			case !validSeq(q):
				return fmt.Errorf("start seq %d out of range", q)
			case q <= prev:
				return fmt.Errorf("start seqs not increasing")
			case m.live[q]:
				return fmt.Errorf("start seq %d is already live", q)
			case slices.Contains(c.Seqs, q):
				return fmt.Errorf("seq %d both stepped and started", q)
			}
			prev = q
		}
		if len(c.Start) > m.freeSlots() {
			return fmt.Errorf("starts %d sequences, %d slots free", len(c.Start), m.freeSlots())
		}
		if err := m.checkLive(c.Seqs); err != nil {
			return err
		}
		b := m.batch(c)
		if len(b) == 0 {
			return fmt.Errorf("no live sequence to decode")
		}
		need := 0
		var copied [MaxSeqs]bool
		for _, q := range b {
			first := m.firstPos(c, q)
			end := first + c.Steps
			if end > m.maxLen {
				return fmt.Errorf("seq %d would reach %d positions, limit %d", q, end, m.maxLen)
			}
			if !m.live[q] {
				need += blocksFor(end, bs)
				continue
			}
			cp, g := m.writeNeed(q, first, end, &copied)
			if cp > 0 && !m.serve.CopyBlocks {
				return fmt.Errorf("seq %d writes a shared block: copy-on-write needs %s, which the SUT does not serve", q, qwen3.ServeCopyBlocks)
			}
			copied[q] = true
			need += cp + g
		}
		if need > free {
			return fmt.Errorf("needs %d blocks, %d free", need, free)
		}
	case Verify:
		if !m.serve.Verify {
			return fmt.Errorf("verify needs %s, which the SUT does not serve", qwen3.ServeVerify)
		}
		if err := checkVerifyArgs(c); err != nil {
			return err
		}
		if err := m.checkLive(c.Seqs); err != nil {
			return err
		}
		need := 0
		var copied [MaxSeqs]bool
		for i, q := range c.Seqs {
			pos := m.length[q]
			if pos+c.K[i] > m.maxLen {
				return fmt.Errorf("seq %d would reach %d positions, limit %d", q, pos+c.K[i], m.maxLen)
			}
			cp, g := m.writeNeed(q, pos, pos+c.K[i], &copied)
			if cp > 0 && !m.serve.CopyBlocks {
				return fmt.Errorf("seq %d writes a shared block: copy-on-write needs %s, which the SUT does not serve", q, qwen3.ServeCopyBlocks)
			}
			copied[q] = true
			need += cp + g
		}
		if need > free {
			return fmt.Errorf("needs %d blocks, %d free", need, free)
		}
	case Fork:
		switch {
		case !validSeq(c.Seq) || m.live[c.Seq]:
			return fmt.Errorf("child seq %d out of range or already live", c.Seq)
		case !validSeq(c.From) || !m.live[c.From]:
			return fmt.Errorf("parent seq %d is not live", c.From)
		case c.Salt < 0:
			return fmt.Errorf("negative salt")
		case m.freeSlot() < 0:
			return fmt.Errorf("all %d slots in use", m.sc.Capacity)
		case m.length[c.From]+1 > m.maxLen:
			return fmt.Errorf("the child would reach %d positions, limit %d", m.length[c.From]+1, m.maxLen)
		case m.length[c.From]%bs != 0 && !m.serve.CopyBlocks:
			return fmt.Errorf("a fork inside a block needs %s (copy-on-write), which the SUT does not serve", qwen3.ServeCopyBlocks)
		case free < 1:
			return fmt.Errorf("the fork's first write needs a block, none free")
		}
	case Finish, Preempt:
		if !validSeq(c.Seq) || !m.live[c.Seq] {
			return fmt.Errorf("seq %d is not live", c.Seq)
		}
		if c.Kind == Preempt && m.contig[c.Seq] != m.length[c.Seq] {
			return fmt.Errorf("seq %d has a position gap (a jump): its recompute is not defined", c.Seq)
		}
	case Recapture:
	default:
		return fmt.Errorf("unknown command %d", c.Kind)
	}
	return nil
}

// checkLive checks a list of stepped sequences: increasing, live.
func (m *model) checkLive(seqs []int) error {
	prev := -1
	for _, q := range seqs {
		switch {
		case !validSeq(q):
			return fmt.Errorf("seq %d out of range", q)
		case q <= prev:
			return fmt.Errorf("seqs not increasing")
		case !m.live[q]:
			return fmt.Errorf("seq %d is not live", q)
		}
		prev = q
	}
	return nil
}

// admitted makes q live in the lowest free slot with length n, holding t.
func (m *model) admitted(q, n int, t []int32) {
	s := m.freeSlot()
	m.live[q], m.length[q], m.slot[q], m.contig[q] = true, n, s, n
	m.used[s] = true
	m.tab[q], m.preempted[q] = t, 0
}

// release ends live sequence q.
func (m *model) release(q int) {
	m.live[q] = false
	m.used[m.slot[q]] = false
	m.length[q], m.contig[q], m.tab[q] = 0, 0, nil
}

// apply returns the model after c (which check accepted).
func (m model) apply(c Cmd) model {
	bs := m.sc.BlockSize
	switch c.Kind {
	case Admit:
		m.admitted(c.Seq, c.Prompt, m.newIDs(blocksFor(c.Prompt, bs)))
		m.admits++
		m.work += c.Prompt
	case Share:
		m.admitted(c.Seq, c.Len, slices.Clip(m.tab[c.From][:blocksFor(c.Len, bs)]))
		var none [MaxSeqs]bool
		m.write(c.Seq, c.Len, c.Prompt, &none)
		m.length[c.Seq], m.contig[c.Seq] = c.Prompt, c.Prompt
		m.admits++
		m.work += c.Prompt - c.Len
	case Readmit:
		L := m.preempted[c.Seq]
		m.admitted(c.Seq, L, m.newIDs(blocksFor(L, bs)))
		m.work += L
	case Decode:
		slots := m.startSlots(c)
		b := m.batch(c)
		var copied [MaxSeqs]bool
		for _, q := range b {
			first := m.firstPos(c, q)
			end := first + c.Steps
			if !m.live[q] {
				m.tab[q], m.contig[q], m.preempted[q] = m.newIDs(blocksFor(end, bs)), end, 0
			} else {
				m.write(q, first, end, &copied)
				if c.Skip == 0 && m.contig[q] == m.length[q] {
					m.contig[q] = end
				}
			}
			m.length[q] = end
		}
		for q, s := range slots {
			m.live[q], m.slot[q], m.used[s] = true, s, true
			m.admits++
		}
		m.work += c.Steps
		m.last, m.lastOK = [MaxSeqs]bool{}, true
		for _, q := range b {
			m.last[q] = true
		}
		return m
	case Verify:
		var copied [MaxSeqs]bool
		for i, q := range c.Seqs {
			pos := m.length[q]
			m.write(q, pos, pos+c.K[i], &copied)
			keep := pos + c.Accept[i]
			m.tab[q] = slices.Clip(m.tab[q][:blocksFor(keep, bs)])
			if m.contig[q] == pos {
				m.contig[q] = keep
			}
			m.length[q] = keep
			m.work += c.K[i]
		}
	case Fork:
		pos := m.length[c.From]
		m.admitted(c.Seq, pos, m.tab[c.From])
		var none [MaxSeqs]bool
		m.write(c.Seq, pos, pos+1, &none)
		m.length[c.Seq], m.contig[c.Seq] = pos+1, m.contig[c.From]
		if m.contig[c.From] == pos {
			m.contig[c.Seq] = pos + 1
		}
		m.admits++
		m.work++
	case Finish:
		m.release(c.Seq)
	case Preempt:
		L := m.length[c.Seq]
		m.release(c.Seq)
		m.preempted[c.Seq] = L
	}
	if c.Kind != Admit {
		m.lastOK = false
	}
	return m
}

// blocksFor is the number of blocks n positions fill (the contract's block
// accounting, written here rather than taken from kvpage).
func blocksFor(n, bs int) int { return (n + bs - 1) / bs }
