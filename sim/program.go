package sim

import (
	"fmt"

	"github.com/offcard/offcard/tt"
)

// cbSpec is one circular buffer of a program, in creation order (§6.5).
type cbSpec struct {
	indices []int  // CB indices sharing the buffer (c_24+c_25 share one)
	size    uint64 // total bytes
	global  bool   // globally allocated (aliases a sharded tensor): not placed
}

// cb is a placed circular buffer.
type cb struct {
	cbSpec
	addr uint64
}

// placeCBs lays a program's CBs out as ProgramImpl::allocate_circular_buffers
// does (§6.5): from the L1 unreserved base, in creation order, each at the
// previous end rounded up to the DRAM alignment; globally allocated CBs are
// skipped. It returns the CBs and the end of the static CB region.
func (d *Device) placeCBs(specs []cbSpec) ([]cb, uint64) {
	end := d.opt.L1UnreservedBase
	out := make([]cb, len(specs))
	for i, s := range specs {
		out[i].cbSpec = s
		if s.global {
			continue
		}
		a := alignUp(end, d.arch.dramAlign)
		out[i].addr = a
		end = a + s.size
	}
	return out, end
}

// checkCBRegion is ProgramImpl::validate_circular_buffer_region, run when a
// program is enqueued (not on trace replay): the static CB region must end at
// or below the lowest L1 buffer (tt_metal/impl/program/program.cpp:1444-1552).
// The text is ttnn's format with its arguments filled as sim knows them:
//   - the program's id is its place in the order this device built its
//     programs, from 0. On the card ProgramImpl::id is a process-wide
//     counter (program.cpp:272-279) that also counts the programs tt-metal
//     built before the first op (the dispatch's command-queue program at
//     open, tt_metal/impl/dispatch/topology.cpp:704, and those of any other
//     device), so the card's number is larger by that many;
//   - the core range is that of the first CB allocator, the first CB's
//     first range (every CB of these programs sits on the same cores, and
//     L1 buffers take the same address in every bank, so the first
//     allocator is the one that clashes), printed as "[x-y - x-y]"
//     (CoreRange::str, tt_metal/common/core_coord.cpp:115, umd's xy_pair
//     str): the update-cache programs' is their input's shard grid
//     (ucProgram.cbCores); SDPA decode and chunked SDPA put their CBs on
//     the whole compute grid, CoreRange({0, 0}, {grid.x - 1, grid.y - 1})
//     (transformer/sdpa_decode/device/sdpa_decode_program_factory.cpp:181,
//     transformer/sdpa/device/sdpa_program_factory.cpp:320).
//
// A region past the core's L1 fails first, with its own text
// (program.cpp:1486-1493).
func (d *Device) checkCBRegion(op string, p program) error {
	end := p.cbEnd()
	if end > d.opt.L1Size {
		return tt.Errorf(op, "Statically allocated circular buffers on core range %v grow to %d B which is beyond max L1 size of %d B", d.firstCBRange(p), end, d.opt.L1Size)
	}
	if low := d.l1a.lowestUsed(); end > low {
		return tt.Errorf(op, "Statically allocated circular buffers in program %d clash with L1 buffers on core range %v. L1 buffer allocated at %d and static circular buffer region ends at %d",
			d.curProg, d.firstCBRange(p), low, end)
	}
	return nil
}

// firstCBRange is the core range of p's first CB (checkCBRegion): the
// update-cache programs' and rms_norm's own, else the compute grid.
func (d *Device) firstCBRange(p program) coreRange {
	switch q := p.(type) {
	case *ucProgram:
		return q.cbCores
	case simpleProgram:
		return q.cores
	}
	return d.wholeGrid()
}

// program is a compiled program held by the program cache (§1.1-1.2). Its
// compile-time state is fixed by the cache key; launches carry the runtime
// arguments.
type program interface {
	// cbEnd is the end of the static CB region.
	cbEnd() uint64
}

// launch is one enqueued program with its runtime arguments; executing it
// touches only device memory at the addresses it carries, so a trace replays
// launches verbatim (§5.2).
type launch interface {
	exec(d *Device) error
}

// ProgramCacheStats reports program-cache hits and misses so far.
func (d *Device) ProgramCacheStats() (hits, misses int) { return d.hits, d.misses }

