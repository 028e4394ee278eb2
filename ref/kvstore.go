package ref

import (
	"fmt"

	"github.com/offcard/offcard/bf16"
)

// KVStore is a CPU paged KV cache of bf16 keys and values. Per layer, keys
// and values are each laid out [block][kvHead][row][headDim]: position pos
// of a sequence with block table t lives in block t[pos/blockSize], row
// pos%blockSize. Fresh memory is zero.
//
// Memory is held for blocks [0, Blocks()) only, grown as writes reach
// higher blocks: the blocks past it were never written and read as zero. A
// block pool that hands out the lowest free id (kvpage.Pool) keeps a large
// cache that few sequences use small here.
type KVStore struct {
	layers, numBlocks, blockSize, kvHeads, headDim int
	k, v                                           [][]bf16.BF16 // per layer, the held blocks
}

// NewKVStore makes a store for the given shape.
func NewKVStore(layers, numBlocks, blockSize, kvHeads, headDim int) (*KVStore, error) {
	if layers <= 0 || numBlocks <= 0 || blockSize <= 0 || kvHeads <= 0 || headDim <= 0 {
		return nil, fmt.Errorf("ref: bad KV store shape layers=%d blocks=%d blockSize=%d kvHeads=%d headDim=%d",
			layers, numBlocks, blockSize, kvHeads, headDim)
	}
	s := &KVStore{layers: layers, numBlocks: numBlocks, blockSize: blockSize, kvHeads: kvHeads, headDim: headDim}
	s.k = make([][]bf16.BF16, layers)
	s.v = make([][]bf16.BF16, layers)
	return s, nil
}

// NumBlocks is the number of blocks per layer.
func (s *KVStore) NumBlocks() int { return s.numBlocks }

// BlockSize is the number of positions per block.
func (s *KVStore) BlockSize() int { return s.blockSize }

// Blocks is the number of blocks whose memory the store holds, from block
// 0: every block written so far is below it.
func (s *KVStore) Blocks() int { return len(s.k[0]) / s.blockVals() }

// LayerSize is the number of values of one layer's keys (or values), all
// NumBlocks blocks.
func (s *KVStore) LayerSize() int { return s.numBlocks * s.blockVals() }

func (s *KVStore) blockVals() int { return s.kvHeads * s.blockSize * s.headDim }

// Layer returns the raw key and value memory of one layer's first Blocks()
// blocks, laid out [block][kvHead][row][headDim]; the rest of the layer's
// LayerSize() values are zero (for tests and inspection; do not retain
// across writes if you need a snapshot).
func (s *KVStore) Layer(layer int) (k, v []bf16.BF16) { return s.k[layer], s.v[layer] }

// hold grows the memory held to cover block b (at least doubling it, up to
// NumBlocks), keeping what was written.
func (s *KVStore) hold(b int) {
	held := s.Blocks()
	if b < held {
		return
	}
	n := min(max(b+1, 2*held), s.numBlocks)
	for l := range s.layers {
		for _, x := range []*[]bf16.BF16{&s.k[l], &s.v[l]} {
			grown := make([]bf16.BF16, n*s.blockVals())
			copy(grown, *x)
			*x = grown
		}
	}
}

// block returns the block id holding pos after checking the table and the
// id.
func (s *KVStore) block(blocks []int32, pos int) (int, error) {
	if pos < 0 {
		return 0, fmt.Errorf("ref: negative position %d", pos)
	}
	i := pos / s.blockSize
	if i >= len(blocks) {
		return 0, fmt.Errorf("ref: block table of %d entries does not cover position %d (block size %d)", len(blocks), pos, s.blockSize)
	}
	b := blocks[i]
	if b < 0 || int(b) >= s.numBlocks {
		return 0, fmt.Errorf("ref: block id %d (table entry %d) out of range [0,%d)", b, i, s.numBlocks)
	}
	return int(b), nil
}

func (s *KVStore) checkLayer(layer int) error {
	if layer < 0 || layer >= s.layers {
		return fmt.Errorf("ref: layer %d out of range [0,%d)", layer, s.layers)
	}
	return nil
}

// Write stores k and v (kvHeads*headDim each, head-major) of position pos
// at block blocks[pos/blockSize], row pos%blockSize.
func (s *KVStore) Write(layer int, blocks []int32, pos int, k, v []bf16.BF16) error {
	if err := s.checkLayer(layer); err != nil {
		return err
	}
	if len(k) != s.kvHeads*s.headDim || len(v) != s.kvHeads*s.headDim {
		return fmt.Errorf("ref: KV write of %d/%d values, want %d", len(k), len(v), s.kvHeads*s.headDim)
	}
	b, err := s.block(blocks, pos)
	if err != nil {
		return err
	}
	s.hold(b)
	row := pos % s.blockSize
	hd := s.headDim
	for h := 0; h < s.kvHeads; h++ {
		off := ((b*s.kvHeads+h)*s.blockSize + row) * hd
		copy(s.k[layer][off:off+hd], k[h*hd:(h+1)*hd])
		copy(s.v[layer][off:off+hd], v[h*hd:(h+1)*hd])
	}
	return nil
}

// Gather copies positions 0..n-1 of kv head head into kdst and vdst,
// contiguous [n, headDim].
func (s *KVStore) Gather(layer, head int, blocks []int32, n int, kdst, vdst []bf16.BF16) error {
	if err := s.checkLayer(layer); err != nil {
		return err
	}
	if head < 0 || head >= s.kvHeads {
		return fmt.Errorf("ref: kv head %d out of range [0,%d)", head, s.kvHeads)
	}
	hd := s.headDim
	if n < 0 || len(kdst) < n*hd || len(vdst) < n*hd {
		return fmt.Errorf("ref: gather of %d positions into buffers of %d/%d values", n, len(kdst), len(vdst))
	}
	if n == 0 {
		return nil
	}
	if _, err := s.block(blocks, n-1); err != nil {
		return err
	}
	kl, vl := s.k[layer], s.v[layer]
	bs, held := s.blockSize, s.Blocks()
	for p := 0; p < n; p += bs {
		b := blocks[p/bs]
		if b < 0 || int(b) >= s.numBlocks {
			return fmt.Errorf("ref: block id %d (table entry %d) out of range [0,%d)", b, p/bs, s.numBlocks)
		}
		rows := min(bs, n-p)
		if int(b) >= held { // never written: zero
			clear(kdst[p*hd : (p+rows)*hd])
			clear(vdst[p*hd : (p+rows)*hd])
			continue
		}
		off := ((int(b)*s.kvHeads + head) * bs) * hd
		copy(kdst[p*hd:(p+rows)*hd], kl[off:off+rows*hd])
		copy(vdst[p*hd:(p+rows)*hd], vl[off:off+rows*hd])
	}
	return nil
}
