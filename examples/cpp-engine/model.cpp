// model.cpp: Qwen3 on the CPU for the C++ reference engine (see model.hpp).
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "safetensors.hpp"

namespace offcard {

namespace {

using bf16 = uint16_t;

constexpr int kLanes = 16;    // the oracle's accumulation lanes
constexpr int kTile = 32;     // paged_fill_cache writes whole 32-row tiles
constexpr long kMaxReply = 16L << 20;  // above this an admit answers its last position only

inline float W(bf16 h) { return bf16_float(h); }
inline bf16 B(float f) { return bf16_bits(f); }
inline float R(float f) { return W(B(f)); }

// fold sums the 16 lane accumulators as a tree: for h = 8, 4, 2, 1:
// acc[l] += acc[l+h] for l < h.
inline float fold(float* acc) {
    for (int h = kLanes / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

// dot is the oracle's dot product of a bf16 row and a widened bf16 vector:
// acc[j%16] += w[j]*x[j] (each product exact in float), then fold.
inline float dot(const bf16* w, const float* x, int n) {
    float acc[kLanes] = {};
    int j = 0;
    for (; j + kLanes <= n; j += kLanes)  // whole groups: lane l of each (vectorizable)
        for (int l = 0; l < kLanes; l++) acc[l] += W(w[j + l]) * x[j + l];
    for (int l = 0; j < n; j++, l++) acc[l] += W(w[j]) * x[j];
    return fold(acc);
}

void widen(std::vector<float>& dst, const std::vector<bf16>& src) {
    dst.resize(src.size());
    for (size_t i = 0; i < src.size(); i++) dst[i] = W(src[i]);
}

// matvec: dst[o] = R(dot(row o of w, x)) for w [rows, cols] (Hugging Face's [out, in]).
void matvec(std::vector<bf16>& dst, const std::vector<bf16>& w, const std::vector<float>& x, int rows, int cols) {
    dst.resize(rows);
    for (int o = 0; o < rows; o++) dst[o] = B(dot(&w[static_cast<size_t>(o) * cols], x.data(), cols));
}

// rmsnorm over n values (dst may alias x): s = float(1/sqrt(mean(x²)+eps)),
// dst = R(w·R(x·s)).
void rmsnorm(bf16* dst, const bf16* x, const bf16* w, int n, float eps) {
    float acc[kLanes] = {};
    for (int j = 0; j < n; j++) acc[j % kLanes] += W(x[j]) * W(x[j]);
    const float v = fold(acc) / static_cast<float>(n);
    const float s = static_cast<float>(1 / std::sqrt(static_cast<double>(v + eps)));
    for (int i = 0; i < n; i++) dst[i] = B(W(w[i]) * R(W(x[i]) * s));
}

// rope_table: cos/sin of position pos, bf16, duplicated at i and i+hd/2.
void rope_table(double theta, int hd, int pos, std::vector<bf16>& cos, std::vector<bf16>& sin) {
    cos.resize(hd);
    sin.resize(hd);
    const int half = hd / 2;
    for (int i = 0; i < half; i++) {
        const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
        const float inv = 1 / static_cast<float>(std::pow(theta, static_cast<double>(e)));
        const float f = static_cast<float>(pos) * inv;
        cos[i] = cos[i + half] = B(static_cast<float>(std::cos(static_cast<double>(f))));
        sin[i] = sin[i + half] = B(static_cast<float>(std::sin(static_cast<double>(f))));
    }
}

// rope (half-split, in place): x = R(R(x·cos) + R(rot·sin)), rot = (-x[h:], x[:h]).
void rope(bf16* x, const std::vector<bf16>& cos, const std::vector<bf16>& sin, int hd) {
    const int half = hd / 2;
    for (int i = 0; i < half; i++) {
        const float x0 = W(x[i]), x1 = W(x[i + half]);
        const float lo = R(x0 * W(cos[i])) + R(-x1 * W(sin[i]));
        const float hi = R(x1 * W(cos[i + half])) + R(x0 * W(sin[i + half]));
        x[i] = B(lo);
        x[i + half] = B(hi);
    }
}

void add(std::vector<bf16>& x, const std::vector<bf16>& o) {
    for (size_t i = 0; i < x.size(); i++) x[i] = B(W(x[i]) + W(o[i]));
}

float silu(float g) { return g / (1 + static_cast<float>(std::exp(static_cast<double>(-g)))); }

}  // namespace

Config Config::parse(const nlohmann::json& j) {
    Config c;
    c.hidden = j.at("hidden_size").get<int>();
    c.intermediate = j.at("intermediate_size").get<int>();
    c.layers = j.at("num_hidden_layers").get<int>();
    c.heads = j.at("num_attention_heads").get<int>();
    c.kv_heads = j.at("num_key_value_heads").get<int>();
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int>() : c.hidden / std::max(c.heads, 1);
    c.vocab = j.at("vocab_size").get<int>();
    c.eps = j.at("rms_norm_eps").get<float>();
    if (j.contains("rope_theta"))
        c.theta = j["rope_theta"].get<double>();
    else
        c.theta = j.at("rope_parameters").at("rope_theta").get<double>();
    c.tied = j.value("tie_word_embeddings", false);
    if (c.hidden <= 0 || c.intermediate <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.head_dim <= 0 ||
        c.head_dim % 2 != 0 || c.vocab <= 0 || c.heads % c.kv_heads != 0)
        throw std::runtime_error("config: not a Qwen3 shape this engine runs");
    return c;
}

Model::Model(const Hello& h) : c_(Config::parse(h.model.config)), bs_(h.block_size), num_blocks_(h.num_blocks) {
    if (bs_ <= 0 || num_blocks_ <= 0) throw std::runtime_error("hello: block_size and num_blocks must be positive");
    if (h.model.weights.empty()) throw std::runtime_error("hello: no weights directory (model.weights)");
    // See model.hpp: offcard's own engine prefills by program, padding the prompt's last tile.
    pad_prompt_ = h.hints.prefill == "program";
    SafeTensors st(h.model.weights + "/model.safetensors");
    const int64_t H = c_.hidden, I = c_.intermediate, hd = c_.head_dim, Q = int64_t(c_.heads) * hd, KV = int64_t(c_.kv_heads) * hd;
    embed_ = st.read("model.embed_tokens.weight", {c_.vocab, H}).data;
    norm_ = st.read("model.norm.weight", {H}).data;
    lm_head_ = st.has("lm_head.weight") ? st.read("lm_head.weight", {c_.vocab, H}).data : embed_;
    for (int l = 0; l < c_.layers; l++) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        Layer L;
        L.in_norm = st.read(p + "input_layernorm.weight", {H}).data;
        L.q = st.read(p + "self_attn.q_proj.weight", {Q, H}).data;
        L.k = st.read(p + "self_attn.k_proj.weight", {KV, H}).data;
        L.v = st.read(p + "self_attn.v_proj.weight", {KV, H}).data;
        L.q_norm = st.read(p + "self_attn.q_norm.weight", {hd}).data;
        L.k_norm = st.read(p + "self_attn.k_norm.weight", {hd}).data;
        L.o = st.read(p + "self_attn.o_proj.weight", {H, Q}).data;
        L.post_norm = st.read(p + "post_attention_layernorm.weight", {H}).data;
        L.gate = st.read(p + "mlp.gate_proj.weight", {I, H}).data;
        L.up = st.read(p + "mlp.up_proj.weight", {I, H}).data;
        L.down = st.read(p + "mlp.down_proj.weight", {H, I}).data;
        L_.push_back(std::move(L));
    }
    K_.resize(c_.layers);
    V_.resize(c_.layers);
}

void Model::check_token(int32_t t) const {
    if (t < 0 || t >= c_.vocab) throw std::runtime_error("token " + std::to_string(t) + " outside the vocabulary of " + std::to_string(c_.vocab));
}

void Model::check_table(const std::vector<int32_t>& blocks, int last) const {
    if (last < 0) throw std::runtime_error("negative position " + std::to_string(last));
    const size_t need = static_cast<size_t>(last / bs_) + 1;
    if (blocks.size() < need)
        throw std::runtime_error("position " + std::to_string(last) + " is past the block table (" + std::to_string(blocks.size()) + " blocks of " + std::to_string(bs_) + ")");
    for (size_t i = 0; i < need; i++)
        if (blocks[i] < 0 || blocks[i] >= num_blocks_)
            throw std::runtime_error("block " + std::to_string(blocks[i]) + " outside the cache of " + std::to_string(num_blocks_) + " blocks");
}

long Model::row(const std::vector<int32_t>& blocks, int pos) const { return long(blocks[pos / bs_]) * bs_ + pos % bs_; }

void Model::hold(long rows) {
    if (rows <= held_) return;
    const long n = std::min(std::max(rows, 2 * held_), long(num_blocks_) * bs_);
    const size_t w = size_t(c_.kv_heads) * c_.head_dim;
    for (int l = 0; l < c_.layers; l++) {
        K_[l].resize(n * w, 0);
        V_[l].resize(n * w, 0);
    }
    held_ = n;
}

void Model::forward(std::vector<Slot>& slots, bool logits) {
    const int H = c_.hidden, I = c_.intermediate, hd = c_.head_dim, nkv = c_.kv_heads, g = c_.heads / c_.kv_heads;
    const int Q = c_.heads * hd, KV = nkv * hd;
    const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(hd)));
    std::vector<float> qf(hd);
    for (int l = 0; l < c_.layers; l++) {
        const Layer& L = L_[l];
        // Every slot writes its cache rows of the layer before any slot reads (as the oracle).
        for (Slot& s : slots) {
            if (l == 0) {
                s.x.assign(embed_.begin() + long(s.token) * H, embed_.begin() + long(s.token + 1) * H);
                rope_table(c_.theta, hd, s.pos, s.cos, s.sin);
            } else {
                add(s.x, s.o);
            }
            s.a.resize(H);
            rmsnorm(s.a.data(), s.x.data(), L.in_norm.data(), H, c_.eps);
            widen(xf_, s.a);
            matvec(s.q, L.q, xf_, Q, H);
            matvec(s.k, L.k, xf_, KV, H);
            matvec(s.v, L.v, xf_, KV, H);
            const long r = row(*s.blocks, s.pos);
            hold(r + 1);
            for (int j = 0; j < nkv; j++) {
                rmsnorm(&s.k[j * hd], &s.k[j * hd], L.k_norm.data(), hd, c_.eps);
                rope(&s.k[j * hd], s.cos, s.sin, hd);
            }
            std::copy(s.k.begin(), s.k.end(), K_[l].begin() + r * KV);
            std::copy(s.v.begin(), s.v.end(), V_[l].begin() + r * KV);
        }
        for (Slot& s : slots) {
            const int n = s.pos + 1;
            probs_.resize(n);
            s.attn.resize(Q);
            for (int h = 0; h < c_.heads; h++) {
                const int kvh = h / g;
                bf16* q = &s.q[h * hd];
                rmsnorm(q, q, L.q_norm.data(), hd, c_.eps);
                rope(q, s.cos, s.sin, hd);
                for (int d = 0; d < hd; d++) qf[d] = W(q[d]);
                // Scores over rows 0..pos: what the cache holds there (zero where never written).
                float m = -std::numeric_limits<float>::infinity();
                for (int t = 0; t < n; t++) {
                    const long rt = row(*s.blocks, t);
                    const float raw = rt < held_ ? dot(&K_[l][rt * KV + kvh * hd], qf.data(), hd) : 0.0f;
                    const float sc = R(R(raw) * scale);
                    probs_[t] = sc;
                    if (sc > m) m = sc;
                }
                float acc[kLanes] = {};
                for (int t = 0; t < n; t++) {
                    const float e = static_cast<float>(std::exp(static_cast<double>(probs_[t] - m)));
                    probs_[t] = e;
                    acc[t % kLanes] += e;
                }
                const float sum = fold(acc);
                for (int t = 0; t < n; t++) probs_[t] = R(probs_[t] / sum);
                for (int d = 0; d < hd; d++) {
                    float lanes[kLanes] = {};
                    for (int t = 0; t < n; t++) {
                        const long rt = row(*s.blocks, t);
                        const float v = rt < held_ ? W(V_[l][rt * KV + kvh * hd + d]) : 0.0f;
                        lanes[t % kLanes] += probs_[t] * v;
                    }
                    s.attn[h * hd + d] = B(fold(lanes));
                }
            }
            widen(xf_, s.attn);
            matvec(s.o, L.o, xf_, H, Q);
            add(s.x, s.o);
            rmsnorm(s.a.data(), s.x.data(), L.post_norm.data(), H, c_.eps);
            widen(xf_, s.a);
            matvec(s.gate, L.gate, xf_, I, H);
            matvec(s.up, L.up, xf_, I, H);
            for (int i = 0; i < I; i++) s.gate[i] = B(R(silu(W(s.gate[i]))) * W(s.up[i]));
            widen(xf_, s.gate);
            matvec(s.o, L.down, xf_, H, I);
        }
    }
    for (Slot& s : slots) {
        if (!logits) break;
        add(s.x, s.o);
        rmsnorm(s.a.data(), s.x.data(), norm_.data(), H, c_.eps);
        widen(xf_, s.a);
        std::vector<bf16> lg;
        matvec(lg, lm_head_, xf_, c_.vocab, H);
        s.logits.resize(c_.vocab);
        for (int i = 0; i < c_.vocab; i++) s.logits[i] = W(lg[i]);
    }
}