// lookup validates the op and returns the cached program for key, or builds
// it. Validation runs on every call: a hit runs validate_on_program_cache_hit,
// which for these ops is the miss validation (ttnn/api/ttnn/
// device_operation.hpp, handle_mesh_adapter_cache_hit). A miss inserts the
// program into the cache before it is enqueued (device_operation.hpp:
// 337-347), and the enqueue loads its binaries (tt_metal/distributed/
// distributed.cpp:115-118): a DRAM buffer allocated, then written
// (tt_metal/distributed/mesh_workload.cpp:151-179). During a capture that
// write fails ("Writes are not supported during trace capture. trace id:
// N", tt_metal/distributed/fd_mesh_command_queue.cpp:665), after the
// program was cached and its binary buffer allocated; the binaries are
// then not committed, so the next launch of that program (a hit) allocates
// a new buffer and drops the old one (mesh_workload.cpp:138-165).
// key may be the device's scratch key buffer: it is copied on a miss.
func (d *Device) lookup(op string, key []byte, validate func() error, build func() (program, error)) (program, error) {
	if err := validate(); err != nil {
		return nil, err
	}
	if p, ok := d.progs[string(key)]; ok {
		d.hits++
		d.curProg = d.progIDs[string(key)]
		if len(d.uncommitted) > 0 {
			if i, ok := d.uncommitted[string(key)]; ok {
				if err := d.reloadBinaries(op, string(key), i); err != nil {
					return nil, err
				}
			}
		}
		return p, nil
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	d.curProg = d.misses
	d.progIDs[string(key)] = d.misses
	d.misses++
	d.progs[string(key)] = p
	if err := d.loadBinaries(op); err != nil {
		return nil, err
	}
	if d.capturing {
		if d.uncommitted == nil {
			d.uncommitted = map[string]int{}
		}
		d.uncommitted[string(key)] = len(d.binaries) - 1
		return nil, d.missDuringCapture(op)
	}
	return p, nil
}

// missDuringCapture is the failed write of a program's binaries while a
// trace is being captured (strict: a finding).
func (d *Device) missDuringCapture(op string) error {
	d.find(Finding{Class: CacheMissDuringCapture, Op: op, Core: -1, User: -1, Index: -1,
		Detail: "program binaries written while capturing trace " + itoa(int(d.traceID)) + " (a program-cache miss); warm up before capture"})
	return tt.Errorf(op, tt.MsgProgramCacheMissDuringCapture, d.traceID)
}

// reloadBinaries is load_binaries for a cached program whose binaries were
// never committed (the miss failed during a capture): a new buffer, the old
// one dropped, then the write (which fails again during a capture).
func (d *Device) reloadBinaries(op, key string, i int) error {
	old := d.binaries[i]
	if err := d.loadBinaries(op); err != nil {
		return err
	}
	n := len(d.binaries) - 1
	d.binaries[i] = d.binaries[n]
	d.binaries = d.binaries[:n]
	d.dram.release(old)
	if d.capturing {
		return d.missDuringCapture(op)
	}
	delete(d.uncommitted, key)
	return nil
}

// enqueue runs a launch now, or records it during capture. The CB-region
// check runs at enqueue in both cases.
func (d *Device) enqueue(op string, p program, l launch) error {
	if err := d.checkCBRegion(op, p); err != nil {
		return err
	}
	if d.capturing {
		d.recorded = append(d.recorded, l)
		return nil
	}
	return l.exec(d)
}

// Run implements tt.Device.Run. An Allocating op's outputs are allocated
// through the device's allocator after its input checks and before its
// program runs (ttnn's create_output_tensors, inside a capture too); they
// are freed again if the op fails. During capture the launches an op
// enqueues are recorded with the op's operands (their ids and addresses at
// capture time), which strict mode checks on every replay.
func (d *Device) Run(op tt.Op) ([]tt.Tensor, error) {
	op = tt.Ptr(op) // the switches below take pointers: one passed in is used in place, and nothing of it is kept
	if tm, ok := op.(*tt.ToMemoryConfig); ok && d.sameCores(tm.Memory) == d.sameCores(tm.Input.Spec.Memory) {
		// to_memory_config to the tensor's own config returns the tensor
		// before any device op (core/to_memory_config/to_memory_config_op.cpp:257-261): nothing
		// runs, nothing is recorded or observed.
		return append(d.outSlice(1), tm.Input), nil
	}
	if err := wrapperCheck(op); err != nil {
		return nil, err
	}
	var ins, outs []tt.Tensor
	a, allocating := op.(tt.Allocating)
	if allocating {
		var specs []tt.Spec
		ins, specs = a.AppendInputs(d.runIns[:0]), a.AppendOutputSpecs(d.runSpecs[:0]) // fresh shapes: the outputs take them
		if err := d.checkAllocating(op, ins, specs); err != nil {
			return nil, err
		}
		outs = d.outSlice(len(specs))
		for _, spec := range specs {
			t, err := d.allocate(spec)
			if err != nil {
				d.freeAll(outs)
				return nil, err
			}
			outs = append(outs, t)
		}
	}
	// operands are op's inputs and outputs, an Allocating op's outputs
	// those the device allocated (what the trace and the observers see).
	operands := func() ([]tt.Tensor, []tt.Tensor) {
		if allocating {
			return ins, outs
		}
		return op.Inputs(), op.Outputs()
	}
	start := len(d.recorded)
	d.hiddenRefs = d.hiddenRefs[:0]
	err := d.dispatch(op, outs)
	if err != nil {
		if d.capturing {
			d.recorded = d.recorded[:start] // a failed op records nothing
		}
		d.freeAll(outs)
		return nil, err
	}
	if d.capturing {
		if len(d.recorded) > start {
			fins, fouts := operands()
			fp := d.footprintOf(op, fins, fouts, start)
			d.footprints = append(d.footprints, fp)
			if d.brief() {
				d.emit(OpEvent{Op: fp.op, Regime: Capture, Trace: d.traceID})
			} else if d.observing() {
				d.emit(OpEvent{Op: fp.op, Regime: Capture, Trace: d.traceID, Args: fp.args, Touched: fp.touches()})
			}
		}
		return outs, nil
	}
	if d.brief() {
		d.emit(OpEvent{Op: op.Name(), Regime: Eager})
	} else if d.observing() {
		d.emit(OpEvent{Op: op.Name(), Regime: Eager, Args: opArgs(op), Touched: d.touches(operands())})
	}
	return outs, nil
}

// outSlice is an empty slice with room for n outputs: a piece of the
// device's current slab (cap n, so an append by its holder moves it
// elsewhere), a new slab when this one is used up. The pieces never
// overlap, so each caller owns its outputs' slice as if it were made for
// it.
func (d *Device) outSlice(n int) []tt.Tensor {
	if n > len(d.outSlab) {
		d.outSlab = make([]tt.Tensor, max(n, outSlabLen))
	}
	s := d.outSlab[:0:n]
	d.outSlab = d.outSlab[n:]
	return s
}

// outSlabLen is how many outputs one slab holds.
const outSlabLen = 256

func (d *Device) freeAll(ts []tt.Tensor) {
	for _, t := range ts {
		_ = d.Free(t)
	}
}

// dispatch runs one op; outs are an Allocating op's outputs.
func (d *Device) dispatch(op tt.Op, outs []tt.Tensor) error {
	switch o := op.(type) {
	case *tt.PagedUpdateCache:
		return d.pagedUpdateCache(o)
	case *tt.PagedFusedUpdateCache:
		return d.pagedFusedUpdateCache(o)
	}
	if handled, err := d.runCompute(op, outs); handled {
		return err
	}
	return fmt.Errorf("sim: op %s is not implemented yet", op.Name())
}

// wrapperCheck runs the checks ttnn's op function (the one a caller
// calls) makes on its arguments before it launches the device operation,
// so before launch's allocation check of every tensor argument
// ("Input Tensor is not allocated", ttnn/api/ttnn/device_operation.hpp:450-451):
// they read only the tensors' specs, which a freed tensor keeps (and
// Tensor::device(), which the decode wrappers call first, returns the
// mesh device whether or not the buffer is allocated,
// ttnn/core/tensor/tensor.cpp:487-492). The offcard contract's own
// refusals of the same arguments (a rank the simulator does not model)
// come first.
func wrapperCheck(op tt.Op) error {
	switch o := op.(type) {
	case *tt.RMSNorm:
		// ttnn/cpp/ttnn/operations/normalization/rmsnorm/rmsnorm.cpp:34-36.
		if o.Input.Spec.Layout == tt.RowMajor {
			return opErr(op.Name(), "ttnn::rms_norm does not support ROW_MAJOR input tensors. Use TILE layout.")
		}
	case *tt.NLPCreateQKVHeadsDecode:
		// The wrapper infers head_dim (ttnn/cpp/ttnn/operations/
		// experimental/transformer/nlp_create_qkv_heads_decode/
		// nlp_create_qkv_heads_decode.cpp:47-50).
		sh := o.Input.Spec.Shape
		if len(sh) != 4 || o.NumHeads <= 0 || o.NumKVHeads <= 0 {
			return contractErr(op.Name(), "Input must be rank 4 and num_heads (%d), num_kv_heads (%d) positive", o.NumHeads, o.NumKVHeads)
		}
		if p3 := o.Input.Spec.PaddedDim(3); p3%(o.NumHeads+2*o.NumKVHeads) != 0 {
			return opErr(op.Name(), "Input shape %d must be divisible by num_heads + 2*num_kv_heads = %d", p3, o.NumHeads+2*o.NumKVHeads)
		}
	case *tt.NLPCreateQKVHeads:
		return checkCreateHeadsShape(*o)
	case *tt.PagedSDPADecode:
		return checkKChunk(*o)
	case *tt.Slice:
		return validateSliceWrapper(op.Name(), *o, o.Input.Spec)
	}
	return nil
}

// checkAllocating runs the input checks an Allocating op needs (ins, its
// Inputs) before its outputs (specs, its OutputSpecs) can be allocated
// (ttnn validates before create_output_tensors).
func (d *Device) checkAllocating(op tt.Op, ins []tt.Tensor, specs []tt.Spec) error {
	for _, t := range ins {
		if _, err := d.operandOf(op.Name(), t); err != nil {
			return err
		}
	}
	switch o := op.(type) {
	case *tt.NLPCreateQKVHeadsDecode:
		// The device op validates
		// (device/nlp_create_qkv_heads_decode_device_operation.cpp) after
		// the wrapper (wrapperCheck).
		return checkCreateHeadsDecode(*o)
	case *tt.NLPCreateQKVHeads:
		return checkCreateHeadsDevice(*o, o.Input.Spec)
	case *tt.NLPConcatHeads:
		return checkConcatHeadsShape(*o)
	case *tt.SDPA:
		if len(o.Q.Spec.Shape) != 4 {
			return contractErr(op.Name(), "Q, K and V must be rank 4, got shape %v", o.Q.Spec.Shape)
		}
	case *tt.ChunkedSDPA:
		if len(o.Q.Spec.Shape) != 4 {
			return contractErr(op.Name(), "Q, K and V must be rank 4, got shape %v", o.Q.Spec.Shape)
		}
	case *tt.Slice:
		// The device op's checks of the box, before it allocates.
		if err := validateSliceDevice(op.Name(), *o, o.Input.Spec); err != nil {
			return err
		}
	case *tt.ToMemoryConfig:
		if err := specs[0].Validate(); err != nil {
			return contractErr(op.Name(), "%v", err)
		}
	}
	return nil
}

// KernelBinaryBytesPerBank is the DRAM each program-cache miss reserves per
// bank for the program's kernel binaries (offcard's estimate: the real size
// is the program's compiled kernels, a few KB per RISC-V core type).
const KernelBinaryBytesPerBank = 2048

// loadBinaries is MeshWorkload::load_binaries at a program-cache miss
// (tt_metal/distributed/mesh_workload.cpp): a DRAM buffer for the kernel
// binaries, allocated top-down and kept while the program is cached (the
// device's life here). It goes through the allocator like any buffer, so it
// is subject to the unsafe-allocation warning and, in strict mode, to the
// live-trace overlap check.
func (d *Device) loadBinaries(op string) error {
	addr, ok := d.dram.allocDir(KernelBinaryBytesPerBank, false)
	if !ok {
		return d.dram.outOfMemory(op, uint64(KernelBinaryBytesPerBank*d.arch.nbanks), tt.DRAM, d.arch.nbanks, uint64(KernelBinaryBytesPerBank))
	}
	d.binaries = append(d.binaries, addr)
	d.noteAllocation(&buffer{bt: tt.DRAM, addr: addr, perBank: KernelBinaryBytesPerBank})
	return nil
}

// KernelBinaries returns the addresses of the kernel-binary buffers the
// program cache holds (one per miss, in order).
func (d *Device) KernelBinaries() []uint64 { return append([]uint64(nil), d.binaries...) }
