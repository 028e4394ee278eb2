package proptest

import (
	"fmt"
)

// Property device-memory (8): what the engine holds on the device after
// every call and after Close.

// checkMem checks the device memory after a call (see checkMemory) and
// the calls the tap flagged.
func (r *runner) checkMem(ps *[]problem, ev TapEvents) {
	if len(ev.Misuse) > 0 {
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: ev.Misuse[0]})
		return
	}
	r.tap.memoryInto(&r.tm)
	if d := checkMemory(r.tm, r.persistent); d != "" {
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: d})
	}
}

// checkMemory checks the device memory the engine holds after a call: its
// persistent tensors (as many as after construction), the current page
// table (the one its paged ops last used), and tables a live trace still
// records; nothing else.
func checkMemory(tm TapMemory, persistent int) string {
	if tm.Persistent != persistent {
		return fmt.Sprintf("%d of the %d tensors allocated at construction are live", tm.Persistent, persistent)
	}
	var stray []string
	for _, x := range tm.Later {
		if x.ID == tm.PageTable || tm.InTrace[x.ID] {
			continue
		}
		stray = append(stray, x.String())
	}
	if len(stray) > 0 {
		return fmt.Sprintf("%d tensors allocated after construction are live though neither the current page table (t%d, the one the last paged op used) nor recorded by a live trace: %v",
			len(stray), tm.PageTable, stray[:min(len(stray), 3)])
	}
	return ""
}

// checkClosed checks that nothing is left on the device after Close.
func checkClosed(tm TapMemory) string {
	n := tm.Persistent + len(tm.Later)
	if n == 0 && tm.Traces == 0 {
		return ""
	}
	ids := make([]string, 0, 3)
	for _, x := range tm.Later[:min(3, len(tm.Later))] {
		ids = append(ids, x.String())
	}
	return fmt.Sprintf("after Close the device still holds %d tensors (%d persistent, later ones %v) and %d traces", n, tm.Persistent, ids, tm.Traces)
}
