package main

import (
	"fmt"
	"io"
	"os"
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
		line += "failed: " + shortLine(r.Failure.String())
	default:
		line += "did not run: " + shortLine(r.Error)
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

// startPhase reports a long step of a command on stderr ("offcard
// export: synthesising ..."): on a terminal a line redrawn every second
// once the step has run a second, elsewhere a line every progressEvery;
// a shorter step prints nothing. detail, when set, adds what the step has
// done so far. The returned func ends the report.
func startPhase(e *env, cmd, what string, detail func() string) func() {
	if e == nil {
		return func() {}
	}
	every := progressEvery
	if e.stderrTTY {
		every = time.Second
	}
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	drawn, lines := false, 0
	report := func(suffix string) {
		line := fmt.Sprintf("offcard %s: %s", cmd, what)
		if detail != nil {
			if d := detail(); d != "" {
				line += ": " + d
			}
		}
		line += fmt.Sprintf(" (%s%s)", time.Since(start).Round(time.Second), suffix)
		if e.stderrTTY {
			fmt.Fprintf(e.stderr, "\r\033[K%s", line)
			drawn = true
		} else {
			fmt.Fprintln(e.stderr, line)
			lines++
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				report("")
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
		switch {
		case drawn:
			fmt.Fprint(e.stderr, "\r\033[K")
		case !e.stderrTTY && lines == 0 && time.Since(start) >= every:
			// Outlasted progressEvery between two ticks: say it once.
			report(", done")
		}
	}
}

// dirBytes is the size of the regular files in dir (the temporary ones a
// writer has not renamed yet included), for progress.
func dirBytes(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, en := range ents {
		if fi, err := en.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}
