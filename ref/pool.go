package ref

import (
	"sync"
)

// pool is a persistent set of worker goroutines that run one function over
// a fixed number of parts. Part 0 runs on the caller. The partition of work
// into parts is the caller's (deterministic) business; the pool only decides
// who runs which part, which never changes a result.
type pool struct {
	parts int
	fn    func(part, parts int)
	start []chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

func newPool(parts int) *pool {
	p := &pool{parts: parts, done: make(chan struct{}, parts)}
	for i := 1; i < parts; i++ {
		c := make(chan struct{}, 1)
		p.start = append(p.start, c)
		p.wg.Add(1)
		go p.worker(i, c)
	}
	return p
}

func (p *pool) worker(part int, start chan struct{}) {
	defer p.wg.Done()
	for range start {
		p.fn(part, p.parts)
		p.done <- struct{}{}
	}
}

// run calls fn(part, parts) for every part and returns when all are done.
// fn must be a long-lived function value (a stored method value), so that
// run does not allocate.
func (p *pool) run(fn func(part, parts int)) {
	if p.parts == 1 {
		fn(0, 1)
		return
	}
	p.fn = fn
	for _, c := range p.start {
		c <- struct{}{}
	}
	fn(0, p.parts)
	// Block rather than spin: the machine may be shared, and a spinning
	// waiter steals the core a worker needs.
	for range p.start {
		<-p.done
	}
}

// close stops the workers and waits for them.
func (p *pool) close() {
	for _, c := range p.start {
		close(c)
	}
	p.start = nil
	p.wg.Wait()
}
