package kvpage

import (
	"fmt"
	"strconv"
	"strings"
)

// WidthPolicy decides the page-table width of a batch. The zero value is
// Dynamic. It implements flag.Value (through *WidthPolicy) and
// encoding.TextMarshaler/TextUnmarshaler with the same syntax as
// ParseWidthPolicy.
type WidthPolicy struct {
	fixed int // 0: dynamic; > 0: fixed width
}

// Fixed is the policy of a preallocated page table of n columns. It panics
// if n < 1 (use ParseWidthPolicy for untrusted input).
func Fixed(n int) WidthPolicy {
	if n < 1 {
		panic(fmt.Sprintf("kvpage: Fixed(%d): width must be positive", n))
	}
	return WidthPolicy{fixed: n}
}

// Dynamic is the policy of a page table as wide as the batch's longest
// sequence (at least one column).
func Dynamic() WidthPolicy { return WidthPolicy{} }

// IsDynamic reports whether p is the dynamic policy.
func (p WidthPolicy) IsDynamic() bool { return p.fixed == 0 }

// FixedWidth returns the fixed width and true, or 0 and false for Dynamic.
func (p WidthPolicy) FixedWidth() (int, bool) { return p.fixed, p.fixed > 0 }

// String prints "dynamic" or "fixed:N"; ParseWidthPolicy reads it back.
func (p WidthPolicy) String() string {
	if p.fixed == 0 {
		return "dynamic"
	}
	return "fixed:" + strconv.Itoa(p.fixed)
}

// ParseWidthPolicy reads "dynamic" or "fixed:N", N a positive decimal
// integer without sign or leading zeros.
func ParseWidthPolicy(s string) (WidthPolicy, error) {
	if s == "dynamic" {
		return Dynamic(), nil
	}
	num, ok := strings.CutPrefix(s, "fixed:")
	if !ok {
		return WidthPolicy{}, fmt.Errorf(`kvpage: width policy %q: want "dynamic" or "fixed:N" (e.g. "fixed:256")`, s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || strconv.Itoa(n) != num {
		return WidthPolicy{}, fmt.Errorf(`kvpage: width policy %q: N in "fixed:N" must be a positive decimal integer`, s)
	}
	return Fixed(n), nil
}

// Set parses s into p (flag.Value).
func (p *WidthPolicy) Set(s string) error {
	q, err := ParseWidthPolicy(s)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (p WidthPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *WidthPolicy) UnmarshalText(b []byte) error { return p.Set(string(b)) }

// Width is the page-table width for a batch whose longest sequence needs
// longestBlocks blocks. Fixed(n): n, or an error when longestBlocks > n.
// Dynamic: max(longestBlocks, 1). A negative longestBlocks is an error.
func Width(p WidthPolicy, longestBlocks int) (int, error) {
	if longestBlocks < 0 {
		return 0, fmt.Errorf("kvpage: negative block count %d", longestBlocks)
	}
	if p.fixed > 0 {
		if longestBlocks > p.fixed {
			return 0, fmt.Errorf("kvpage: a sequence needs %d blocks but the page table is fixed at %d columns (%s)",
				longestBlocks, p.fixed, p)
		}
		return p.fixed, nil
	}
	return max(longestBlocks, 1), nil
}
