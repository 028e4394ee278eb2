package sim

// KVWrite records one user's cache-row write by paged_update_cache (all heads
// of the row), as the kernel computed it.
type KVWrite struct {
	Op        string
	CacheAddr uint64 // the cache buffer address the kernel used
	User      int    // batch row = core index
	Pos       uint32 // the update index
	Virtual   uint32 // pos / block_size (paged) or 0
	Physical  uint32 // page_table[user][Virtual] as read (paged), or the user (non-paged)
	Row       uint32 // row inside the block: pos % block_size
	FirstTile uint32 // tile id of head 0's first tile (uint32 arithmetic)
}

// KVLog returns the recorded KV writes (Options.LogKV), in execution order.
func (d *Device) KVLog() []KVWrite { return append([]KVWrite(nil), d.kvlog...) }

// ResetKVLog forgets the recorded KV writes.
func (d *Device) ResetKVLog() { d.kvlog = d.kvlog[:0] }
