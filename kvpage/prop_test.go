package kvpage

// Property tests over random pool/table histories (gopter, stateful
// "commands" testing). The model predicts every block id exactly, because
// Alloc and Grow hand out the lowest free id.
//
// On failure gopter prints "failed with initial seed: N". Replay it with
//
//	go test ./kvpage -run '^TestPoolHistories$' -kvpage.seed=N
//
// or KVPAGE_SEED=N go test ./kvpage -run '^TestPoolHistories$'. The replay is
// exact only when the same properties run in the same order (they share one
// RNG), so keep the -run pattern and -kvpage.tests the same as the failing
// run. -kvpage.tests sets the number of histories (default 400).

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

var (
	seedFlag  = flag.Int64("kvpage.seed", 0, "gopter seed to replay (0: KVPAGE_SEED or time-based)")
	testsFlag = flag.Int("kvpage.tests", 400, "number of random histories per property")
)

func propParams(t *testing.T) *gopter.TestParameters {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("KVPAGE_SEED"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("KVPAGE_SEED=%q: %v", s, err)
			}
			seed = v
		}
	}
	var p *gopter.TestParameters
	if seed != 0 {
		p = gopter.DefaultTestParametersWithSeed(seed)
	} else {
		p = gopter.DefaultTestParameters()
	}
	p.MinSuccessfulTests = *testsFlag
	p.MaxSize = 60 // commands per history; the size ramps up to it
	p.Workers = 1  // replay needs a single worker
	return p
}

// ---- model ----------------------------------------------------------------

const (
	ownFree  = -1
	ownLoose = -2
)

// Expected outcome of the last command, set by NextState.
const (
	expOK        = "ok"
	expExhausted = "exhausted"
	expRange     = "out of range"
	expDouble    = "double free"
	expOwned     = "owned by table"
	expInvalid   = "invalid argument"
)

type model struct {
	n, bs  int
	owner  []int // per block: ownFree, ownLoose, or a table index
	tables [][]int32
	lens   []int
	loose  []int32 // loose ids in allocation order
	expect string  // outcome of the last command
	nextID int32   // id the last Alloc must return (when expect == ok)
}

func (m *model) String() string {
	return fmt.Sprintf("pool(n=%d bs=%d tables=%d)", m.n, m.bs, len(m.tables))
}

func (m *model) clone() *model {
	c := *m
	c.owner = slices.Clone(m.owner)
	c.tables = make([][]int32, len(m.tables))
	for i, tb := range m.tables {
		c.tables[i] = slices.Clone(tb)
	}
	c.lens = slices.Clone(m.lens)
	c.loose = slices.Clone(m.loose)
	return &c
}

func (m *model) numFree() int {
	n := 0
	for _, o := range m.owner {
		if o == ownFree {
			n++
		}
	}
	return n
}

// take gives the lowest free id to owner o; the caller has checked one is free.
func (m *model) take(o int) int32 {
	for id, own := range m.owner {
		if own == ownFree {
			m.owner[id] = o
			return int32(id)
		}
	}
	panic("model: no free block")
}

// ---- system under test ------------------------------------------------------

type sut struct {
	pool   *Pool
	tables []*Table
	loose  []int32 // what the user holds from Alloc
}

type snapshot struct {
	numFree, inUse int
	blocks         [][]int32
	lens           []int
	loose          []int32
	internal       string // pool.check and ownership cross-check failures
}

func (s *sut) snap() snapshot {
	sn := snapshot{numFree: s.pool.NumFree(), inUse: s.pool.InUse(), loose: slices.Clone(s.loose)}
	var bad []string
	if err := s.pool.check(); err != nil {
		bad = append(bad, err.Error())
	}
	for _, tb := range s.tables {
		bl := tb.Blocks()
		sn.blocks = append(sn.blocks, bl)
		sn.lens = append(sn.lens, tb.Len())
		for _, id := range bl {
			if id >= 0 && int(id) < len(s.pool.state) && s.pool.state[id] != stateTable {
				bad = append(bad, fmt.Sprintf("table block %d in pool state %d", id, s.pool.state[id]))
			}
		}
	}
	for _, id := range s.loose {
		if id >= 0 && int(id) < len(s.pool.state) && s.pool.state[id] != stateLoose {
			bad = append(bad, fmt.Sprintf("loose block %d in pool state %d", id, s.pool.state[id]))
		}
	}
	sn.internal = strings.Join(bad, "; ")
	return sn
}

