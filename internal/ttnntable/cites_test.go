package ttnntable

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestFindCites(t *testing.T) {
	src := strings.Join([]string{
		"// refused (sdpa_decode_device_operation.cpp:403-405, 515-520) and",
		"// the reshard (ttnn/cpp/ttnn/operations/core/",
		"// to_memory_config/to_memory_config_op.cpp:257-261); loads (op.hpp:",
		"// 337-347). Not a cite: sim/update_cache.go:12, loop.c 12.",
		" * wrapped in C (a/b/",
		" * c.cpp:9)",
	}, "\n")
	var got []string
	for _, c := range FindCites("x.go", src) {
		got = append(got, c.Where+" "+c.String())
	}
	want := []string{
		"x.go:1 sdpa_decode_device_operation.cpp:403-405, 515-520",
		"x.go:3 ttnn/cpp/ttnn/operations/core/to_memory_config/to_memory_config_op.cpp:257-261",
		"x.go:4 op.hpp:337-347",
		"x.go:6 a/b/c.cpp:9",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckCites(t *testing.T) {
	lines := map[string]int{"ttnn/op/slice.cpp": 400, "ttnn/quasar/slice.cpp": 400, "ttnn/sdpa.cpp": 100}
	tree := Tree{Lines: func(p string) (int, error) {
		if n, ok := lines[p]; ok {
			return n, nil
		}
		return 0, fmt.Errorf("no %s", p)
	}}
	for p := range lines {
		tree.Files = append(tree.Files, p)
	}
	cite := func(where, p string, lo, hi int) Cite {
		return Cite{Path: p, Ranges: [][2]int{{lo, hi}}, Where: where}
	}
	for _, tc := range []struct {
		name  string
		cites []Cite
		bad   string // the start of the one bad line, "" for none
	}{
		{"in range", []Cite{cite("a.go:1", "sdpa.cpp", 1, 100)}, ""},
		{"past the end", []Cite{cite("a.go:1", "sdpa.cpp", 99, 101)}, "a.go:1: sdpa.cpp:99-101: lines 99-101 outside ttnn/sdpa.cpp's 100 lines"},
		{"no such file", []Cite{cite("a.go:1", "other/sdpa.cpp", 1, 1)}, "a.go:1: other/sdpa.cpp:1: no such file"},
		{"a tail is not a name", []Cite{cite("a.go:1", "dpa.cpp", 1, 1)}, "a.go:1: dpa.cpp:1: no such file"},
		{"ambiguous", []Cite{cite("a.go:1", "slice.cpp", 1, 1)}, "a.go:1: slice.cpp:1: ambiguous, 2 files"},
		{"resolved by the file's full cite", []Cite{cite("a.go:1", "op/slice.cpp", 1, 1), cite("a.go:9", "slice.cpp", 399, 399)}, ""},
		{"not by another file's", []Cite{cite("a.go:1", "op/slice.cpp", 1, 1), cite("b.go:9", "slice.cpp", 1, 1)}, "b.go:9: slice.cpp:1: ambiguous"},
		{"offcard's own file", []Cite{cite("a.go:1", "ops.c", 1, 1)}, ""},
	} {
		bad, err := CheckCites(tc.cites, tree, func(p string) bool { return p == "ops.c" })
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.bad == "" && len(bad) != 0:
			t.Errorf("%s: %q, want none", tc.name, bad)
		case tc.bad != "" && (len(bad) != 1 || !strings.HasPrefix(bad[0], tc.bad)):
			t.Errorf("%s: %q, want one starting %q", tc.name, bad, tc.bad)
		}
	}
}
