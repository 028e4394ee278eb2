package ref

import (
	"math"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// naive is a slow, independent re-implementation of numerics §2.1 written
// from the notes, not from the decoder: float32 values that are always bf16
// representable, a contiguous (unpaged) KV cache per layer, and its own
// helpers. Only the inner-product order is pluggable: with laneDot it must
// equal the Decoder bit for bit; with seqDot (plain left-to-right float32
// sums) it must agree within a few bf16 steps.
type naive struct {
	w      *qwen3.Weights
	dot    func(a, b []float32) float32
	kcache [][][]float32 // [layer][pos][kvdim]
	vcache [][][]float32
}

func seqDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += float32(a[i] * b[i])
	}
	return s
}

func newNaive(w *qwen3.Weights, dot func(a, b []float32) float32) *naive {
	n := &naive{w: w, dot: dot}
	n.kcache = make([][][]float32, w.Config.NumHiddenLayers)
	n.vcache = make([][][]float32, w.Config.NumHiddenLayers)
	return n
}

func rv(x float32) float32 { return bf16.Round(x) }

func (n *naive) row(m []bf16.BF16, o, cols int) []float32 { return widen(m[o*cols : (o+1)*cols]) }

func (n *naive) linear(m []bf16.BF16, x []float32) []float32 {
	cols := len(x)
	out := make([]float32, len(m)/cols)
	for o := range out {
		out[o] = rv(n.dot(n.row(m, o, cols), x))
	}
	return out
}

func (n *naive) rmsnorm(x []float32, w []bf16.BF16) []float32 {
	eps := float32(n.w.Config.RMSNormEps)
	variance := n.dot(x, x) / float32(len(x))
	s := float32(1 / math.Sqrt(float64(variance+eps)))
	out := make([]float32, len(x))
	for i := range x {
		out[i] = rv(w[i].Float32() * rv(x[i]*s))
	}
	return out
}

func (n *naive) rope(x []float32, pos int) []float32 {
	hd := len(x)
	half := hd / 2
	emb := make([]float32, hd)
	for i := 0; i < half; i++ {
		invFreq := float32(1) / float32(math.Pow(n.w.Config.RopeTheta, float64(float32(2*i)/float32(hd))))
		emb[i] = float32(pos) * invFreq
		emb[i+half] = emb[i]
	}
	out := make([]float32, hd)
	for j := range hd {
		c := rv(float32(math.Cos(float64(emb[j]))))
		s := rv(float32(math.Sin(float64(emb[j]))))
		var rot float32
		if j < half {
			rot = -x[j+half]
		} else {
			rot = x[j-half]
		}
		out[j] = rv(rv(x[j]*c) + rv(rot*s))
	}
	return out
}

// step runs token tok at position pos (which must be the cache length) and
// returns the bf16 logits widened.
func (n *naive) step(tok int32, pos int) []float32 {
	c := n.w.Config
	hd := c.HeadDim
	x := n.row(n.w.Embed, int(tok), c.HiddenSize)
	for l, L := range n.w.Layers {
		a := n.rmsnorm(x, L.InputNorm)
		q := n.linear(L.Q, a)
		k := n.linear(L.K, a)
		v := n.linear(L.V, a)
		for h := 0; h < c.NumAttentionHeads; h++ {
			copy(q[h*hd:], n.rope(n.rmsnorm(q[h*hd:(h+1)*hd], L.QNorm), pos))
		}
		for h := 0; h < c.NumKeyValueHeads; h++ {
			copy(k[h*hd:], n.rope(n.rmsnorm(k[h*hd:(h+1)*hd], L.KNorm), pos))
		}
		n.kcache[l] = append(n.kcache[l], k)
		n.vcache[l] = append(n.vcache[l], v)
		T := len(n.kcache[l])
		scale := float32(1 / math.Sqrt(float64(hd)))
		attn := make([]float32, c.QDim())
		for h := 0; h < c.NumAttentionHeads; h++ {
			kvh := h / c.Group()
			qh := q[h*hd : (h+1)*hd]
			scores := make([]float32, T)
			m := float32(math.Inf(-1))
			for t := range T {
				scores[t] = rv(rv(n.dot(qh, n.kcache[l][t][kvh*hd:(kvh+1)*hd])) * scale)
				if scores[t] > m {
					m = scores[t]
				}
			}
			ones := make([]float32, T)
			for t := range T {
				scores[t] = float32(math.Exp(float64(scores[t] - m)))
				ones[t] = 1
			}
			sum := n.dot(scores, ones)
			for t := range T {
				scores[t] = rv(scores[t] / sum)
			}
			col := make([]float32, T)
			for d := range hd {
				for t := range T {
					col[t] = n.vcache[l][t][kvh*hd+d]
				}
				attn[h*hd+d] = rv(n.dot(scores, col))
			}
		}
		o := n.linear(L.O, attn)
		for i := range x {
			x[i] = rv(x[i] + o[i])
		}
		b := n.rmsnorm(x, L.PostNorm)
		g := n.linear(L.Gate, b)
		u := n.linear(L.Up, b)
		for i := range g {
			gi := g[i]
			s := rv(gi / (1 + float32(math.Exp(float64(-gi)))))
			g[i] = rv(s * u[i])
		}
		d := n.linear(L.Down, g)
		for i := range x {
			x[i] = rv(x[i] + d[i])
		}
	}
	return n.linear(n.w.LMHead, n.rmsnorm(x, n.w.Norm))
}
