package sim

import (
	"sort"

	"github.com/offcard/offcard/tt"
)

// allocator is one bank manager (§6.4): a free list over [lo, hi) shared by
// every bank of a buffer type, so one address is reserved in all banks.
// Blocks are kept sorted by address. FIRST is address-ordered first fit
// (lowest fitting block bottom-up, highest top-down); BEST picks, among the
// fitting blocks, one in the lowest size class (class = floor(log2(size/1024)),
// last class open-ended), in scan order within the class. Bottom-up places an
// allocation at a block's low end, top-down at its high end. Free coalesces
// with free neighbours; an unknown address is ignored.
type allocator struct {
	lo, hi   uint64
	align    uint64
	bottomUp bool
	best     bool
	free     []block           // sorted by addr, never adjacent
	used     map[uint64]uint64 // addr -> allocated size
}

type block struct{ addr, size uint64 }

// sizeClasses is the number of FreeListOpt size classes modelled for BEST.
const sizeClasses = 8

func newAllocator(lo, hi, align uint64, bottomUp, best bool) *allocator {
	a := &allocator{lo: lo, hi: hi, align: align, bottomUp: bottomUp, best: best, used: map[uint64]uint64{}}
	if hi > lo {
		a.free = []block{{lo, hi - lo}}
	}
	return a
}

func alignUp(x, m uint64) uint64 { return (x + m - 1) / m * m }

func sizeClass(size uint64) int {
	c := 0
	for q := size / 1024; q >= 2 && c < sizeClasses-1; q >>= 1 {
		c++
	}
	return c
}

// allocSize is the bytes reserved per bank for a request of size bytes.
func (a *allocator) allocSize(size uint64) uint64 {
	return alignUp(max(size, a.align), a.align)
}

// alloc reserves size bytes (rounded to the alignment) and returns the address.
func (a *allocator) alloc(size uint64) (uint64, bool) { return a.allocDir(size, a.bottomUp) }

// allocDir is alloc in the given direction (a buffer may ask for the
// opposite of its type's default, as tt-metal's kernel-binary buffer does).
func (a *allocator) allocDir(size uint64, bottomUp bool) (uint64, bool) {
	need := a.allocSize(size)
	pick := -1
	for i, b := range a.free {
		if b.size < need {
			continue
		}
		switch {
		case pick < 0:
			pick = i
		case a.best:
			pc, bc := sizeClass(a.free[pick].size), sizeClass(b.size)
			if bc < pc || (bc == pc && !bottomUp) {
				pick = i
			}
		case !bottomUp:
			pick = i // highest fitting block
		}
	}
	if pick < 0 {
		return 0, false
	}
	b := a.free[pick]
	var addr uint64
	if bottomUp {
		addr = b.addr
		a.free[pick] = block{b.addr + need, b.size - need}
	} else {
		addr = b.addr + b.size - need
		a.free[pick] = block{b.addr, b.size - need}
	}
	if a.free[pick].size == 0 {
		a.free = append(a.free[:pick], a.free[pick+1:]...)
	}
	a.used[addr] = need
	return addr, true
}

// release frees the allocation at addr (ignored if unknown) and coalesces.
func (a *allocator) release(addr uint64) {
	size, ok := a.used[addr]
	if !ok {
		return
	}
	delete(a.used, addr)
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].addr > addr })
	nb := block{addr, size}
	if i > 0 && a.free[i-1].addr+a.free[i-1].size == addr {
		i--
		nb = block{a.free[i].addr, a.free[i].size + size}
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	if i < len(a.free) && nb.addr+nb.size == a.free[i].addr {
		nb.size += a.free[i].size
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	a.free = append(a.free, block{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = nb
}

// lowestUsed is the lowest allocated address, or hi when nothing is
// allocated. Every address of [lo, hi) lies in a free block or an
// allocation, and free blocks are never adjacent: so it is lo, unless the
// first free block starts there, and then that block's end (hi when it is
// the whole range).
func (a *allocator) lowestUsed() uint64 {
	if len(a.free) == 0 || a.free[0].addr > a.lo {
		return a.lo
	}
	return a.free[0].addr + a.free[0].size
}

// freeBlocks returns a copy of the free list (address order).
func (a *allocator) freeBlocks() []block { return append([]block(nil), a.free...) }

// stats is FreeListOpt::get_statistics for the out-of-memory text
// (tt_metal/impl/allocator/algorithms/free_list_opt.cpp:402-431): the bank's
// size (max_size_bytes), the bytes allocated and free per bank, and the
// largest free block.
func (a *allocator) stats() (size, allocated, free, largest uint64) {
	size = a.hi - a.lo
	for _, n := range a.used {
		allocated += n
	}
	for _, b := range a.free {
		free += b.size
		largest = max(largest, b.size)
	}
	if allocated == 0 {
		free, largest = size, size
	}
	return size, allocated, free, largest
}

// outOfMemory is BankManager::allocate_buffer's refusal when no range of
// size per bank fits (tt_metal/impl/allocator/bank_manager.cpp:449-462):
// total is the buffer's bytes across banks.
func (a *allocator) outOfMemory(op string, total uint64, bt tt.BufferType, banks int, perBank uint64) error {
	size, allocated, free, largest := a.stats()
	return tt.Errorf(op, tt.MsgOutOfMemory, total, bt, banks, perBank, size, allocated, free, largest)
}
