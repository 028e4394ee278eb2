package sim

import (
	"fmt"
	"strconv"

	"github.com/offcard/offcard/tt"
)

// Arch selects the simulated chip.
type Arch uint8

// Architectures.
const (
	Wormhole Arch = iota + 1
	Blackhole
)

func (a Arch) String() string {
	switch a {
	case Wormhole:
		return "wormhole"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Arch(%d)", uint8(a))
}

// L1Init is what fresh L1 holds: bytes no program of this run has written.
type L1Init uint8

// L1 contents modes.
const (
	// L1Poison (the default, strict's): the Poison pattern, so a read of
	// never-written L1 yields a NaN or a huge index, and faults loudly.
	L1Poison L1Init = iota
	// L1Zero: zeros, as after tt-metal's L1 clear at device open
	// (tt_metal/impl/device/device.cpp clear_l1_state; unconditional in
	// older versions, with TT_METAL_CLEAR_L1=1 at the pin,
	// tt_metal/llrt/rtoptions.cpp). A [C,1] page table then yields block 0
	// past its row: a silent write into block 0.
	L1Zero
	// L1Stale: what earlier programs left. Zeros under it (a cleared
	// device); rms_norm leaves its CBs as the pin's factory lays them out
	// (cbleft.go); other compute programs leave their input pages from
	// the CB base (cores 0..15, up to 32 KiB a core), as the card's
	// kernels stream inputs through L1; paged_update_cache and SDPA leave
	// their index and page-table sticks and SDPA its K/V rings.
	L1Stale
)

// String is the mode's flag name.
func (m L1Init) String() string {
	switch m {
	case L1Poison:
		return "poison"
	case L1Zero:
		return "zero"
	case L1Stale:
		return "stale"
	}
	return fmt.Sprintf("L1Init(%d)", uint8(m))
}

// ParseL1Init reads "poison", "zero" or "stale".
func ParseL1Init(s string) (L1Init, error) {
	for _, m := range []L1Init{L1Poison, L1Zero, L1Stale} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("L1 contents %q: want poison, zero or stale", s)
}

// Options configures a simulated device. Zero fields take the arch's defaults.
type Options struct {
	Arch Arch
	// DRAMBankSize is the bytes of one DRAM bank (default: Wormhole 1 GiB,
	// Blackhole 4278190080, §6.1). Memory is sparse, so full sizes are cheap.
	DRAMBankSize uint64
	// L1Size is each worker core's L1 bytes (default Wormhole 1,499,136,
	// Blackhole 1,572,864).
	L1Size uint64
	// TraceRegionSize is the trace region over all DRAM banks (§5.6): each
	// bank reserves ceil(TraceRegionSize/banks), rounded up to the DRAM
	// alignment, at its top (tt_metal/impl/allocator/allocator.cpp:37-49).
	TraceRegionSize uint64
	// NumCores is the number of worker cores (default Wormhole 64 (8x8),
	// Blackhole 130 (13x10)); they are also the L1 banks.
	NumCores int
	// DRAMUnreservedBase and L1UnreservedBase are where each allocator's range
	// starts (defaults: the DRAM alignment, and 96 KiB of L1; the notes do not
	// give these values). CBs are placed from L1UnreservedBase up (§6.5).
	DRAMUnreservedBase uint64
	L1UnreservedBase   uint64
	// Strict turns on the sanitizer: Findings at hazards, same results.
	Strict bool
	// L1 is what fresh L1 holds (default poison). Under zero and stale the
	// host write path also fills each DRAM page slot's alignment padding
	// with zeros: tt-metal copies page_size bytes into the issue queue and
	// advances by the padded size (tt_metal/impl/buffers/dispatch.cpp), so
	// the padding carries the queue's earlier bytes, which on the first pass
	// through the fresh (kernel-zeroed) hugepage are zeros.
	L1 L1Init
	// Seed chooses the interleaving of concurrent cores where their order
	// matters (the write-back order of paged_update_cache's users); same
	// seed, same bytes.
	Seed uint64
	// BestFit selects the older allocator's BEST policy for DRAM (§6.4);
	// default is FIRST for both buffer types.
	BestFit bool
	// LogKV records every KV-cache row write (see KVWrite), eager and
	// replayed.
	LogKV bool
	// LogOps records an OpEvent for every op run eagerly, recorded during
	// capture, or replayed (see OpLog).
	LogOps bool
	// OnOp, when set, is called with the same OpEvent after every op: after
	// it executed (Eager, Replay) or was recorded (Capture). It may call
	// Peek; it must not call other Device methods.
	OnOp func(OpEvent)
	// OnOpBrief passes OnOp events without Args and Touched (an observer
	// that reads only Seq, Op, Regime and Trace saves formatting the
	// arguments and listing the tensors of every op). LogOps still logs
	// whole events.
	OnOpBrief bool
}

// arch parameters (§6.1, §6.2).
type archParams struct {
	nbanks       int
	dramAlign    uint64
	l1Align      uint64
	banksPerChan int // DRAM banks sharing one channel (Wormhole 2, offsets 0 / bank size)
}

func paramsOf(a Arch) archParams {
	if a == Blackhole {
		return archParams{nbanks: 8, dramAlign: 64, l1Align: 16, banksPerChan: 1}
	}
	return archParams{nbanks: 12, dramAlign: 32, l1Align: 16, banksPerChan: 2}
}

// Device implements the whole contract: every op of package tt runs.
var _ tt.Device = (*Device)(nil)

// Device is the simulated tt-metal device. It is not safe for concurrent use.
type Device struct {
	opt  Options
	arch archParams

	specKeys map[specID]string // the names specKey gave
	specLast [64]specSlot      // the last spec seen per hash slot, before specKeys

	chans []*mem // DRAM channels; bank b is channel b/banksPerChan at offset (b%banksPerChan)*bank size
	l1    []*mem // per worker core

	dram, l1a *allocator

	bufs   bufTable
	nextID tt.TensorID

	clock uint64 // write stamps of the memories (PeekInto); starts at 1

	progs      map[string]program
	progIDs    map[string]int // each cached program's id (ProgramImpl::id), in build order from 0
	curProg    int            // the id of the program lookup returned last (checkCBRegion's text)
	binaries   []uint64       // kernel-binary buffers, one per program-cache miss
	ucLaunches uint64         // update-cache launches executed (the race order's stream)
	kb         []byte         // program-cache key scratch
	opBufs     []*buffer      // operand scratch of the compute ops
	spare      []*buffer      // freed tensors' buffers, for later allocations
	outSlab    []tt.Tensor    // room for Run's output slices (outSlice)
	// runIns and runSpecs back the lists Run makes of an allocating op's
	// inputs and output specs (an array local to Run would move to the heap
	// at every launch: the interface's append forms may keep their
	// argument, as far as the compiler knows). Run is not reentrant.
	runIns    [5]tt.Tensor
	runSpecs  [3]tt.Spec
	eager     opLaunch   // the compute launch being run eagerly
	eagerSDPA sdpaLaunch // the SDPA decode launch being run eagerly
	eagerUC   ucLaunch   // the update-cache launch being run eagerly
	hits      int
	misses    int
	findings  []Finding
	kvlog     []KVWrite
	oplog     []OpEvent
	opSeq     int

	capturing   bool
	recorded    []launch
	footprints  []footprint
	traceID     tt.TraceID
	nextTrace   tt.TraceID
	traces      map[tt.TraceID]*trace
	replaying   tt.TraceID // the trace being executed, 0 when eager
	unsafeAlloc bool
	failedBytes uint64 // trace bytes failed end_trace_capture calls left counted (trace.go)
	warned      bool
	warnings    []string
	unmodelled  []string             // UnmodelledCBs
	hiddenRefs  []operandRef         // the current op's hidden tensors, for its footprint (linear_transpose.go)
	capAlloc    map[tt.TensorID]bool // allocated during the current capture (trace.go)
	capFreed    map[tt.TensorID]bool // of those, freed during it: the trace's internal tensors

	// uncommitted: cached programs whose binaries were never written (a
	// miss during capture), key -> index in binaries.
	uncommitted map[string]int

	wc                    wcache   // linear weights decoded, while their bytes are unwritten
	rows                  *rowMemo // linear output rows remembered (linmemo.go); nil until the first launch
	linComputed, linFound int      // linear output rows computed, and found (LinearRows)
	peekPages             []int    // readPagesInto's list of changed pages
	// recSlab, snapPtrs, snapBufs: what record carves recorded launches
	// and their operand snapshots from.
	recSlab  []opLaunch
	snapPtrs []*buffer
	snapBufs []buffer
	refSlab  []operandRef // footprintOf's
}

// buffer is a live device tensor's allocation.
type buffer struct {
	id        tt.TensorID
	spec      tt.Spec
	addr      uint64
	bt        tt.BufferType
	pageSize  uint64
	aligned   uint64 // aligned page size
	numPages  int
	perBank   uint64 // bytes per bank (before allocator rounding)
	shardPage int    // pages per shard (sharded only)
	key       string // specKey(spec), the tensor's part of program-cache keys
	g         geom   // geomOf(spec): ops read it at every launch
}

// New builds a device.
func New(o Options) (*Device, error) {
	if o.Arch == 0 {
		o.Arch = Wormhole
	}
	if o.Arch != Wormhole && o.Arch != Blackhole {
		return nil, fmt.Errorf("sim: unknown arch %v", o.Arch)
	}
	p := paramsOf(o.Arch)
	if o.DRAMBankSize == 0 {
		if o.Arch == Wormhole {
			o.DRAMBankSize = 1 << 30
		} else {
			o.DRAMBankSize = 4278190080
		}
	}
	if o.L1Size == 0 {
		// worker_l1_size in tt_metal/soc_descriptors/wormhole_b0_80_arch.yaml
		// and blackhole_140_arch.yaml at tt.TTMetalCommit.
		o.L1Size = 1499136
		if o.Arch == Blackhole {
			o.L1Size = 1572864
		}
	}
	if o.NumCores == 0 {
		if o.Arch == Wormhole {
			o.NumCores = 64
		} else {
			o.NumCores = 130
		}
	}
	if o.DRAMUnreservedBase == 0 {
		o.DRAMUnreservedBase = p.dramAlign
	}
	if o.L1UnreservedBase == 0 {
		o.L1UnreservedBase = 96 << 10
	}
	if o.DRAMBankSize%p.dramAlign != 0 {
		return nil, fmt.Errorf("sim: bank size must be a multiple of %d", p.dramAlign)
	}
	if o.DRAMUnreservedBase+p.tracePerBank(o.TraceRegionSize) > o.DRAMBankSize || o.L1UnreservedBase >= o.L1Size {
		return nil, fmt.Errorf("sim: reserved regions leave no memory")
	}
	d := &Device{opt: o, arch: p, progs: map[string]program{}, progIDs: map[string]int{}, nextID: 1, clock: 1}
	d.wc = wcache{m: map[wcKey]*wcEntry{}, lo: ^uint64(0), bankSize: o.DRAMBankSize}
	for i := 0; i < p.nbanks/p.banksPerChan; i++ {
		d.chans = append(d.chans, newMem(o.DRAMBankSize*uint64(p.banksPerChan), o.Strict))
		d.chans[len(d.chans)-1].watch = &d.wc
		d.chans[len(d.chans)-1].clock = &d.clock
	}
	if o.L1 > L1Stale {
		return nil, fmt.Errorf("sim: unknown L1 contents mode %v", o.L1)
	}
	fresh := poisonChunk
	if o.L1 != L1Poison {
		fresh = zeroChunk
	}
	d.l1 = newMemsFresh(o.NumCores, o.L1Size, o.Strict, fresh)
	for _, m := range d.l1 {
		m.clock = &d.clock
	}
	d.dram = newAllocator(o.DRAMUnreservedBase, o.DRAMBankSize-p.tracePerBank(o.TraceRegionSize), p.dramAlign, true, o.BestFit)
	d.l1a = newAllocator(o.L1UnreservedBase, o.L1Size, p.dramAlign, false, false)
	return d, nil
}

// tracePerBank is what each DRAM bank reserves for a trace region of size
// bytes in all: round_up(div_up(size, banks), dram_alignment)
// (tt_metal/impl/allocator/allocator.cpp:43-49).
func (p archParams) tracePerBank(size uint64) uint64 {
	if size == 0 {
		return 0
	}
	n := uint64(p.nbanks)
	return alignUp((size+n-1)/n, p.dramAlign)
}

// TraceRegionPerBank is the bytes each DRAM bank reserves for the trace
// region.
func (d *Device) TraceRegionPerBank() uint64 { return d.arch.tracePerBank(d.opt.TraceRegionSize) }

// Recycle hands the device's memory to later devices. The device must not
// be used again: any later access to its memory panics. Nothing read from
// it before (ReadHost, Peek, PeekInto) aliases its memory.
func (d *Device) Recycle() {
	if d.rows != nil {
		giveMemo(d.rows)
		d.rows = nil
	}
	for _, m := range d.chans {
		m.release()
	}
	for _, m := range d.l1 {
		m.release()
	}
}

// Options returns the options in effect (defaults filled in).
func (d *Device) Options() Options { return d.opt }

// NumBanks is the number of DRAM banks.
func (d *Device) NumBanks() int { return d.arch.nbanks }

// DRAMAlignment is the DRAM alignment (32 Wormhole, 64 Blackhole).
func (d *Device) DRAMAlignment() uint64 { return d.arch.dramAlign }

// dramAt maps (bank, bank-relative address) to its channel memory and offset.
func (d *Device) dramAt(bank int, addr uint64) (*mem, uint64) {
	return d.chans[bank/d.arch.banksPerChan], uint64(bank%d.arch.banksPerChan)*d.opt.DRAMBankSize + addr
}

// PageLoc is where one page of a buffer lives.
type PageLoc struct {
	Type tt.BufferType
	Bank int // DRAM bank, or worker core for L1
	Addr uint64
}

func (b *buffer) nbanks(d *Device) int {
	if b.bt == tt.DRAM {
		return d.arch.nbanks
	}
	return d.opt.NumCores
}

// pageLoc is the interleaved/sharded placement of page p (§6.3):
// interleaved bank = p % nbanks, address = base + (p / nbanks) * aligned page;
// height-sharded: shard p / pagesPerShard on core of that index;
// width-sharded: the shard holding the tile's column.
func (d *Device) pageLoc(b *buffer, p int) PageLoc {
	if m := b.spec.Memory; m.Layout == tt.WidthSharded {
		// Tile (tr, tc) of the [Height/32, Width/32] grid lives in shard
		// tc / (shard width / 32), row-major inside the shard.
		wt := b.g.wp / tt.TileSize // Width(): the padded width
		swt := m.Shard.Shape[1] / tt.TileSize
		tr, tc := p/wt, p%wt
		return PageLoc{tt.L1, d.shardCore(m.Shard, tc/swt), b.addr + uint64(tr*swt+tc%swt)*b.aligned}
	}
	if b.spec.Memory.Sharded() {
		return PageLoc{tt.L1, d.shardCore(b.spec.Memory.Shard, p/b.shardPage), b.addr + uint64(p%b.shardPage)*b.aligned}
	}
	n := b.nbanks(d)
	return PageLoc{b.bt, p % n, b.addr + uint64(p/n)*b.aligned}
}

// memAt returns the memory and offset of a location.
func (d *Device) memAt(l PageLoc) (*mem, uint64) {
	if l.Type == tt.DRAM {
		return d.dramAt(l.Bank, l.Addr)
	}
	return d.l1[l.Bank], l.Addr
}

// geometry returns a buffer (not allocated yet: no address or id) with
// spec's geometry and program-cache name. A spec that allocated before
// takes its slot's copy (specSlot.geo).
func (d *Device) geometry(spec tt.Spec) (*buffer, error) {
	e := d.specSlotOf(spec)
	if e == nil || e.geo == nil {
		g, err := d.geometryOf(spec)
		if err != nil {
			return nil, err
		}
		if e == nil {
			g.key = d.specKey(spec) // rank over 6
		} else {
			g.key, e.geo = e.key, g
		}
		return d.spareCopy(g, spec), nil
	}
	return d.spareCopy(e.geo, spec), nil
}

// spareCopy returns a buffer from the spare list (or a new one) holding
// g, with spec's shape.
func (d *Device) spareCopy(g *buffer, spec tt.Spec) *buffer {
	var b *buffer
	if n := len(d.spare); n > 0 {
		b, d.spare = d.spare[n-1], d.spare[:n-1]
	} else {
		b = new(buffer)
	}
	*b = *g
	b.spec = spec
	return b
}

// alignOf is a buffer type's allocator alignment (Buffer::alignment):
// the DRAM alignment, or the L1 alignment.
func (d *Device) alignOf(bt tt.BufferType) uint64 {
	if bt == tt.L1 {
		return d.arch.l1Align
	}
	return d.arch.dramAlign
}

// geometryOf validates spec and works out its buffer's geometry.
func (d *Device) geometryOf(spec tt.Spec) (*buffer, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	b := &buffer{spec: spec, bt: spec.Memory.Buffer, pageSize: uint64(spec.PageSize()), numPages: spec.NumPages(), g: geomOf(spec)}
	b.aligned = alignUp(b.pageSize, d.alignOf(b.bt))
	if spec.Memory.Sharded() {
		sh := spec.Memory.Shard
		if sh.GridWidth > d.gridX() {
			return nil, fmt.Errorf("sim: shard grid width %d exceeds the worker grid's %d columns", sh.GridWidth, d.gridX())
		}
		if w := sh.GridWidth; w != 0 && sh.FirstCore+sh.NumCores > w*(d.opt.NumCores/d.gridX()) {
			return nil, fmt.Errorf("sim: shard grid of %d cores from core %d exceeds the %d cores of the leftmost %d columns", sh.NumCores, sh.FirstCore, w*(d.opt.NumCores/d.gridX()), w)
		}
		if sh.FirstCore+sh.NumCores > d.opt.NumCores {
			return nil, fmt.Errorf("sim: shard grid of %d cores from core %d exceeds the %d worker cores", sh.NumCores, sh.FirstCore, d.opt.NumCores)
		}
		if spec.Layout == tt.Tile {
			b.shardPage = (sh.Shape[0] / tt.TileSize) * (sh.Shape[1] / tt.TileSize)
		} else {
			b.shardPage = sh.Shape[0]
		}
		b.perBank = uint64(b.shardPage) * b.aligned
		return b, nil
	}
	n := b.nbanks(d)
	b.perBank = uint64((b.numPages+n-1)/n) * b.aligned
	return b, nil
}

// specID is a tt.Spec as a map key (shapes up to rank 6, larger ones are
// not interned).
type specID struct {
	shape  [6]int
	rank   int
	dtype  tt.DType
	layout tt.Layout
	mem    tt.MemoryConfig
}

// specKey is a short name of spec in this device's program-cache keys:
// equal specs get equal names, different specs different ones. A spec is
// named when first seen ("#" and a number: a decode step allocates the
// same few specs over and over, and short keys hash fast); one of rank
// over 6 is named by spec.String() (which starts with "["). A grid width
// equal to the worker grid's is named as zero (Device.sameCores).
func (d *Device) specKey(spec tt.Spec) string {
	spec.Memory = d.sameCores(spec.Memory)
	if e := d.specSlotOf(spec); e != nil {
		return e.key
	}
	return spec.String()
}

// specSlotOf returns spec's entry in specLast, naming the spec when it is
// new; nil for a spec of rank over 6.
func (d *Device) specSlotOf(spec tt.Spec) *specSlot {
	if len(spec.Shape) > len(specID{}.shape) {
		return nil
	}
	id := specID{rank: len(spec.Shape), dtype: spec.DType, layout: spec.Layout, mem: spec.Memory}
	copy(id.shape[:], spec.Shape)
	e := &d.specLast[id.slot()]
	if e.key != "" && e.id == id {
		return e
	}
	k, ok := d.specKeys[id]
	if !ok {
		k = "#" + strconv.Itoa(len(d.specKeys))
		if d.specKeys == nil {
			d.specKeys = map[specID]string{}
		}
		d.specKeys[id] = k
	}
	*e = specSlot{id: id, key: k}
	return e
}

type specSlot struct {
	id  specID
	key string
	// geo is the buffer of the spec's last allocation, before its
	// address and id (geometry copies it: the spec's validation, page
	// size and layout are functions of the spec and the device).
	geo *buffer
}

// slot is id's place in specLast (a multiplicative hash of its fields).
func (id *specID) slot() int {
	h := uint64(id.rank)
	for _, x := range id.shape[:id.rank] {
		h = h*31 + uint64(x)
	}
	m := id.mem
	for _, x := range []uint64{uint64(id.dtype), uint64(id.layout), uint64(m.Layout), uint64(m.Buffer),
		uint64(m.Shard.NumCores), uint64(m.Shard.Shape[0]), uint64(m.Shard.Shape[1]), uint64(m.Shard.FirstCore), uint64(m.Shard.GridWidth)} {
		h = h*31 + x
	}
	return int((h * 0x9E3779B97F4A7C15) >> 58)
}

// Allocate implements tt.Device.Allocate (§6.3, §6.4).
func (d *Device) Allocate(spec tt.Spec) (tt.Tensor, error) {
	spec.Shape = append([]int(nil), spec.Shape...)
	return d.allocate(spec)
}

// allocate is Allocate of a spec whose shape the tensor may keep (no
// caller holds it).
func (d *Device) allocate(spec tt.Spec) (tt.Tensor, error) {
	b, err := d.geometry(spec)
	if err != nil {
		return tt.Tensor{}, err
	}
	a := d.dram
	if b.bt == tt.L1 {
		a = d.l1a
	}
	addr, ok := a.alloc(b.perBank)
	if !ok {
		return tt.Tensor{}, a.outOfMemory("allocate", b.pageSize*uint64(b.numPages), b.bt, b.nbanks(d), b.perBank)
	}
	b.addr = addr
	b.id = d.nextID
	d.nextID++
	d.bufs.put(b.id, b)
	d.noteAllocation(b)
	return tt.Tensor{ID: b.id, Spec: spec, Addr: addr}, nil
}

func (d *Device) live(t tt.Tensor) (*buffer, bool) {
	b, ok := d.bufs.get(t.ID)
	return b, ok
}

// Free implements tt.Device.Free: the address is reusable at once.
func (d *Device) Free(t tt.Tensor) error {
	b, ok := d.live(t)
	if !ok {
		return fmt.Errorf("sim: free of %v: tensor is not allocated", t)
	}
	d.bufs.del(t.ID)
	if d.capturing && d.capAlloc[t.ID] {
		d.capFreed[t.ID] = true
	}
	if b.bt == tt.DRAM {
		d.dram.release(b.addr)
	} else {
		d.l1a.release(b.addr)
	}
	// Nothing keeps a freed tensor's buffer (launches keep snapshots), so
	// a later allocation takes it.
	*b = buffer{}
	d.spare = append(d.spare, b)
	return nil
}

// Address implements tt.Device.Address.
func (d *Device) Address(t tt.Tensor) (uint64, error) {
	b, ok := d.live(t)
	if !ok {
		return 0, fmt.Errorf("sim: %v is not allocated", t)
	}
	return b.addr, nil
}

func shapeEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WriteHost implements tt.Device.WriteHost: copy_host_to_device_tensor (§7).
// Padding elements of TILE pages are written as zeros; the alignment pad of
// each page slot is not touched (it keeps whatever it held).
func (d *Device) WriteHost(dst tt.Tensor, src tt.HostTensor) error {
	const op = "copy_host_to_device_tensor"
	if err := src.Check(); err != nil {
		return err
	}
	b, ok := d.live(dst)
	if !ok {
		return &tt.Error{Op: op, Msg: tt.MsgBufferNotAllocated}
	}
	switch {
	case !shapeEqual(src.Shape, b.spec.Shape):
		return &tt.Error{Op: op, Msg: tt.MsgHostShape}
	case src.DType != b.spec.DType:
		return &tt.Error{Op: op, Msg: tt.MsgHostDType}
	case src.Layout != b.spec.Layout:
		return &tt.Error{Op: op, Msg: tt.MsgHostPageConfig}
	}
	if err := d.hostWriteAllowed(); err != nil {
		return err
	}
	d.writePages(b, src.Data)
	d.internUpload(b)
	return nil
}

// ReadHost implements tt.Device.ReadHost. In strict mode a read of bytes never
// written is a Finding.
func (d *Device) ReadHost(src tt.Tensor) (tt.HostTensor, error) {
	b, ok := d.live(src)
	if !ok {
		return tt.HostTensor{}, &tt.Error{Op: "read", Msg: tt.MsgBufferNotAllocated}
	}
	if err := d.hostReadAllowed(); err != nil {
		return tt.HostTensor{}, err
	}
	data := d.readPages(b, "read")
	return tt.HostTensor{Shape: append([]int(nil), b.spec.Shape...), DType: b.spec.DType, Layout: b.spec.Layout, Data: data}, nil
}