func (a snapshot) equal(b snapshot) bool {
	if a.numFree != b.numFree || a.inUse != b.inUse || !slices.Equal(a.lens, b.lens) ||
		!slices.Equal(a.loose, b.loose) || len(a.blocks) != len(b.blocks) {
		return false
	}
	for i := range a.blocks {
		if !slices.Equal(a.blocks[i], b.blocks[i]) {
			return false
		}
	}
	return true
}

func (a snapshot) String() string {
	return fmt.Sprintf("free=%d inUse=%d tables=%v lens=%v loose=%v", a.numFree, a.inUse, a.blocks, a.lens, a.loose)
}

type result struct {
	err           error
	id            int32 // Alloc's id
	before, after snapshot
}

func classify(err error) string {
	switch {
	case err == nil:
		return expOK
	case errors.Is(err, ErrExhausted):
		return expExhausted
	case errors.Is(err, ErrOutOfRange):
		return expRange
	case errors.Is(err, ErrDoubleFree):
		return expDouble
	case errors.Is(err, ErrOwnedByTable):
		return expOwned
	default:
		return expInvalid
	}
}

func falsify(format string, args ...any) *gopter.PropResult {
	// Labels, not Error: gopter prints labels of a falsified property.
	return &gopter.PropResult{Status: gopter.PropFalse, Labels: []string{fmt.Sprintf(format, args...)}}
}

