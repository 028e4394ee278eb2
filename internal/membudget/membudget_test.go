package membudget

import (
	"math"
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	for in, want := range map[string]int64{
		"MemTotal:  100 kB\nMemAvailable:   24179916 kB\n": 24179916 << 10,
		"MemTotal:  100 kB\n":                              0,
		"MemAvailable: lots kB\n":                          0,
		"MemAvailable: 12\n":                               0,
	} {
		if got := parseMemAvailable([]byte(in)); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	defer func(f func() int64) { Available = f }(Available)
	Available = func() int64 { return 2 << 30 }
	if err := Check(2 << 30); err != nil {
		t.Errorf("at the budget: %v", err)
	}
	err := Check(7 << 29)
	if err == nil || err.Error() != "needs about 3.5 GiB of memory, more than the 2.0 GiB available" {
		t.Errorf("over: %v", err)
	}
	Available = func() int64 { return 0 }
	if Budget() != DefaultBudget {
		t.Errorf("unknown: budget %d", Budget())
	}
	if err := Check(math.MaxInt64); err == nil || !strings.Contains(err.Error(), "16.0 GiB available") {
		t.Errorf("saturated: %v", err)
	}
}

func TestMulAdd(t *testing.T) {
	if Mul(1<<24, 1<<24, 1<<24) != math.MaxInt64 || Mul(3, 4, 5) != 60 || Mul(3, 0) != 0 || Mul(-1, 5) != 0 {
		t.Error("Mul")
	}
	if Add(math.MaxInt64, 1) != math.MaxInt64 || Add(1, 2, 3) != 6 {
		t.Error("Add")
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 64 << 20: "64.0 MiB", 3 << 30: "3.0 GiB", 5 << 40: "5.0 TiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
