package sim

import "github.com/offcard/offcard/tt"

// KVWrite records one user's cache-row write by paged_update_cache or
// paged_fused_update_cache (all heads of the row), as the kernel computed it,
// whether the op ran eagerly or from a trace replay (Trace != 0); and, with
// Op "paged_fill_cache", each sequence row a fill wrote (User is the
// batch_idx, Pos the row's index in the input, the tile padding rows past
// the logical length included, Core -1).
type KVWrite struct {
	Op        string
	Part      int         // fused: 0 for Cache1/Input1, 1 for Cache2/Input2; else 0
	Cache     tt.TensorID // the cache tensor the launch was built for (at capture, for a replay)
	CacheAddr uint64      // the cache buffer address the kernel used
	Trace     tt.TraceID  // the trace being replayed (ids start at 0), 0 when eager
	User      int         // batch row (my_batch_idx)
	Core      int         // worker core: the input grid's first core + User
	Pos       uint32      // the update index
	Virtual   uint32      // pos / block_size (paged) or 0
	Physical  uint32      // page_table[user][Virtual] as read (paged), or the user (non-paged)
	Row       uint32      // row inside the block: pos % block_size
	FirstTile uint32      // tile id of head 0's first tile (uint32 arithmetic)
}

// KVLog returns the recorded KV writes (Options.LogKV), in execution order.
func (d *Device) KVLog() []KVWrite { return append([]KVWrite(nil), d.kvlog...) }

// ResetKVLog forgets the recorded KV writes.
func (d *Device) ResetKVLog() { d.kvlog = d.kvlog[:0] }