// checkAfter is every command's postcondition: the invariants on the real
// state alone, then the real state against the model.
func checkAfter(cmd fmt.Stringer, st commands.State, res commands.Result) *gopter.PropResult {
	m := st.(*model)
	r := res.(*result)
	a := r.after
	if a.internal != "" {
		return falsify("%v: pool internals: %s", cmd, a.internal)
	}
	// No block owned twice, across all tables and loose allocations.
	owners := map[int32]string{}
	claim := func(id int32, who string) string {
		if id < 0 || int(id) >= m.n {
			return fmt.Sprintf("%s holds out-of-range block %d", who, id)
		}
		if prev, ok := owners[id]; ok {
			return fmt.Sprintf("block %d owned twice: %s and %s", id, prev, who)
		}
		owners[id] = who
		return ""
	}
	for i, bl := range a.blocks {
		for _, id := range bl {
			if msg := claim(id, fmt.Sprintf("table %d", i)); msg != "" {
				return falsify("%v: %s (%v)", cmd, msg, a)
			}
		}
		// Tables consistent with lengths.
		if want := BlocksFor(a.lens[i], m.bs); len(bl) != want {
			return falsify("%v: table %d has %d blocks for length %d, want %d", cmd, i, len(bl), a.lens[i], want)
		}
	}
	for _, id := range a.loose {
		if msg := claim(id, "loose"); msg != "" {
			return falsify("%v: %s (%v)", cmd, msg, a)
		}
	}
	// Pool counts add up.
	if a.numFree+a.inUse != m.n || a.inUse != len(owners) {
		return falsify("%v: counts free=%d inUse=%d owned=%d of %d", cmd, a.numFree, a.inUse, len(owners), m.n)
	}
	// Outcome as the model expects; a refused call changes nothing.
	if got := classify(r.err); got != m.expect {
		return falsify("%v: outcome %q (%v), model expects %q", cmd, got, r.err, m.expect)
	}
	if r.err != nil && !a.equal(r.before) {
		return falsify("%v: failed with %v but changed state: before %v after %v", cmd, r.err, r.before, a)
	}
	if errors.Is(r.err, ErrExhausted) && !strings.HasPrefix(r.err.Error(), "kvpage: ") {
		return falsify("%v: exhaustion message %q", cmd, r.err)
	}
	// Exactly the model's state (lowest-free-first ids, so freed blocks are reused).
	want := snapshot{numFree: m.numFree(), inUse: m.n - m.numFree(), blocks: m.tables, lens: m.lens, loose: m.loose}
	if !a.equal(want) {
		return falsify("%v: state %v, model %v", cmd, a, want)
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// ---- commands ---------------------------------------------------------------

type baseCmd struct{}

func (baseCmd) PreCondition(commands.State) bool { return true }

type allocCmd struct{ baseCmd }

func (allocCmd) String() string { return "Alloc" }
func (allocCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*sut)
	r := &result{before: u.snap()}
	r.id, r.err = u.pool.Alloc()
	if r.err == nil {
		u.loose = append(u.loose, r.id)
	}
	r.after = u.snap()
	return r
}
func (allocCmd) NextState(st commands.State) commands.State {
	m := st.(*model).clone()
	if m.numFree() == 0 {
		m.expect = expExhausted
		return m
	}
	m.expect = expOK
	m.nextID = m.take(ownLoose)
	m.loose = append(m.loose, m.nextID)
	return m
}
func (c allocCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	if pr := checkAfter(c, st, res); !pr.Success() {
		return pr
	}
	m, r := st.(*model), res.(*result)
	if r.err == nil && r.id != m.nextID {
		return falsify("Alloc returned %d, want lowest free %d", r.id, m.nextID)
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// freeCmd frees loose allocation k (mod the number held). With realloc it
// then allocates at once: that must succeed and hand out the lowest free id,
// which is the freed one when it is the lowest free.
type freeCmd struct {
	k       int
	realloc bool
}

func (c freeCmd) String() string {
	if c.realloc {
		return fmt.Sprintf("FreeRealloc(%d)", c.k)
	}
	return fmt.Sprintf("Free(loose[%d])", c.k)
}
func (c freeCmd) PreCondition(st commands.State) bool { return c.k >= 0 && len(st.(*model).loose) > 0 }
func (c freeCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*sut)
	r := &result{before: u.snap()}
	i := c.k % len(u.loose)
	id := u.loose[i]
	if r.err = u.pool.Free(id); r.err == nil {
		u.loose = slices.Delete(u.loose, i, i+1)
		if c.realloc {
			r.id, r.err = u.pool.Alloc()
			if r.err == nil {
				u.loose = append(u.loose, r.id)
			}
		}
	}
	r.after = u.snap()
	return r
}
func (c freeCmd) NextState(st commands.State) commands.State {
	m := st.(*model).clone()
	i := c.k % len(m.loose)
	m.owner[m.loose[i]] = ownFree
	m.loose = slices.Delete(m.loose, i, i+1)
	m.expect = expOK
	if c.realloc {
		m.nextID = m.take(ownLoose)
		m.loose = append(m.loose, m.nextID)
	}
	return m
}
func (c freeCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	if pr := checkAfter(c, st, res); !pr.Success() {
		return pr
	}
	m, r := st.(*model), res.(*result)
	if c.realloc && r.id != m.nextID {
		return falsify("%v: realloc returned %d, want %d", c, r.id, m.nextID)
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// badFreeCmd frees an id the user does not hold loosely: out of range,
// already free, or a table's block. It must be refused and change nothing.
type badFreeCmd struct{ id int32 }

func (c badFreeCmd) String() string { return fmt.Sprintf("BadFree(%d)", c.id) }
func (c badFreeCmd) PreCondition(st commands.State) bool {
	return !slices.Contains(st.(*model).loose, c.id)
}
func (c badFreeCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*sut)
	r := &result{before: u.snap()}
	r.err = u.pool.Free(c.id)
	r.after = u.snap()
	return r
}
func (c badFreeCmd) NextState(st commands.State) commands.State {
	m := st.(*model).clone()
	switch {
	case c.id < 0 || int(c.id) >= m.n:
		m.expect = expRange
	case m.owner[c.id] == ownFree:
		m.expect = expDouble
	default:
		m.expect = expOwned
	}
	return m
}
func (c badFreeCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	return checkAfter(c, st, res)
}

// growCmd grows table t by delta positions (delta may be negative: a no-op,
// or an invalid negative length).
type growCmd struct{ t, delta int }

func (c growCmd) String() string { return fmt.Sprintf("Grow(t%d, %+d)", c.t, c.delta) }
func (c growCmd) PreCondition(st commands.State) bool {
	return c.t >= 0 && c.t < len(st.(*model).tables)
}
func (c growCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*sut)
	r := &result{before: u.snap()}
	r.err = u.tables[c.t].Grow(r.before.lens[c.t] + c.delta)
	r.after = u.snap()
	return r
}
func (c growCmd) NextState(st commands.State) commands.State {
	m := st.(*model).clone()
	length := m.lens[c.t] + c.delta
	switch {
	case length < 0:
		m.expect = expInvalid
	case length <= m.lens[c.t]:
		m.expect = expOK
	default:
		need := BlocksFor(length, m.bs) - len(m.tables[c.t])
		if need > m.numFree() {
			m.expect = expExhausted
			return m
		}
		for range need {
			m.tables[c.t] = append(m.tables[c.t], m.take(c.t))
		}
		m.lens[c.t] = length
		m.expect = expOK
	}
	return m
}
func (c growCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	return checkAfter(c, st, res)
}

type releaseCmd struct{ t int }

func (c releaseCmd) String() string { return fmt.Sprintf("Release(t%d)", c.t) }
func (c releaseCmd) PreCondition(st commands.State) bool {
	return c.t >= 0 && c.t < len(st.(*model).tables)
}
func (c releaseCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*sut)
	r := &result{before: u.snap()}
	u.tables[c.t].Release()
	r.after = u.snap()
	return r
}
func (c releaseCmd) NextState(st commands.State) commands.State {
	m := st.(*model).clone()
	for _, id := range m.tables[c.t] {
		m.owner[id] = ownFree
	}
	m.tables[c.t] = m.tables[c.t][:0]
	m.lens[c.t] = 0
	m.expect = expOK
	return m
}
func (c releaseCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	return checkAfter(c, st, res)
}

func poolCommands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(st commands.State) commands.SystemUnderTest {
			m := st.(*model)
			p, err := NewPool(m.n, m.bs)
			if err != nil {
				panic(err)
			}
			u := &sut{pool: p}
			for range m.tables {
				u.tables = append(u.tables, p.NewTable())
			}
			return u
		},
		// Small pools so exhaustion is common.
		InitialStateGen: gopter.CombineGens(gen.IntRange(1, 10), gen.IntRange(1, 4), gen.IntRange(1, 3)).
			Map(func(v []any) *model {
				n, bs, nt := v[0].(int), v[1].(int), v[2].(int)
				m := &model{n: n, bs: bs, owner: make([]int, n), tables: make([][]int32, nt), lens: make([]int, nt)}
				for i := range m.owner {
					m.owner[i] = ownFree
				}
				return m
			}),
		GenCommandFunc: func(st commands.State) gopter.Gen {
			m := st.(*model)
			nt := len(m.tables)
			grow := gopter.CombineGens(gen.IntRange(0, nt-1), gen.IntRange(-2, 3*m.bs+1)).
				Map(func(v []any) commands.Command { return growCmd{t: v[0].(int), delta: v[1].(int)} })
			return gen.OneGenOf(
				gen.Const(allocCmd{}).Map(func(c allocCmd) commands.Command { return c }),
				gen.Const(allocCmd{}).Map(func(c allocCmd) commands.Command { return c }),
				gen.IntRange(0, 7).Map(func(k int) commands.Command { return freeCmd{k: k} }),
				gen.IntRange(0, 7).Map(func(k int) commands.Command { return freeCmd{k: k, realloc: true} }),
				gen.IntRange(-2, m.n+1).Map(func(id int) commands.Command { return badFreeCmd{id: int32(id)} }),
				grow, grow, grow,
				gen.IntRange(0, nt-1).Map(func(t int) commands.Command { return releaseCmd{t: t} }),
			)
		},
	}
}

