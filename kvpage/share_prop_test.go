package kvpage

// Property test of shared blocks (fork, prefix hit, copy-on-write,
// truncation) over random histories, in the style of TestPoolHistories: a
// model predicts every block id exactly (lowest free first), every copy
// PrepareWrite asks for, and the content every table must read back. The
// system under test carries a fake KV cache (one value per block row): the
// test carries out the copies PrepareWrite returns and then writes a fresh
// value at each prepared position through the table, so a write into a
// block another table still holds shows up as that table reading a value it
// never wrote.
//
// Replay a failure with
//
//	go test ./kvpage -run '^TestSharedHistories$' -kvpage.seed=N

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"
)

// ---- model ----------------------------------------------------------------

type shModel struct {
	n, bs   int
	tables  [][]int32
	lens    []int
	content [][]int // per table, per position: the value written (0: never written)
	next    int     // last value written
	expect  string
	copies  []BlockCopy // the last PrepareWrite's copies
}

func (m *shModel) String() string {
	return fmt.Sprintf("shared(n=%d bs=%d tables=%d)", m.n, m.bs, len(m.tables))
}

func (m *shModel) clone() *shModel {
	c := *m
	c.tables = make([][]int32, len(m.tables))
	c.content = make([][]int, len(m.tables))
	for i := range m.tables {
		c.tables[i] = slices.Clone(m.tables[i])
		c.content[i] = slices.Clone(m.content[i])
	}
	c.lens = slices.Clone(m.lens)
	c.copies = nil
	return &c
}

func (m *shModel) refs() []int {
	r := make([]int, m.n)
	for _, tb := range m.tables {
		for _, id := range tb {
			r[id]++
		}
	}
	return r
}

func (m *shModel) numFree() int {
	f := 0
	for _, r := range m.refs() {
		if r == 0 {
			f++
		}
	}
	return f
}

func (m *shModel) take() int32 {
	for id, r := range m.refs() {
		if r == 0 {
			return int32(id)
		}
	}
	panic("model: no free block")
}

func (m *shModel) release(t int) {
	m.tables[t], m.lens[t], m.content[t] = nil, 0, nil
}

func (m *shModel) setLen(t, length int) {
	m.lens[t] = length
	for len(m.content[t]) < length {
		m.content[t] = append(m.content[t], 0)
	}
	m.content[t] = m.content[t][:length]
}

// ---- system under test ------------------------------------------------------

type shSUT struct {
	pool   *Pool
	tables []*Table
	kv     [][]int // per block, per row: the fake cache
	next   int
}

type shResult struct {
	err    error
	copies []BlockCopy
	before string // state summary before the command
	after  string
	bad    string // invariant violations after the command
	reads  [][]int
	blocks [][]int32
	lens   []int
	free   int
}

func (u *shSUT) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "free=%d", u.pool.NumFree())
	for i, tb := range u.tables {
		fmt.Fprintf(&b, " t%d=%v/%d", i, tb.Blocks(), tb.Len())
	}
	return b.String()
}

// observe fills the result's view of the state after a command and checks
// the pool's invariants against the tables alone: a block is free exactly
// when no table holds it, and each block's reference count is the number of
// times tables hold it.
func (u *shSUT) observe(r *shResult) {
	var bad []string
	if err := u.pool.check(); err != nil {
		bad = append(bad, err.Error())
	}
	held := make([]int, u.pool.NumBlocks())
	for i, tb := range u.tables {
		bl := tb.Blocks()
		r.blocks = append(r.blocks, bl)
		r.lens = append(r.lens, tb.Len())
		if len(bl) != BlocksFor(tb.Len(), u.pool.BlockSize()) {
			bad = append(bad, fmt.Sprintf("t%d holds %d blocks for length %d", i, len(bl), tb.Len()))
		}
		for _, id := range bl {
			held[id]++
		}
		rd := make([]int, tb.Len())
		for pos := range rd {
			b, row := Slot(bl, pos, u.pool.BlockSize())
			rd[pos] = u.kv[b][row]
		}
		r.reads = append(r.reads, rd)
	}
	free := 0
	for id, h := range held {
		rc := u.pool.RefCount(int32(id))
		isFree := u.pool.state[id] == stateFree
		if isFree {
			free++
		}
		switch {
		case rc != h:
			bad = append(bad, fmt.Sprintf("block %d: reference count %d, held %d times", id, rc, h))
		case isFree && h > 0:
			bad = append(bad, fmt.Sprintf("block %d is free and held by a table", id))
		case !isFree && h == 0:
			bad = append(bad, fmt.Sprintf("block %d is neither free nor held (leaked)", id))
		}
	}
	if free != u.pool.NumFree() {
		bad = append(bad, fmt.Sprintf("%d blocks in state free, NumFree %d", free, u.pool.NumFree()))
	}
	r.free = u.pool.NumFree()
	r.bad = strings.Join(bad, "; ")
	r.after = u.summary()
}

