package proptest

import (
	"fmt"

	"github.com/offcard/offcard/kvpage"
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
			n += kvpage.BlocksFor(m.length[q], m.sc.BlockSize)
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
// in increasing id order.
func (m *model) batch(c Cmd) []int {
	if c.Seqs != nil {
		return c.Seqs
	}
	var b []int
	for q, l := range m.live {
		if l {
			b = append(b, q)
		}
	}
	return b
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
		case m.blocksInUse()+kvpage.BlocksFor(c.Prompt, bs) > m.sc.NumBlocks:
			return fmt.Errorf("prompt %d needs %d blocks, %d free", c.Prompt, kvpage.BlocksFor(c.Prompt, bs), m.sc.NumBlocks-m.blocksInUse())
		}
	case Decode:
		if c.Steps < 1 || c.Steps > MaxDecodeSteps {
			return fmt.Errorf("steps %d outside 1..%d", c.Steps, MaxDecodeSteps)
		}
		b := m.batch(c)
		if len(b) == 0 {
			return fmt.Errorf("no live sequence to decode")
		}
		need := m.blocksInUse()
		prev := -1
		for _, q := range b {
			switch {
			case q < 0 || q >= MaxSeqs:
				return fmt.Errorf("seq %d out of range", q)
			case q <= prev:
				return fmt.Errorf("seqs not increasing")
			case !m.live[q]:
				return fmt.Errorf("seq %d is not live", q)
			case m.length[q]+c.Steps > m.maxLen:
				return fmt.Errorf("seq %d would reach %d positions, limit %d", q, m.length[q]+c.Steps, m.maxLen)
			}
			prev = q
			need += kvpage.BlocksFor(m.length[q]+c.Steps, bs) - kvpage.BlocksFor(m.length[q], bs)
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
		for _, q := range m.batch(c) {
			m.length[q] += c.Steps
		}
		m.work += c.Steps
	case Finish:
		m.live[c.Seq] = false
		m.used[m.slot[c.Seq]] = false
		m.length[c.Seq] = 0
	}
	return m
}
