package mutants

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartOrder(t *testing.T) {
	ms := []Mutant{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}}
	cases := []struct {
		name  string
		times map[string]time.Duration
		want  []int
	}{
		{"no record: the given order", nil, []int{0, 1, 2, 3, 4}},
		{"slowest first", map[string]time.Duration{"a": 1, "b": 5, "c": 3, "d": 4, "e": 2}, []int{1, 3, 2, 4, 0}},
		{"unrecorded before all, in order", map[string]time.Duration{"a": 9, "c": 3}, []int{1, 3, 4, 0, 2}},
		{"ties keep the order", map[string]time.Duration{"a": 2, "b": 2, "c": 7, "d": 2, "e": 2}, []int{2, 0, 1, 3, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, startOrder(ms, c.times))
		})
	}
}

func TestTimesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache", "times.json")
	require.Empty(t, readTimes(path), "a missing file is an empty record")
	writeTimes(path, []Result{
		{Name: "slow", Status: Killed, CheckTime: 5 * time.Second},
		{Name: "fast", Status: Survived, CheckTime: time.Second},
		{Name: "broken", Status: Error, CheckTime: time.Hour},
	})
	require.Equal(t, map[string]time.Duration{"slow": 5 * time.Second, "fast": time.Second}, readTimes(path))
	// A later run merges: it updates what it ran and keeps the rest.
	writeTimes(path, []Result{{Name: "fast", Status: Killed, CheckTime: 7 * time.Second}})
	require.Equal(t, map[string]time.Duration{"slow": 5 * time.Second, "fast": 7 * time.Second}, readTimes(path))
	ents, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file left behind")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	require.Empty(t, readTimes(path), "a corrupt file is an empty record")
}
