package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/tt"
)

// at is id's buffer, or nil.
func (t *bufTable) at(id tt.TensorID) *buffer { b, _ := t.get(id); return b }

// The table against a map, through random puts and deletes of increasing
// ids (some freed at once, some kept long, as a decode step's and an
// engine's tensors), then the oldest all freed: the same buffers, the
// same count, all in increasing id order, and only the pages of live ids
// kept.
func TestBufTableIsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var tab bufTable
	want := map[tt.TensorID]*buffer{}
	var live []tt.TensorID
	next := tt.TensorID(1)
	for step := 0; step < 20000; step++ {
		if r.IntN(3) > 0 || len(live) == 0 {
			b := &buffer{id: next}
			tab.put(next, b)
			want[next] = b
			live = append(live, next)
			next++
		} else {
			i := len(live) - 1 - r.IntN(min(len(live), 8)) // mostly recent ones
			if r.IntN(20) == 0 {
				i = r.IntN(len(live)) // now and then an old one
			}
			tab.del(live[i])
			delete(want, live[i])
			live = append(live[:i], live[i+1:]...)
		}
		if step%997 == 0 {
			tab.del(next + 5) // never put: nothing happens
		}
	}
	// The oldest ids all freed: their pages go.
	for i := 0; i < len(live); {
		if live[i] < 3*bufPageLen {
			tab.del(live[i])
			delete(want, live[i])
			live = append(live[:i], live[i+1:]...)
			continue
		}
		i++
	}
	for p := 0; p < 3; p++ {
		if tab.pages[p] != nil {
			t.Fatalf("page %d of freed ids kept", p)
		}
	}
	if tab.n != len(want) {
		t.Fatalf("n = %d, want %d", tab.n, len(want))
	}
	for id := tt.TensorID(0); id < next+bufPageLen; id++ {
		b, ok := tab.get(id)
		if w := want[id]; ok != (w != nil) || b != w {
			t.Fatalf("id %d: %p %v, want %p", id, b, ok, w)
		}
	}
	var prev tt.TensorID
	seen := 0
	tab.all(func(b *buffer) {
		if b.id <= prev || want[b.id] != b {
			t.Fatalf("all: %d after %d", b.id, prev)
		}
		prev = b.id
		seen++
	})
	if seen != len(want) {
		t.Fatalf("all saw %d of %d", seen, len(want))
	}
	pages := 0
	for _, pg := range tab.pages {
		if pg != nil {
			pages++
		}
	}
	used := map[uint64]bool{}
	for id := range want {
		used[uint64(id)/bufPageLen] = true
	}
	if pages != len(used) {
		t.Fatalf("%d pages kept for live ids in %d", pages, len(used))
	}
}

func BenchmarkBufTable(b *testing.B) {
	ids := make([]tt.TensorID, 64)
	b.Run("table", func(b *testing.B) {
		var tab bufTable
		for i := range ids {
			ids[i] = tt.TensorID(1000 + i)
			tab.put(ids[i], &buffer{id: ids[i]})
		}
		for i := 0; i < b.N; i++ {
			if _, ok := tab.get(ids[i%64]); !ok {
				b.Fatal()
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		m := map[tt.TensorID]*buffer{}
		for i := range ids {
			m[ids[i]] = &buffer{id: ids[i]}
		}
		for i := 0; i < b.N; i++ {
			if _, ok := m[ids[i%64]]; !ok {
				b.Fatal()
			}
		}
	})
}

// A step that frees every tensor it made drops the page of its ids; the
// next step's first id takes that page again instead of a new one (a new
// 2 KiB page of pointers at every step, before).
func TestBufTableReusesADroppedPage(t *testing.T) {
	var tab bufTable
	b := &buffer{}
	id := tt.TensorID(1)
	if n := testing.AllocsPerRun(1000, func() {
		tab.put(id, b)
		tab.del(id)
		id++
	}); n != 0 {
		t.Fatalf("a put and a del of one id allocate %v times", n)
	}
	if tab.n != 0 || tab.at(id-1) != nil {
		t.Fatal("the table is not empty")
	}
}