Output Model::output(const Slot& s, int seq) const {
    Output o;
    o.seq = seq;
    o.pos = s.pos;
    int best = -1;  // the first largest logit, NaNs skipped (offcard's Argmax)
    for (int i = 0; i < c_.vocab; i++) {
        const float x = s.logits[i];
        if (x != x) continue;
        if (best < 0 || x > s.logits[best]) best = i;
    }
    o.token = best < 0 ? 0 : best;
    o.logits.resize(c_.vocab);
    for (int i = 0; i < c_.vocab; i++) o.logits[i] = B(s.logits[i]);  // exact: they are bf16 values
    return o;
}

std::vector<Output> Model::prefill(int seq, int start, const std::vector<int32_t>& tokens, const std::vector<int32_t>& blocks) {
    const int T = static_cast<int>(tokens.size());
    if (T == 0) throw std::runtime_error("no tokens");
    if (start < 0) throw std::runtime_error("negative start " + std::to_string(start));
    for (int32_t t : tokens) check_token(t);
    check_table(blocks, start + T - 1);
    // Full rows of every position unless the reply would be too long.
    const bool last_only = long(T) * c_.vocab * 8 / 3 > kMaxReply;
    std::vector<Output> outs;
    std::vector<Slot> one(1);
    for (int i = 0; i < T; i++) {  // position by position, each reading rows 0..p
        one[0].token = tokens[i];
        one[0].pos = start + i;
        one[0].blocks = &blocks;
        const bool want = !last_only || i == T - 1;
        forward(one, want);
        if (want) outs.push_back(output(one[0], seq));
    }
    return outs;
}

