package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/offcard/offcard/proptest"
)

// progressEvery is how often a long run that is not drawn on a terminal
// prints a progress line to stderr: a run shorter than it prints none; a
// longer one prints one every progressEvery, and each failing case as
// soon as it is known (those found before the first line, with it).
var progressEvery = 10 * time.Second

// campaignProgress reports a campaign's progress on stderr: a redrawn
// line on a terminal, else lines at most every progressEvery.
type campaignProgress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu                  sync.Mutex
	done, failed, total int
	talking             bool     // past progressEvery (not a terminal)
	pending             []string // failures known before that
	stop                chan struct{}
	wg                  sync.WaitGroup
}

func startCampaignProgress(w io.Writer, tty bool, total int) *campaignProgress {
	p := &campaignProgress{w: w, tty: tty, start: time.Now(), total: total, stop: make(chan struct{})}
	if !tty {
		p.wg.Add(1)
		go p.tick()
	}
	return p
}

func (p *campaignProgress) tick() {
	defer p.wg.Done()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.talking {
				p.talking = true
				for _, l := range p.pending {
					fmt.Fprintln(p.w, l)
				}
				p.pending = nil
			}
			fmt.Fprintf(p.w, "check: %d/%d %s done, %d failed, %s elapsed\n", p.done, p.total, plural(p.total, "case"), p.failed,
				time.Since(p.start).Round(time.Second))
			p.mu.Unlock()
		}
	}
}

// caseDone reports a finished case: a failure is shown as it happens.
func (p *campaignProgress) caseDone(r proptest.CaseResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if r.Passed {
		p.draw()
		return
	}
	p.failed++
	line := fmt.Sprintf("check: case %d (seed %d) ", r.Index, r.Seed)
	switch {
	case r.Failure != nil:
		line += "failed: " + clipLine(r.Failure.String())
	default:
		line += "did not run: " + clipLine(r.Error)
	}
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.talking:
		fmt.Fprintln(p.w, line)
	default:
		p.pending = append(p.pending, line)
	}
	p.draw()
}

// draw redraws the terminal line.
func (p *campaignProgress) draw() {
	if !p.tty {
		return
	}
	fmt.Fprintf(p.w, "\rcheck: %d/%d %s, %d failed", p.done, p.total, plural(p.total, "case"), p.failed)
	if p.done == p.total {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// Stop ends the reporting (the campaign is over).
func (p *campaignProgress) Stop() {
	close(p.stop)
	p.wg.Wait()
	if p.tty && p.done > 0 && p.done < p.total {
		fmt.Fprint(p.w, "\r\033[K") // --fail-fast stopped short of total
	}
}
