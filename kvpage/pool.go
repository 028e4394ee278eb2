package kvpage

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
)

// ErrExhausted is matched (via errors.Is) by every error that reports the
// pool has too few free blocks. The concrete error is an *ExhaustedError.
var ErrExhausted = errors.New("kvpage: pool exhausted")

// ErrOutOfRange is matched by errors for a block id outside 0..NumBlocks-1.
var ErrOutOfRange = errors.New("kvpage: block id out of range")

// ErrDoubleFree is matched by errors for freeing a block that is already free.
var ErrDoubleFree = errors.New("kvpage: double free")

// ErrOwnedByTable is matched by errors for freeing, with Pool.Free, a block
// that belongs to a Table.
var ErrOwnedByTable = errors.New("kvpage: block owned by a table")

// ExhaustedError reports an allocation the pool could not satisfy.
// errors.Is(err, ErrExhausted) is true for it.
type ExhaustedError struct {
	NumBlocks int // the pool's size
	Free      int // free blocks at the time of the request
	Need      int // blocks the request needed (>= 1)
}

func (e *ExhaustedError) Error() string {
	if e.Free == 0 {
		if e.Need > 1 {
			return fmt.Sprintf("kvpage: all %d blocks in use (need %d more)", e.NumBlocks, e.Need)
		}
		return fmt.Sprintf("kvpage: all %d blocks in use", e.NumBlocks)
	}
	return fmt.Sprintf("kvpage: need %d more blocks but only %d of %d are free", e.Need, e.Free, e.NumBlocks)
}

// Is makes errors.Is(err, ErrExhausted) hold.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

type blockState uint8

const (
	stateFree blockState = iota
	stateLoose
	stateTable
)

// Pool is a fixed pool of KV blocks. Alloc hands out the lowest free id.
type Pool struct {
	blockSize int
	state     []blockState // per block id
	refs      []int32      // per block id: tables holding it (0 unless stateTable)
	free      idHeap       // free ids, min-heap
}

// NewPool returns a pool of numBlocks free blocks of blockSize positions.
// Both must be positive and numBlocks must fit an int32 id.
func NewPool(numBlocks, blockSize int) (*Pool, error) {
	if numBlocks < 1 || numBlocks > math.MaxInt32 {
		return nil, fmt.Errorf("kvpage: NewPool: numBlocks %d outside [1, %d]", numBlocks, math.MaxInt32)
	}
	if blockSize < 1 {
		return nil, fmt.Errorf("kvpage: NewPool: blockSize %d must be positive", blockSize)
	}
	p := &Pool{
		blockSize: blockSize,
		state:     make([]blockState, numBlocks),
		refs:      make([]int32, numBlocks),
		free:      make(idHeap, numBlocks),
	}
	for i := range p.free {
		p.free[i] = int32(i) // ascending: already a valid min-heap
	}
	return p, nil
}

// NumBlocks is the pool's total number of blocks.
func (p *Pool) NumBlocks() int { return len(p.state) }

// BlockSize is the number of positions per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// NumFree is the number of free blocks.
func (p *Pool) NumFree() int { return len(p.free) }

// InUse is the number of allocated blocks (loose or in tables);
// NumFree()+InUse() == NumBlocks() always.
func (p *Pool) InUse() int { return len(p.state) - len(p.free) }

// Alloc takes the lowest free block as a loose allocation, to be returned
// with Free. It fails with ErrExhausted when every block is in use.
func (p *Pool) Alloc() (int32, error) {
	if len(p.free) == 0 {
		return 0, &ExhaustedError{NumBlocks: len(p.state), Free: 0, Need: 1}
	}
	return p.take(stateLoose), nil
}

// Free returns a loose block to the pool. It fails, changing nothing, when id
// is out of range, already free, or owned by a Table.
func (p *Pool) Free(id int32) error {
	if id < 0 || int(id) >= len(p.state) {
		return fmt.Errorf("kvpage: free of block %d: %w [0, %d)", id, ErrOutOfRange, len(p.state))
	}
	switch p.state[id] {
	case stateFree:
		return fmt.Errorf("kvpage: free of block %d: %w", id, ErrDoubleFree)
	case stateTable:
		return fmt.Errorf("kvpage: free of block %d: %w; release the table instead", id, ErrOwnedByTable)
	}
	p.put(id)
	return nil
}

// take pops the lowest free id; the caller has checked one is free.
func (p *Pool) take(s blockState) int32 {
	id := heap.Pop(&p.free).(int32)
	p.state[id] = s
	if s == stateTable {
		p.refs[id] = 1
	}
	return id
}

func (p *Pool) put(id int32) {
	p.state[id] = stateFree
	p.refs[id] = 0
	heap.Push(&p.free, id)
}

// check verifies the pool's internal consistency (for tests).
func (p *Pool) check() error {
	seen := make([]bool, len(p.state))
	for _, id := range p.free {
		if id < 0 || int(id) >= len(p.state) {
			return fmt.Errorf("free list holds out-of-range id %d", id)
		}
		if seen[id] {
			return fmt.Errorf("free list holds id %d twice", id)
		}
		seen[id] = true
		if p.state[id] != stateFree {
			return fmt.Errorf("free list holds id %d in state %d", id, p.state[id])
		}
	}
	for id, s := range p.state {
		if s == stateFree && !seen[id] {
			return fmt.Errorf("block %d is free but not on the free list", id)
		}
		if r := p.refs[id]; (s == stateTable) != (r > 0) || r < 0 {
			return fmt.Errorf("block %d in state %d has reference count %d", id, s, r)
		}
	}
	return nil
}

// idHeap is a min-heap of block ids.
type idHeap []int32

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