// prefill_from writes exactly its positions: no tile padding (offcard's
// oracle pads only an admit's last tile, model.hpp).
std::vector<Output> Model::prefill_from(const PrefillFrom& p) { return prefill(p.seq, p.start, p.tokens, p.blocks); }

std::vector<std::vector<Output>> Model::verify(const std::vector<VerifyStep>& batch) {
    size_t rounds = 0;
    for (size_t i = 0; i < batch.size(); i++) {  // everything checked before anything is written
        for (size_t j = 0; j < i; j++)
            if (batch[j].seq == batch[i].seq) throw std::runtime_error("sequence " + std::to_string(batch[i].seq) + " twice in one verify batch");
        if (batch[i].tokens.empty()) throw std::runtime_error("verify of sequence " + std::to_string(batch[i].seq) + " with no tokens");
        for (int32_t t : batch[i].tokens) check_token(t);
        check_table(batch[i].blocks, batch[i].pos + static_cast<int>(batch[i].tokens.size()) - 1);
        rounds = std::max(rounds, batch[i].tokens.size());
    }
    std::vector<std::vector<Output>> outs(batch.size());
    std::vector<Slot> slots;
    std::vector<size_t> entry;  // the batch entry of each slot of the round
    for (size_t j = 0; j < rounds; j++) {  // round j: position pos+j of every entry with more than j tokens
        slots.clear();
        entry.clear();
        for (size_t i = 0; i < batch.size(); i++) {
            if (j >= batch[i].tokens.size()) continue;
            Slot s;
            s.token = batch[i].tokens[j];
            s.pos = batch[i].pos + static_cast<int>(j);
            s.blocks = &batch[i].blocks;
            slots.push_back(std::move(s));
            entry.push_back(i);
        }
        forward(slots);
        for (size_t n = 0; n < slots.size(); n++) outs[entry[n]].push_back(output(slots[n], batch[entry[n]].seq));
    }
    return outs;
}