func shCheck(cmd fmt.Stringer, st commands.State, res commands.Result) *gopter.PropResult {
	m, r := st.(*shModel), res.(*shResult)
	if r.bad != "" {
		return falsify("%v: invariants: %s (%s)", cmd, r.bad, r.after)
	}
	if got := classify(r.err); got != m.expect {
		return falsify("%v: outcome %q (%v), model expects %q", cmd, got, r.err, m.expect)
	}
	if r.err != nil && r.before != r.after {
		return falsify("%v: failed with %v but changed state: before %s after %s", cmd, r.err, r.before, r.after)
	}
	if !slices.Equal(r.copies, m.copies) {
		return falsify("%v: copies %v, model %v", cmd, r.copies, m.copies)
	}
	if r.free != m.numFree() || !slices.Equal(r.lens, m.lens) {
		return falsify("%v: state %s, model free=%d lens=%v", cmd, r.after, m.numFree(), m.lens)
	}
	for i := range m.tables {
		if !slices.Equal(r.blocks[i], m.tables[i]) {
			return falsify("%v: t%d blocks %v, model %v (%s)", cmd, i, r.blocks[i], m.tables[i], r.after)
		}
		for pos, want := range m.content[i] {
			if want != 0 && r.reads[i][pos] != want {
				return falsify("%v: t%d reads %d at position %d, wrote %d (%s)", cmd, i, r.reads[i][pos], pos, want, r.after)
			}
		}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// shCmd is one command: run on the SUT, predict on the model.
type shCmd struct {
	name string
	pre  func(m *shModel) bool
	run  func(u *shSUT, r *shResult)
	next func(m *shModel)
}

func (c shCmd) String() string { return c.name }
func (c shCmd) PreCondition(st commands.State) bool {
	return c.pre == nil || c.pre(st.(*shModel))
}
func (c shCmd) Run(s commands.SystemUnderTest) commands.Result {
	u := s.(*shSUT)
	r := &shResult{before: u.summary()}
	c.run(u, r)
	u.observe(r)
	return r
}
func (c shCmd) NextState(st commands.State) commands.State {
	m := st.(*shModel).clone()
	m.expect = expOK
	c.next(m)
	return m
}
func (c shCmd) PostCondition(st commands.State, res commands.Result) *gopter.PropResult {
	return shCheck(c, st, res)
}

func tableOK(t int) func(m *shModel) bool {
	return func(m *shModel) bool { return t >= 0 && t < len(m.tables) }
}

func shGrow(t, delta int) shCmd {
	return shCmd{
		name: fmt.Sprintf("Grow(t%d, %+d)", t, delta), pre: tableOK(t),
		run: func(u *shSUT, r *shResult) { r.err = u.tables[t].Grow(u.tables[t].Len() + delta) },
		next: func(m *shModel) {
			length := m.lens[t] + delta
			switch {
			case length < 0:
				m.expect = expInvalid
			case length > m.lens[t]:
				need := BlocksFor(length, m.bs) - len(m.tables[t])
				if need > m.numFree() {
					m.expect = expExhausted
					return
				}
				for range need {
					m.tables[t] = append(m.tables[t], m.take())
				}
				m.setLen(t, length)
			}
		},
	}
}

func shRelease(t int) shCmd {
	return shCmd{
		name: fmt.Sprintf("Release(t%d)", t), pre: tableOK(t),
		run:  func(u *shSUT, r *shResult) { u.tables[t].Release() },
		next: func(m *shModel) { m.release(t) },
	}
}

// shFork replaces table dst by a fork of table src.
func shFork(src, dst int) shCmd {
	return shCmd{
		name: fmt.Sprintf("t%d = Fork(t%d)", dst, src),
		pre:  twoTables(src, dst),
		run: func(u *shSUT, r *shResult) {
			u.tables[dst].Release()
			u.tables[dst] = u.tables[src].Fork()
		},
		next: func(m *shModel) {
			m.release(dst)
			m.tables[dst] = slices.Clone(m.tables[src])
			m.content[dst] = slices.Clone(m.content[src])
			m.lens[dst] = m.lens[src]
		},
	}
}

func twoTables(a, b int) func(m *shModel) bool {
	return func(m *shModel) bool { return tableOK(a)(m) && tableOK(b)(m) }
}

// shShare makes table dst share the first length positions of table src
// (no release first: a share into a table that is not empty must fail).
func shShare(src, dst, length int) shCmd {
	return shCmd{
		name: fmt.Sprintf("t%d.SharePrefix(t%d, %d)", dst, src, length),
		pre:  twoTables(src, dst),
		run:  func(u *shSUT, r *shResult) { r.err = u.tables[dst].SharePrefix(u.tables[src], length) },
		next: func(m *shModel) {
			if len(m.tables[dst]) != 0 || m.lens[dst] != 0 || length < 0 || length > m.lens[src] {
				m.expect = expInvalid
				return
			}
			m.tables[dst] = slices.Clone(m.tables[src][:BlocksFor(length, m.bs)])
			m.content[dst] = slices.Clone(m.content[src][:length])
			m.lens[dst] = length
		},
	}
}

// shWrite prepares table t for writes at positions len-back .. len-back+n-1,
// carries out the copies and writes a fresh value at each position.
func shWrite(t, back, n int) shCmd {
	return shCmd{
		name: fmt.Sprintf("Write(t%d, len-%d, %d)", t, back, n), pre: tableOK(t),
		run: func(u *shSUT, r *shResult) {
			tb := u.tables[t]
			from := tb.Len() - back
			r.copies, r.err = tb.PrepareWrite(from, from+n)
			if r.err != nil {
				return
			}
			for _, c := range r.copies {
				copy(u.kv[c.Dst], u.kv[c.Src])
			}
			bl := tb.Blocks()
			for pos := from; pos < from+n; pos++ {
				b, row := Slot(bl, pos, u.pool.BlockSize())
				u.next++
				u.kv[b][row] = u.next
			}
		},
		next: func(m *shModel) {
			from := m.lens[t] - back
			to := from + n
			if from < 0 || n < 0 {
				m.expect = expInvalid
				return
			}
			if n == 0 {
				return
			}
			refs := m.refs()
			var shared []int
			for i := from / m.bs; i < min(BlocksFor(to, m.bs), len(m.tables[t])); i++ {
				if refs[m.tables[t][i]] > 1 {
					shared = append(shared, i)
				}
			}
			grow := max(BlocksFor(to, m.bs)-len(m.tables[t]), 0)
			if len(shared)+grow > m.numFree() {
				m.expect = expExhausted
				return
			}
			for _, i := range shared {
				dst := m.take()
				m.copies = append(m.copies, BlockCopy{Src: m.tables[t][i], Dst: dst})
				m.tables[t][i] = dst
			}
			for range grow {
				m.tables[t] = append(m.tables[t], m.take())
			}
			m.setLen(t, max(m.lens[t], to))
			for pos := from; pos < to; pos++ {
				m.next++
				m.content[t][pos] = m.next
			}
		},
	}
}

// shTruncate rolls table t back by back positions (a negative back asks
// for a length above Len: refused).
func shTruncate(t, back int) shCmd {
	return shCmd{
		name: fmt.Sprintf("Truncate(t%d, len-%d)", t, back), pre: tableOK(t),
		run: func(u *shSUT, r *shResult) { r.err = u.tables[t].Truncate(u.tables[t].Len() - back) },
		next: func(m *shModel) {
			length := m.lens[t] - back
			if length < 0 || back < 0 {
				m.expect = expInvalid
				return
			}
			m.tables[t] = m.tables[t][:BlocksFor(length, m.bs)]
			m.setLen(t, length)
		},
	}
}

func sharedCommands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(st commands.State) commands.SystemUnderTest {
			m := st.(*shModel)
			p, err := NewPool(m.n, m.bs)
			if err != nil {
				panic(err)
			}
			u := &shSUT{pool: p, kv: make([][]int, m.n)}
			for i := range u.kv {
				u.kv[i] = make([]int, m.bs)
			}
			for range m.tables {
				u.tables = append(u.tables, p.NewTable())
			}
			return u
		},
		InitialStateGen: gopter.CombineGens(gen.IntRange(1, 12), gen.IntRange(1, 4), gen.IntRange(2, 4)).
			Map(func(v []any) *shModel {
				n, bs, nt := v[0].(int), v[1].(int), v[2].(int)
				return &shModel{n: n, bs: bs, tables: make([][]int32, nt), lens: make([]int, nt), content: make([][]int, nt)}
			}),
		GenCommandFunc: func(st commands.State) gopter.Gen {
			m := st.(*shModel)
			nt, bs := len(m.tables), m.bs
			tab := gen.IntRange(0, nt-1)
			cmd := func(g gopter.Gen) gopter.Gen { return g.Map(func(c shCmd) commands.Command { return c }) }
			grow := cmd(gopter.CombineGens(tab, gen.IntRange(-1, 2*bs+1)).
				Map(func(v []any) shCmd { return shGrow(v[0].(int), v[1].(int)) }))
			write := cmd(gopter.CombineGens(tab, gen.IntRange(-1, 2*bs), gen.IntRange(0, 2*bs+1)).
				Map(func(v []any) shCmd { return shWrite(v[0].(int), max(v[1].(int), 0), v[2].(int)) }))
			return gen.OneGenOf(
				grow, write, write, write,
				cmd(tab.Map(shRelease)),
				cmd(gopter.CombineGens(tab, tab).Map(func(v []any) shCmd { return shFork(v[0].(int), v[1].(int)) })),
				// prefix hits: a whole number of blocks (k*bs) or a block
				// boundary plus or minus one, and refused lengths
				cmd(gopter.CombineGens(tab, tab, gen.IntRange(0, 3), gen.IntRange(-1, 1)).
					Map(func(v []any) shCmd {
						return shShare(v[0].(int), v[1].(int), v[2].(int)*bs+v[3].(int))
					})),
				cmd(gopter.CombineGens(tab, gen.IntRange(-1, 2*bs+1)).
					Map(func(v []any) shCmd { return shTruncate(v[0].(int), v[1].(int)) })),
			)
		},
	}
}

func TestSharedHistories(t *testing.T) {
	props := gopter.NewProperties(propParams(t))
	props.Property("shared tables match the model; no table reads a write it did not make",
		commands.Prop(sharedCommands()))
	props.TestingRun(t)
}
