package proptest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/stretchr/testify/require"
)

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"1/1", Shard{1, 1}, true},
		{"2/3", Shard{2, 3}, true},
		{"3/3", Shard{3, 3}, true},
		{"0/3", Shard{}, false},
		{"4/3", Shard{}, false},
		{"1/0", Shard{}, false},
		{"-1/2", Shard{}, false},
		{"1", Shard{}, false},
		{"a/b", Shard{}, false},
		{"1/2/3", Shard{}, false},
		{"", Shard{}, false},
	} {
		got, err := ParseShard(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// Every case lands in exactly one shard, whatever N.
func TestShardsPartition(t *testing.T) {
	for n := 1; n <= 5; n++ {
		seen := make([]int, 23)
		for k := 1; k <= n; k++ {
			for _, i := range (Shard{k, n}).Cases(len(seen)) {
				seen[i]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("N=%d: case %d in %d shards", n, i, c)
			}
		}
	}
	if got := (Shard{}).Cases(3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("the zero shard runs %v", got)
	}
}

// The union of the N shards of a campaign is the campaign, case for case.
func TestShardsUnionIsTheCampaign(t *testing.T) {
	const cases, n = 7, 3
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	whole := Campaign(Options{Seed: 13, Cases: cases, Factory: SimFactory})
	var union []CaseResult
	for k := 1; k <= n; k++ {
		part := Campaign(Options{Seed: 13, Cases: cases, Shard: Shard{k, n}, Factory: SimFactory})
		for _, r := range part {
			if r.Index%n != k-1 {
				t.Fatalf("shard %d/%d ran case %d", k, n, r.Index)
			}
		}
		union = append(union, part...)
	}
	slices.SortFunc(union, func(a, b CaseResult) int { return a.Index - b.Index })
	if a, b := enc(whole), enc(union); a != b {
		t.Fatalf("shards:\n%s\nwhole campaign:\n%s", b, a)
	}
}

// FailFast stops at the first failing case in case order: the results
// are the whole campaign's up to and including it, byte for byte, at any
// number of workers.
func TestCampaignFailFast(t *testing.T) {
	enc := func(rs []CaseResult) string {
		b, err := json.Marshal(rs)
		require.NoError(t, err)
		return string(b)
	}
	const cases, seed = 8, 6
	o := Options{Seed: seed, Cases: cases, Factory: corruptFactory, Workers: 1, ShrinkRuns: 4}
	whole := Campaign(o)
	first := slices.IndexFunc(whole, func(r CaseResult) bool { return !r.Passed })
	require.GreaterOrEqual(t, first, 1, "the test needs a passing case before the first failure")
	require.Less(t, first, cases-1, "the test needs cases after the first failure")
	o.FailFast = true
	for _, w := range []int{1, 2, 3} {
		o.Workers = w
		got := Campaign(o)
		require.Equal(t, enc(whole[:first+1]), enc(got), "workers %d", w)
	}
}

// frozenSUT shows layer 0's caches as they were at the first peek and says
// nothing changed since: a device that dropped every later write there, so
// no page was touched (and the simulator's KV log, the outputs and the
// other layers stay right). Only the cache diff can see it, through the
// rows ref wrote.
type frozenSUT struct {
	*SimSUT
	k, v []bf16.BF16
}

func (s *frozenSUT) PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error) {
	k, v, changed, err = s.SimSUT.PeekKV(layer)
	if err != nil || layer != 0 {
		return k, v, changed, err
	}
	if s.k == nil {
		s.k, s.v = slices.Clone(k), slices.Clone(v)
		return k, v, changed, nil
	}
	return s.k, s.v, nil, nil
}

// The cache diff compares the rows ref wrote even where the device's
// memory saw no write: a write dropped after the first call is a kv-write
// failure at its position.
func TestKVWriteSeesDroppedWrite(t *testing.T) {
	s, err := ParseScript(strings.NewReader("model tiny seed=1\ndevice sim arch=wormhole strict\nengine block=32 blocks=8 width=dynamic capacity=1 mode=eager\nadmit seq=0 prompt=3\ndecode steps=2\n"))
	require.NoError(t, err)
	f, _, err := RunScript(s, func(sc Scenario) (SUT, error) {
		sut, err := SimFactory(sc)
		if err != nil {
			return nil, err
		}
		return &frozenSUT{SimSUT: sut.(*SimSUT)}, nil
	})
	require.NoError(t, err)
	require.NotNil(t, f, "a dropped write passed")
	require.Equal(t, PropKVWrite, f.Property, "%s", f)
	require.Equal(t, 3, f.Pos, "%s", f)
}
