package ref

import (
	"sync"
	"time"
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
	for recvSpin(start) {
		p.fn(part, p.parts)
		p.done <- struct{}{}
	}
}

// spinFor is how long a waiting worker or caller polls its channel before
// it blocks. A decode step hands the workers a matrix every few
// microseconds; a worker that blocked in between must be woken by the
// operating system, which on a virtual machine costs tens to hundreds of
// microseconds a time (an idle virtual CPU halts). A short poll keeps the
// hand-over cheap and gives the core back soon after the step ends.
const spinFor = 100 * time.Microsecond

// recvSpin receives from c, polling for up to spinFor before it blocks;
// false when c is closed.
func recvSpin(c <-chan struct{}) bool {
	var t0 time.Time
	for i := 0; ; i++ {
		select {
		case _, ok := <-c:
			return ok
		default:
		}
		switch {
		case i == 0:
			t0 = time.Now()
		case i&31 == 0 && time.Since(t0) > spinFor:
			_, ok := <-c
			return ok
		}
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
	for range p.start {
		recvSpin(p.done)
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
