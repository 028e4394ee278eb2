package proptest

import (
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// fuzzWork bounds the device steps of a decoded script and fuzzCmds its
// commands, so one fuzz execution stays fast.
const (
	fuzzWork = 128
	fuzzCmds = 24
)

// ScriptFromBytes decodes bytes into a scenario and a schedule that walks
// the page table through a sequence of widths (FuzzPageTableWidths). Every
// input gives a valid script.
//
// Header (missing bytes read as 0): data[0] bit 0 arch, bit 1 block size
// 64, bits 2-3 mode (eager, captured, captured with recapture_every), bit
// 4 verify; data[1] capacity 1 + data[1]%4; data[2] width policy
// (%3: dynamic, fixed:N with N = 1 + (data[2]>>2)%3, fixed:256); data[3]
// recapture_every 1 + data[3]%8 and blocks 8 << (data[3]>>6) (24 at least).
// Then one command per byte b: target width w = 1 + b&3 blocks (at most 3,
// 2 with 64-position blocks), offset d = (b>>2)&3, and by b>>6:
//
//	0 admit the lowest free sequence with a prompt of w·bs-1+d%3
//	1 decode every live sequence until the longest reaches w·bs-1+d%3
//	  positions (at least one step)
//	2 finish the longest live sequence (d odd: the shortest)
//	3 recapture (d = 0) or decode one step
//
// Commands whose precondition fails are shortened to fit or skipped;
// decoding stops at a budget of device steps and of commands.
func ScriptFromBytes(data []byte) Script {
	at := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	h0, h1, h2, h3 := at(0), at(1), at(2), at(3)
	sc := Scenario{Model: "tiny", ModelSeed: 1, Device: "sim", Strict: true}
	sc.Arch = []string{"wormhole", "blackhole"}[h0&1]
	sc.BlockSize = 32
	if h0&2 != 0 {
		sc.BlockSize = 64
	}
	switch (h0 >> 2) & 3 {
	case 0:
		sc.Mode = qwen3.ModeEager
	case 1, 2:
		sc.Mode = qwen3.ModeCaptured
	default:
		sc.Mode = qwen3.ModeCaptured
		sc.RecaptureEvery = 1 + int(h3%8)
	}
	sc.Verify = h0&16 != 0
	sc.Capacity = 1 + int(h1%4)
	sc.NumBlocks = max(24, 8<<(h3>>6))
	switch h2 % 3 {
	case 0:
		sc.Width = kvpage.Dynamic()
	case 1:
		sc.Width = kvpage.Fixed(1 + int(h2>>2)%3)
	default:
		sc.Width, sc.NumBlocks = kvpage.Fixed(256), 256
	}
	cfg, _ := qwen3.Preset(sc.Model)
	s := Script{Scenario: sc}
	m := newModel(&s.Scenario, sc.MaxLen(cfg))
	bs := sc.BlockSize
	maxW := 3
	if bs == 64 {
		maxW = 2
	}
	emit := func(c Cmd) bool {
		if m.check(c) != nil {
			return false
		}
		s.Commands = append(s.Commands, c)
		m = m.apply(c)
		return true
	}
	for _, b := range data[min(4, len(data)):] {
		if m.work >= fuzzWork || len(s.Commands) >= fuzzCmds {
			break
		}
		w := min(1+int(b&3), maxW)
		d := int(b>>2) & 3
		target := w*bs - 1 + d%3
		switch b >> 6 {
		case 0:
			seq := -1
			for q, l := range m.live {
				if !l {
					seq = q
					break
				}
			}
			n := min(target, fuzzWork-m.work)
			for ; n >= 1; n = n / 2 {
				if emit(Cmd{Kind: Admit, Seq: seq, Prompt: n, Salt: m.admits}) {
					break
				}
			}
		case 1, 3:
			if b>>6 == 3 && d == 0 {
				emit(Cmd{Kind: Recapture})
				continue
			}
			longest := -1
			for q, l := range m.live {
				if l {
					longest = max(longest, m.length[q])
				}
			}
			if longest < 0 {
				continue
			}
			steps := 1
			if b>>6 == 1 {
				steps = max(1, target-longest)
			}
			for steps = min(steps, fuzzWork-m.work); steps >= 1; steps-- {
				if emit(Cmd{Kind: Decode, Steps: steps}) {
					break
				}
			}
		case 2:
			pickQ := -1
			for q, l := range m.live {
				if !l {
					continue
				}
				if pickQ < 0 || (d&1 == 0 && m.length[q] > m.length[pickQ]) || (d&1 == 1 && m.length[q] < m.length[pickQ]) {
					pickQ = q
				}
			}
			if pickQ >= 0 {
				emit(Cmd{Kind: Finish, Seq: pickQ})
			}
		}
	}
	return s
}
