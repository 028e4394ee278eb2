package proptest

import (
	"math/rand"
	"reflect"
	"sync"
)

// What the SUT serves: a schedule draws a serving action only when the
// SUT's decoder supports its calls (qwen3.Serves), and the schedule is
// drawn before any SUT of its case exists. So a case (a campaign: its
// first case to run) asks once, with a SUT built for its own scenario,
// and then hands that SUT to the case's first run: asking costs no
// factory call of its own.

func closeSUT(s SUT) {
	_ = s.Close()
	if rc, ok := s.(Recycler); ok {
		rc.Recycle()
	}
}

// prober asks a factory once what its SUTs serve and keeps the SUT it
// built for the first run of the same scenario.
type prober struct {
	f    Factory
	b    Base
	once sync.Once
	sv   Serving
	err  error
	done bool

	mu  sync.Mutex
	sc  Scenario
	sut SUT // nil once a run took it
}

func newProber(f Factory, b Base) *prober { return &prober{f: f, b: b} }

// probe answers what the SUT serves, asking (once) with a SUT for the
// scenario of the case with seed s.
func (p *prober) probe(s uint64) (Serving, error) {
	p.once.Do(func() {
		p.done = true
		if p.f == nil {
			return
		}
		b := p.b
		b.Serve = &Serving{} // the scenario is drawn before any command
		script, ok := GenerateScript(s, b)
		if !ok {
			script.Scenario = drawScenario(rand.New(rand.NewSource(int64(s))), p.b)
		}
		sut, err := p.f(script.Scenario)
		if err != nil || sut == nil {
			p.err = err
			return
		}
		p.sv = ServingOf(sut.Decoder())
		p.mu.Lock()
		p.sc, p.sut = script.Scenario, sut
		p.mu.Unlock()
	})
	return p.sv, p.err
}

// factory is p's factory: the kept SUT for the first call with its
// scenario, else a new one.
func (p *prober) factory(sc Scenario) (SUT, error) {
	p.mu.Lock()
	if p.sut != nil && reflect.DeepEqual(p.sc, sc) {
		s := p.sut
		p.sut = nil
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	return p.f(sc)
}

// close closes the kept SUT when no run took it.
func (p *prober) close() {
	p.mu.Lock()
	s := p.sut
	p.sut = nil
	p.mu.Unlock()
	if s != nil {
		closeSUT(s)
	}
}
