package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// symbol is one node of the doubly linked list of a word's current tokens.
type symbol struct {
	id         int32
	prev, next int32 // indices into the symbol slice, -1 at the ends
	dead       bool  // merged into its left neighbour
}

// candidate is a possible merge of symbols[pos] with its right neighbour.
type candidate struct {
	rank   uint32
	pos    int32
	left   int32 // ids at push time; the candidate is stale if they changed
	right  int32
	merged int32
}

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// bpeScratch holds reusable buffers for one encoding at a time.
type bpeScratch struct {
	syms []symbol
	heap []candidate
}

func (t *Tokenizer) getScratch() *bpeScratch {
	if sc, ok := t.scratch.Get().(*bpeScratch); ok {
		return sc
	}
	return &bpeScratch{syms: make([]symbol, 0, 64), heap: make([]candidate, 0, 64)}
}

func (sc *bpeScratch) push(c candidate) {
	h := append(sc.heap, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	sc.heap = h
}

func (sc *bpeScratch) pop() candidate {
	h := sc.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	sc.heap = h
	return top
}

// tryPush queues the merge of symbols[pos] and its right neighbour, if the
// pair is in the merge table.
func (t *Tokenizer) tryPush(sc *bpeScratch, pos int32) {
	s := &sc.syms[pos]
	if s.next < 0 {
		return
	}
	r := sc.syms[s.next].id
	v, ok := t.merges[pairKey(s.id, r)]
	if !ok {
		return
	}
	sc.push(candidate{rank: uint32(v >> 32), pos: pos, left: s.id, right: r, merged: int32(uint32(v))})
}

// bpe appends the ids of one pre-token (raw bytes). Merges are applied
// lowest rank first, ties to the leftmost pair, as in HF's BPE
// (Word::merge_all): a binary heap of candidate pairs over a linked list of
// symbols, O(n log n) in the piece length. Stale candidates (a side already
// merged into something else) are skipped when popped.
func (t *Tokenizer) bpe(out []int32, piece string, sc *bpeScratch) []int32 {
	n := len(piece)
	syms := sc.syms[:0]
	for i := 0; i < n; i++ {
		syms = append(syms, symbol{id: t.byteID[piece[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[n-1].next = -1
	sc.syms = syms
	sc.heap = sc.heap[:0]
	for i := 0; i < n-1; i++ {
		t.tryPush(sc, int32(i))
	}
	for len(sc.heap) > 0 {
		c := sc.pop()
		s := &syms[c.pos]
		if s.dead || s.id != c.left || s.next < 0 || syms[s.next].id != c.right {
			continue
		}
		// Merge s with its right neighbour.
		rpos := s.next
		rs := &syms[rpos]
		rs.dead = true
		s.id = c.merged
		s.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = c.pos
		}
		if s.prev >= 0 {
			t.tryPush(sc, s.prev)
		}
		t.tryPush(sc, c.pos)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	return out
}

// encodePiece appends the ids of one pre-token, through the cache.
func (t *Tokenizer) encodePiece(out []int32, piece string, sc *bpeScratch) []int32 {
	switch len(piece) {
	case 0:
		return out
	case 1:
		return append(out, t.byteID[piece[0]])
	}
	if t.ignoreMerges {
		if id, ok := t.rawVocab[piece]; ok {
			return append(out, id)
		}
	}
	if len(piece) > maxCachedPiece {
		return t.bpe(out, piece, sc)
	}
	h := maphash.String(t.cache.seed, piece)
	slot := &t.cache.slots[h&t.cache.mask]
	if e := slot.Load(); e != nil && e.key == piece {
		return append(out, e.ids...)
	}
	start := len(out)
	out = t.bpe(out, piece, sc)
	ids := make([]int32, len(out)-start)
	copy(ids, out[start:])
	// Clone the key: piece points into the caller's text.
	slot.Store(&cacheEntry{key: strings.Clone(piece), ids: ids})
	return out
}

const (
	cacheSlots     = 1 << 15 // entries in the BPE cache
	maxCachedPiece = 64      // longer pieces are not cached
)

// bpeCache is a direct-mapped cache from pre-token to ids: a fixed array of
// atomic pointers, so lookups take no lock, concurrent use is safe, and the
// size is bounded (cacheSlots entries of at most maxCachedPiece bytes). A
// colliding insert simply replaces the slot's entry.
type bpeCache struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	key string
	ids []int32
}

func newBPECache(n int) *bpeCache {
	return &bpeCache{seed: maphash.MakeSeed(), mask: uint64(n - 1), slots: make([]atomic.Pointer[cacheEntry], n)}
}
