package sim

import "github.com/offcard/offcard/tt"

// bufTable maps the live tensor ids of a device to their buffers. Ids are
// handed out in increasing order and never again, so the table is a list
// of pages of bufPageLen ids, indexed by id/bufPageLen; a page is made at
// its first id and dropped when its last live id is freed, so a long run
// keeps only the pages of ids still live (the engine's persistent tensors,
// the current step's). A look-up is two indexings, not a hash.
type bufTable struct {
	pages []*bufPage
	n     int      // live ids
	spare *bufPage // the last page dropped (all nil), for the next new one
}

type bufPage struct {
	b    [bufPageLen]*buffer
	live int
}

const bufPageLen = 256

// get returns id's buffer.
func (t *bufTable) get(id tt.TensorID) (*buffer, bool) {
	p := uint64(id) / bufPageLen
	if p >= uint64(len(t.pages)) || t.pages[p] == nil {
		return nil, false
	}
	b := t.pages[p].b[uint64(id)%bufPageLen]
	return b, b != nil
}

// put makes b id's buffer (id not live).
func (t *bufTable) put(id tt.TensorID, b *buffer) {
	p := uint64(id) / bufPageLen
	for uint64(len(t.pages)) <= p {
		t.pages = append(t.pages, nil)
	}
	pg := t.pages[p]
	if pg == nil {
		// A step frees all its tensors, so the page of the next ids is
		// dropped and made again step after step: take the one dropped.
		pg, t.spare = t.spare, nil
		if pg == nil {
			pg = new(bufPage)
		}
		t.pages[p] = pg
	}
	if pg.b[uint64(id)%bufPageLen] == nil {
		pg.live++
		t.n++
	}
	pg.b[uint64(id)%bufPageLen] = b
}

// del forgets id (live or not).
func (t *bufTable) del(id tt.TensorID) {
	p := uint64(id) / bufPageLen
	if p >= uint64(len(t.pages)) || t.pages[p] == nil || t.pages[p].b[uint64(id)%bufPageLen] == nil {
		return
	}
	pg := t.pages[p]
	pg.b[uint64(id)%bufPageLen] = nil
	t.n--
	if pg.live--; pg.live == 0 {
		t.pages[p] = nil
		t.spare = pg
	}
}

// all calls fn with every live buffer, in increasing id order.
func (t *bufTable) all(fn func(*buffer)) {
	for _, pg := range t.pages {
		if pg == nil {
			continue
		}
		for _, b := range pg.b {
			if b != nil {
				fn(b)
			}
		}
	}
}
