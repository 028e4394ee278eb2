package proptest

import (
	"fmt"
	"slices"
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
}

func newModel(sc *Scenario, maxLen int) model {
	return model{sc: sc, maxLen: maxLen}
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

func (m *model) blocksInUse() int {
	n := 0
	for q, l := range m.live {
		if l {
			n += blocksFor(m.length[q], m.sc.BlockSize)
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
	switch c.Kind {
	case Admit:
		switch {
		case c.Seq < 0 || c.Seq >= MaxSeqs:
			return fmt.Errorf("seq %d out of range", c.Seq)
		case m.live[c.Seq]:
			return fmt.Errorf("seq %d is already live", c.Seq)
		case c.Prompt < 1 || c.Prompt > m.maxLen:
			return fmt.Errorf("prompt %d outside 1..%d", c.Prompt, m.maxLen)
		case c.Salt < 0:
			return fmt.Errorf("negative salt")
		case m.freeSlot() < 0:
			return fmt.Errorf("all %d slots in use", m.sc.Capacity)
		case m.blocksInUse()+blocksFor(c.Prompt, bs) > m.sc.NumBlocks:
			return fmt.Errorf("prompt %d needs %d blocks, %d free", c.Prompt, blocksFor(c.Prompt, bs), m.sc.NumBlocks-m.blocksInUse())
		}
	case Decode:
		if c.Steps < 1 || c.Steps > MaxDecodeSteps {
			return fmt.Errorf("steps %d outside 1..%d", c.Steps, MaxDecodeSteps)
		}
		if c.Force < 0 || c.Skip < 0 || c.Skip > MaxSkip {
			return fmt.Errorf("force %d / skip %d out of range", c.Force, c.Skip)
		}
		free := 0
		for s := 0; s < m.sc.Capacity; s++ {
			if !m.used[s] {
				free++
			}
		}
		prev := -1
		for _, q := range c.Start {
			switch {
			case q < 0 || q >= MaxSeqs:
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
		if len(c.Start) > free {
			return fmt.Errorf("starts %d sequences, %d slots free", len(c.Start), free)
		}
		prev = -1
		for _, q := range c.Seqs {
			switch {
			case q < 0 || q >= MaxSeqs:
				return fmt.Errorf("seq %d out of range", q)
			case q <= prev:
				return fmt.Errorf("seqs not increasing")
			case !m.live[q]:
				return fmt.Errorf("seq %d is not live", q)
			}
			prev = q
		}
		b := m.batch(c)
		if len(b) == 0 {
			return fmt.Errorf("no live sequence to decode")
		}
		need := m.blocksInUse()
		for _, q := range b {
			end := m.firstPos(c, q) + c.Steps
			if end > m.maxLen {
				return fmt.Errorf("seq %d would reach %d positions, limit %d", q, end, m.maxLen)
			}
			need += blocksFor(end, bs) - blocksFor(m.length[q], bs)
		}
		if need > m.sc.NumBlocks {
			return fmt.Errorf("needs %d blocks, the pool has %d", need, m.sc.NumBlocks)
		}
	case Finish:
		if c.Seq < 0 || c.Seq >= MaxSeqs || !m.live[c.Seq] {
			return fmt.Errorf("seq %d is not live", c.Seq)
		}
	case Recapture:
	default:
		return fmt.Errorf("unknown command %d", c.Kind)
	}
	return nil
}

// apply returns the model after c (which check accepted).
func (m model) apply(c Cmd) model {
	switch c.Kind {
	case Admit:
		s := m.freeSlot()
		m.live[c.Seq], m.length[c.Seq], m.slot[c.Seq] = true, c.Prompt, s
		m.used[s] = true
		m.admits++
		m.work += c.Prompt
	case Decode:
		slots := m.startSlots(c)
		b := m.batch(c)
		for _, q := range b {
			m.length[q] = m.firstPos(c, q) + c.Steps
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
	case Finish:
		m.live[c.Seq] = false
		m.used[m.slot[c.Seq]] = false
		m.length[c.Seq] = 0
	}
	if c.Kind != Admit {
		m.lastOK = false
	}
	return m
}

// blocksFor is the number of blocks n positions fill (the contract's block
// accounting, written here rather than taken from kvpage).
func blocksFor(n, bs int) int { return (n + bs - 1) / bs }
