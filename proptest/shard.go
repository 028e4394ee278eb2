package proptest

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard selects a deterministic slice of a campaign's cases, so that N
// machines (a CI matrix, a Kubernetes Indexed Job) split one campaign:
// shard K of N (1 <= K <= N) runs the cases i with i mod N = K-1, each with
// its campaign seed CaseSeed(S, i) and its campaign index i. The N shards
// together run every case exactly once, each exactly as the whole campaign
// runs it. The zero Shard is the whole campaign.
type Shard struct {
	K, N int
}

// ParseShard reads "K/N" with 1 <= K <= N.
func ParseShard(s string) (Shard, error) {
	k, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want K/N, e.g. 1/4", s)
	}
	kv, err1 := strconv.Atoi(k)
	nv, err2 := strconv.Atoi(n)
	if err1 != nil || err2 != nil || nv < 1 || kv < 1 || kv > nv {
		return Shard{}, fmt.Errorf("shard %q: want K/N with 1 <= K <= N", s)
	}
	return Shard{K: kv, N: nv}, nil
}

// Whole reports whether s is the whole campaign.
func (s Shard) Whole() bool { return s.N <= 1 }

// Has reports whether case i belongs to the shard.
func (s Shard) Has(i int) bool { return s.Whole() || i%s.N == s.K-1 }

// Cases lists the shard's case indices of a campaign of total cases, in
// order.
func (s Shard) Cases(total int) []int {
	var out []int
	for i := 0; i < total; i++ {
		if s.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// String is "K/N" ("1/1" for the whole campaign).
func (s Shard) String() string {
	if s.Whole() {
		return "1/1"
	}
	return fmt.Sprintf("%d/%d", s.K, s.N)
}