void Model::copy_blocks(const std::vector<BlockCopy>& copies) {
    std::vector<bool> src(num_blocks_), dst(num_blocks_);
    for (const BlockCopy& c : copies) {  // everything checked before anything is written
        for (int32_t b : {c.src, c.dst})
            if (b < 0 || b >= num_blocks_)
                throw std::runtime_error("block copy " + std::to_string(c.src) + "->" + std::to_string(c.dst) + ": block " + std::to_string(b) + " outside the cache of " + std::to_string(num_blocks_) + " blocks");
        if (dst[c.dst]) throw std::runtime_error("block " + std::to_string(c.dst) + " is the destination of two copies");
        src[c.src] = dst[c.dst] = true;
    }
    for (const BlockCopy& c : copies)
        if (dst[c.src]) throw std::runtime_error("block " + std::to_string(c.src) + " is both a source and a destination");
    const size_t w = size_t(c_.kv_heads) * c_.head_dim;
    for (const BlockCopy& c : copies) {
        const long s0 = long(c.src) * bs_, d0 = long(c.dst) * bs_;
        if (s0 >= held_ && d0 >= held_) continue;  // both read as zero
        hold(d0 + bs_);
        for (int l = 0; l < c_.layers; l++) {
            for (auto* mem : {&K_[l], &V_[l]}) {
                for (long r = 0; r < bs_; r++) {  // a source row past the held memory reads as zero
                    auto to = mem->begin() + (d0 + r) * long(w);
                    if (s0 + r < held_)
                        std::copy(mem->begin() + (s0 + r) * long(w), mem->begin() + (s0 + r + 1) * long(w), to);
                    else
                        std::fill(to, to + long(w), 0);
                }
            }
        }
    }
}

