package qwen3

// SlotSeqs returns, for each of the engine's Capacity slots, the sequence
// that holds it, and false for a free slot. It is how an observer that
// reads the device by slot (cur_pos, page-table rows, the KV write log)
// names sequences.
func (e *Engine) SlotSeqs() ([]SeqID, []bool) {
	return append([]SeqID(nil), e.slotSeq...), append([]bool(nil), e.slotLive...)
}
