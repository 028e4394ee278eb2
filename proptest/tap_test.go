package proptest

import (
	"testing"

	"github.com/offcard/offcard/tt"
)

// The tap takes the current page table from every paged op, passed as a
// value or as a pointer (qwen3.Engine passes pointers to the ops it
// reuses), and from no other op.
func TestPageTableOf(t *testing.T) {
	pt := tt.Tensor{ID: 7}
	ops := []tt.Op{
		tt.PagedUpdateCache{PageTable: &pt},
		tt.PagedFusedUpdateCache{PageTable: &pt},
		tt.PagedSDPADecode{PageTable: pt},
		tt.PagedFillCache{PageTable: pt},
	}
	for _, op := range ops {
		for _, form := range []tt.Op{op, tt.Ptr(op)} {
			if id, ok := pageTableOf(form); !ok || id != pt.ID {
				t.Errorf("%T: page table %v %v, want %v", form, id, ok, pt.ID)
			}
		}
	}
	for _, op := range []tt.Op{tt.PagedUpdateCache{}, &tt.PagedUpdateCache{}, tt.Linear{}, &tt.Linear{}} {
		if id, ok := pageTableOf(op); ok {
			t.Errorf("%T: page table %v from an op without one", op, id)
		}
	}
}
