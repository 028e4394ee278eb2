package sim

import (
	"fmt"
	"strconv"

	"github.com/offcard/offcard/tt"
)

// FindingClass names a hazard the strict mode reports.
type FindingClass string

// Hazard classes.
const (
	// PTReadPastRow: a kernel indexed the page-table row past its width (the
	// value came from whatever followed the row: stale L1 or DRAM padding).
	PTReadPastRow FindingClass = "page-table-read-past-row"
	// PTReadPastCB: the page-table index also lies past the page-table
	// circular buffer (a plain L1 load of bytes other programs left).
	PTReadPastCB FindingClass = "page-table-read-past-cb"
	// PTEntryOutsideCache: a page-table entry used as a block id is not a
	// block of the cache tensor.
	PTEntryOutsideCache FindingClass = "page-table-entry-outside-cache"
	// MinusOneNotSkipped: a -1 entry used where the op does not skip it.
	MinusOneNotSkipped FindingClass = "minus-one-not-skipped"
	// ReadUnwritten: a read of memory never written since power-on (poison).
	ReadUnwritten FindingClass = "read-of-unwritten-memory"
	// KVTileRace: two users of one paged_update_cache launch
	// read-modify-write the same cache tile; their cores are unordered.
	KVTileRace FindingClass = "kv-tile-race"
)

// Finding is one hazard seen in strict mode: the op, the core and user it
// happened on (-1 when not applicable), the index involved, the tensor, the
// address, and the host-side belief it contradicts.
type Finding struct {
	Class  FindingClass
	Op     string
	Core   int
	User   int
	Index  int64
	Tensor tt.TensorID
	Addr   uint64
	Detail string
}

// String is one readable line.
func (f Finding) String() string {
	s := string(f.Class) + ": " + f.Op
	if f.Core >= 0 {
		s += " core " + strconv.Itoa(f.Core)
	}
	if f.User >= 0 {
		s += " user " + strconv.Itoa(f.User)
	}
	s += fmt.Sprintf(" index %d tensor t%d addr %#x: %s", f.Index, f.Tensor, f.Addr, f.Detail)
	return s
}

func (d *Device) find(f Finding) {
	if d.opt.Strict {
		d.findings = append(d.findings, f)
	}
}

// Findings returns the hazards recorded so far (strict mode only), in order.
func (d *Device) Findings() []Finding { return append([]Finding(nil), d.findings...) }

// ClearFindings forgets the recorded findings.
func (d *Device) ClearFindings() { d.findings = nil }

func hex(a uint64) string { return fmt.Sprintf("%#x", a) }
func itoa(i int) string   { return strconv.Itoa(i) }

func spaceName(l PageLoc) string {
	if l.Type == tt.DRAM {
		return "DRAM bank " + itoa(l.Bank)
	}
	return "L1 core " + itoa(l.Bank)
}