std::vector<Output> Model::admit(const Admit& a) {
    const int T = static_cast<int>(a.prompt.size());
    if (T == 0) throw std::runtime_error("empty prompt");
    std::vector<Output> outs = prefill(a.seq, 0, a.prompt, a.blocks);
    if (pad_prompt_) {  // zero the rest of the prompt's last 32-row tile (model.hpp)
        const size_t w = size_t(c_.kv_heads) * c_.head_dim;
        for (int p = T; p < (T + kTile - 1) / kTile * kTile && size_t(p / bs_) < a.blocks.size(); p++) {
            const long r = row(a.blocks, p);
            if (a.blocks[p / bs_] < 0 || a.blocks[p / bs_] >= num_blocks_ || r >= held_) continue;
            for (int l = 0; l < c_.layers; l++) {
                std::fill(K_[l].begin() + r * w, K_[l].begin() + (r + 1) * w, 0);
                std::fill(V_[l].begin() + r * w, V_[l].begin() + (r + 1) * w, 0);
            }
        }
    }
    return outs;
}

std::vector<Output> Model::decode(const std::vector<Step>& batch) {
    for (size_t i = 0; i < batch.size(); i++) {
        for (size_t j = 0; j < i; j++)
            if (batch[j].seq == batch[i].seq) throw std::runtime_error("sequence " + std::to_string(batch[i].seq) + " twice in one batch");
        check_token(batch[i].token);
        check_table(batch[i].blocks, batch[i].pos);
    }
    std::vector<Slot> slots(batch.size());
    for (size_t i = 0; i < batch.size(); i++) {
        slots[i].token = batch[i].token;
        slots[i].pos = batch[i].pos;
        slots[i].blocks = &batch[i].blocks;
    }
    forward(slots);
    std::vector<Output> outs;
    for (size_t i = 0; i < batch.size(); i++) outs.push_back(output(slots[i], batch[i].seq));
    return outs;
}

}  // namespace offcard