func TestPoolHistories(t *testing.T) {
	props := gopter.NewProperties(propParams(t))
	props.Property("pool and tables match the model", commands.Prop(poolCommands()))
	props.TestingRun(t)
}

func TestSlotArithmeticProps(t *testing.T) {
	props := gopter.NewProperties(propParams(t))
	props.Property("pos = BlockIndex*bs + Row, 0 <= Row < bs, BlocksFor(pos+1) = BlockIndex+1",
		prop.ForAll(func(pos, bs int) bool {
			i, r := BlockIndex(pos, bs), Row(pos, bs)
			return i*bs+r == pos && r >= 0 && r < bs && BlocksFor(pos+1, bs) == i+1 &&
				BlocksFor(pos, bs) == i+min(r, 1)
		}, gen.IntRange(0, 1<<20), gen.IntRange(1, 128)))
	props.Property("PaddedRow keeps the table and pads the rest",
		prop.ForAll(func(table []int32, extra int, pad int32) bool {
			row, err := PaddedRow(table, len(table)+extra, pad)
			if err != nil || len(row) != len(table)+extra || !slices.Equal(row[:len(table)], table) {
				return false
			}
			for _, v := range row[len(table):] {
				if v != pad {
					return false
				}
			}
			if len(table) == 0 {
				return true
			}
			_, err = PaddedRow(table, len(table)-1, pad) // one column short
			return err != nil
		}, gen.SliceOf(gen.Int32Range(0, 1000)), gen.IntRange(0, 5), gen.Int32Range(-1, 1)))
	props.TestingRun(t)
}
