package proptest

import (
	"sort"

	"github.com/offcard/offcard/qwen3"
)

// Reach kinds: the states a schedule run visited. CaseResult.Reach counts
// each kind's visits in the case's original schedule; ReachTotals sums a
// campaign (offcard check --json prints it as "reach"), so a campaign
// shows what it covered.
const (
	ReachStrict            = "strict"                  // the case ran with the sanitizer
	ReachFaithful          = "faithful"                // the case ran without it
	ReachAdmit             = "admit"                   // a prefill
	ReachPrefillByDecode   = "prefill_by_decode"       // a prefill by decode steps (qwen3.PrefillDecode)
	ReachFinish            = "finish"                  // a finish
	ReachReset             = "reset"                   // a recapture (Engine.Reset)
	ReachDecodeStart       = "decode_start"            // a decode that starts a sequence
	ReachDecodeStartMany   = "decode_start_several"    // a decode that starts two or more at once
	ReachTeacherForced     = "teacher_forced"          // a decode fed a teacher stream
	ReachPositionJump      = "position_jump"           // a decode whose positions jump
	ReachSubsetDecode      = "subset_decode"           // a decode of some live sequences only
	ReachPoolFull          = "pool_full"               // a decode step that left no free block
	ReachWidthFullCache    = "width_full_cache"        // a step whose page table is as wide as the cache
	ReachEagerDecode       = "eager_decode"            // a decode step the device ran eagerly
	ReachCapture           = "capture"                 // a decode step that captured a trace
	ReachReplay            = "replay"                  // a decode step that replayed one
	ReachSteadyReplay      = "steady_replay"           // a replay in steady state (zero host writes expected)
	ReachCaptureRefused    = "capture_refused"         // a capture the device's trace region could not hold (the step ran eager)
	ReachPrefillInterleave = "prefill_between_replays" // a replay after a prefill that followed a replay

	// The serving actions (drawn only when the SUT serves their calls).
	ReachShare             = "prefix_hit"              // a prefix-cache hit (share)
	ReachShareAtBoundary   = "prefix_hit_at_boundary"  // one of a whole number of blocks
	ReachShareInBlock      = "prefix_hit_in_block"     // one ending inside a block (copied on write)
	ReachSharedAfterEnd    = "shared_after_finish"     // a finish or preempt whose blocks another table still holds
	ReachChunk             = "chunked_prefill"         // a prefill chunk of a prompt in several chunks
	ReachChunkPastStick    = "chunk_past_eight_blocks" // one whose table holds more than 8 blocks (one 32-byte stick of int32 block ids)
	ReachVerify            = "verify"                  // a sequence's speculative verify
	ReachVerifyAcrossBlock = "verify_across_block"     // one whose k positions cross a block boundary
	ReachRollback          = "rollback"                // one that rejected drafts (rolled back)
	ReachFork              = "fork"                    // a fork
	ReachBlockCopy         = "block_copy"              // a CopyBlocks call (copy-on-write)
	ReachPreempt           = "preempt"                 // a preemption
	ReachReadmit           = "readmit"                 // a re-admit (recompute)
)

// Reach counts the visits of one run.
type Reach struct {
	counts map[string]int
	// afterReplay: the last decode step replayed; prefillAfterReplay: a
	// prefill ran since.
	afterReplay, prefillAfterReplay bool
}

func (r *Reach) add(kind string) {
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind]++
}

func (r *Reach) decodeCmd(c Cmd) {
	if n := len(c.Start); n > 0 {
		r.add(ReachDecodeStart)
		if n > 1 {
			r.add(ReachDecodeStartMany)
		}
	}
	if c.Force > 0 {
		r.add(ReachTeacherForced)
	}
	if c.Skip > 0 {
		r.add(ReachPositionJump)
	}
	if c.Seqs != nil {
		r.add(ReachSubsetDecode)
	}
}

func (r *Reach) poolFull(full bool) {
	if full {
		r.add(ReachPoolFull)
	}
}

func (r *Reach) width(w, blocks int) {
	if w == blocks {
		r.add(ReachWidthFullCache)
	}
}

func (r *Reach) regime(obs string, steady bool) {
	switch obs {
	case "replay":
		r.add(ReachReplay)
		if steady {
			r.add(ReachSteadyReplay)
		}
		if r.prefillAfterReplay {
			r.add(ReachPrefillInterleave)
		}
		r.afterReplay, r.prefillAfterReplay = true, false
	case "capture":
		r.add(ReachCapture)
		r.afterReplay, r.prefillAfterReplay = false, false
	default:
		r.add(ReachEagerDecode)
		r.afterReplay, r.prefillAfterReplay = false, false
	}
}

// Counts returns the visits by kind (nil when none).
func (r *Reach) Counts() map[string]int {
	if len(r.counts) == 0 {
		return nil
	}
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// ReachTotal is a campaign's coverage of one kind: the cases that visited
// it and the visits in all.
type ReachTotal struct {
	Kind   string `json:"kind"`
	Cases  int    `json:"cases"`
	Visits int    `json:"visits"`
}

// AllReachKinds lists every reach kind, in report order.
var AllReachKinds = []string{ReachStrict, ReachFaithful, ReachAdmit, ReachPrefillByDecode, ReachFinish, ReachReset,
	ReachDecodeStart, ReachDecodeStartMany, ReachTeacherForced, ReachPositionJump, ReachSubsetDecode,
	ReachPoolFull, ReachWidthFullCache, ReachEagerDecode, ReachCapture, ReachReplay, ReachSteadyReplay,
	ReachCaptureRefused, ReachPrefillInterleave,
	ReachShare, ReachShareAtBoundary, ReachShareInBlock, ReachSharedAfterEnd, ReachChunk, ReachChunkPastStick,
	ReachVerify, ReachVerifyAcrossBlock, ReachRollback, ReachFork, ReachBlockCopy, ReachPreempt, ReachReadmit}

// ServingReach maps each serving reach kind to the serving calls it needs
// (a report says which were not exercised because the SUT lacks them).
var ServingReach = map[string][]string{
	ReachShare: {qwen3.ServePrefillFrom}, ReachShareAtBoundary: {qwen3.ServePrefillFrom},
	ReachShareInBlock: {qwen3.ServePrefillFrom, qwen3.ServeCopyBlocks},
	ReachChunk:        {qwen3.ServePrefillFrom}, ReachChunkPastStick: {qwen3.ServePrefillFrom}, ReachVerify: {qwen3.ServeVerify}, ReachVerifyAcrossBlock: {qwen3.ServeVerify},
	ReachRollback: {qwen3.ServeVerify}, ReachBlockCopy: {qwen3.ServeCopyBlocks},
}

// ReachTotals sums the reach of a campaign's cases (their original
// schedules), one row per kind, every kind listed (zero rows show what a
// campaign never reached).
func ReachTotals(rs []CaseResult) []ReachTotal {
	idx := map[string]int{}
	out := make([]ReachTotal, len(AllReachKinds))
	for i, k := range AllReachKinds {
		out[i].Kind, idx[k] = k, i
	}
	for _, r := range rs {
		keys := make([]string, 0, len(r.Reach))
		for k := range r.Reach {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, ReachTotal{Kind: k})
			}
			out[i].Cases++
			out[i].Visits += r.Reach[k]
		}
	}
	return out
}
