package sim

import "github.com/offcard/offcard/tt"

// sdpaShape is what the SDPA program factory's CB list depends on, for
// plain (prefill) and chunked SDPA alike: both are
// ttnn/cpp/ttnn/operations/transformer/sdpa/device/sdpa_program_factory.cpp.
type sdpaShape struct {
	b, nqh, sq, sk, dh int
	qChunk, kChunk     int  // 32 without a program config (:178-181)
	causal, fp32       bool // is_causal; fp32_dest_acc_en
	chunked            bool // a page table: a chunked call
	flexible           bool // the tensor form's chunk start
	stick              uint64
}

// sdpaProgramCBs is the factory's CBs in creation order (:662-729): every
// CB takes the next index (next_cb_index++), so a CB left out renumbers
// the rest; none is bound to a buffer; all sit on the whole compute grid
// (:316-321; the shim passes the device's grid in a program config). It
// returns the list and the page table's position in it (-1 when there is
// none). BF16 Q, K, V and output, no mask tensor, no attention sink, no
// sliding window, head_dim_v = head_dim (the contract's calls).
//
//	q_in        Sq_chunk_t·DHt·q_buffer_factor tiles (:379, :334-352)
//	k_in, v_in  Sk_chunk_t·DHt·2 each
//	mask_in     when causal or padded (:684-692): causal, or streaming and
//	            padded, a lightweight Float16_b mask of 1 tile (+1 causal,
//	            +1 for a partial K tile, :80-91); otherwise
//	            Sq_chunk_t·Sk_chunk_t·2 Bfp4_b tiles
//	identity_scale_in, col_identity   1 tile each
//	page_table  chunked: one stick (:697-699, :138-148)
//	chunk_start_idx_compute, _writer  the tensor form: 32 B each (:700-704)
//	recip_scratch  streaming compute (fp32_dest_acc off): 1 tile (:717-719)
//	qk_im       Sq_chunk_t·Sk_chunk_t tiles
//	out_im_A, out_im_B  Sq_chunk_t·DHt each
//	max_A, max_B, sum_A, sum_B, exp_max_diff  Sq_chunk_t each
//	out         streaming: 2·qktv_h·DHt (:404-424,
//	            sdpa_subblock_utils.hpp:67-72, kernels/sdpa_streaming_qktv.hpp:15-19);
//	            otherwise Sq_chunk_t·DHt
func (d *Device) sdpaProgramCBs(s sdpaShape) ([]cbSpec, int) {
	t := tileBytes(tt.BF16)
	sqt, skt, dht := s.qChunk/tt.TileSize, s.kChunk/tt.TileSize, s.dh/tt.TileSize
	paddedSq := (s.sq + s.qChunk - 1) / s.qChunk * s.qChunk
	paddedSk := (s.sk + s.kChunk - 1) / s.kChunk * s.kChunk
	padded := !s.causal && (paddedSk != s.sk || paddedSq != s.sq)
	streaming := !s.fp32
	// q_buffer_factor: 2 when a core takes more than one Q chunk.
	qChunks := paddedSq / s.qChunk
	total, cores := s.b*s.nqh*qChunks, d.opt.NumCores
	perCore := 0
	if s.causal && qChunks%2 == 0 {
		pairs := total / 2
		perCore = pairs / cores * 2
		if pairs%cores > 0 {
			perCore += 2
		}
	} else {
		perCore = total / cores
		if total%cores > 0 {
			perCore++
		}
	}
	qbf := 1
	if perCore > 1 {
		qbf = 2
	}
	var specs []cbSpec
	add := func(size uint64) { specs = append(specs, cbSpec{indices: []int{len(specs)}, size: size}) }
	add(uint64(sqt*dht*qbf) * t)
	add(uint64(skt*dht*2) * t)
	add(uint64(skt*dht*2) * t)
	if s.causal || padded {
		if s.causal || (streaming && padded) {
			n := 1
			if s.causal {
				n++
			}
			if streaming && padded && s.sk%tt.TileSize != 0 {
				n++
			}
			add(uint64(n) * t)
		} else {
			add(uint64(sqt*skt*2) * bfp4Tile)
		}
	}
	add(t)
	add(t)
	pt := -1
	if s.chunked {
		pt = len(specs)
		add(s.stick)
	}
	if s.flexible {
		add(32)
		add(32)
	}
	if streaming {
		add(t)
	}
	add(uint64(sqt*skt) * t)
	add(uint64(sqt*dht) * t)
	add(uint64(sqt*dht) * t)
	for range 5 {
		add(uint64(sqt) * t)
	}
	out := sqt * dht
	if streaming {
		h, w := largestSubblock(sqt, dht, 8, 2)
		if h == 1 && 2*w <= 8 && sqt >= 2 {
			h = 2
		}
		out = 2 * h * dht
	}
	add(uint64(out) * t)
	return specs, pt
}

// bfp4Tile is a Bfp4_b tile: 512 B of mantissas and 64 B of exponents.
const bfp4Tile = 576

// largestSubblock is determine_largest_subblock_size
// (ttnn/cpp/ttnn/operations/transformer/sdpa/device/sdpa_subblock_utils.hpp:23-46):
// the first (h, w) of its list, largest area first, with h·w <= dst,
// h <= maxH, h dividing rows and w dividing cols.
func largestSubblock(rows, cols, dst, maxH int) (int, int) {
	for _, c := range [...][2]int{{2, 4}, {4, 2}, {1, 8}, {8, 1}, {1, 7}, {7, 1}, {2, 3}, {3, 2}, {1, 6}, {6, 1},
		{1, 5}, {5, 1}, {2, 2}, {1, 4}, {4, 1}, {1, 3}, {3, 1}, {1, 2}, {2, 1}, {1, 1}} {
		h, w := c[0], c[1]
		if h*w <= dst && h <= maxH && rows%h == 0 && cols%w == 0 {
			return h, w
		}
	}
	return 1, 1
}
