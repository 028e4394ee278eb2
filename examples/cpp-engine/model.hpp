// model.hpp: the reference engine's Model, Qwen3 on the CPU.
//
// Replace this class with calls into ttnn (or your engine's runtime): load
// the weights the hello names in the constructor, run admit as a prefill of
// the prompt into the paged KV cache at the block table's rows, decode as
// one step of the batch, and keep offcard_protocol.hpp and main.cpp.
//
// The serving calls (protocol version 3), as offcard's oracle runs them:
// prefill_from computes its positions one by one as admit does, reading
// the rows below start through the table as the cache holds them (a
// prefix hit's shared blocks, the earlier chunks); verify runs round j of
// the batch (position pos+j of each entry with more than j tokens) as one
// decode batch, so its outputs are those of k decode steps; copy_blocks
// copies every layer's K and V rows of each src block over its dst.
// Rollback and preemption need no call: every call names its positions,
// and a position is written before any step reads it.
//
// This one computes in float with bf16 rounding at the op boundaries, in
// the op order and accumulation order of offcard's oracle (ref): each dot
// product sums in 16 float32 lanes (lane j%16) folded as a tree; it is
// judged by offcard's tolerant judge (it does not claim bit-exactness).
//
// What the KV cache holds where the sequence never wrote (protocol v1
// leaves it to the engine; this is what offcard's oracle assumes today):
//   - fresh cache memory reads as zero;
//   - finish and reset clear nothing: a finished sequence's rows stay in
//     its blocks, and a sequence later given those blocks reads them where
//     it has not written (a decode whose first position jumps ahead, skip=
//     in a script, reads rows len..pos-1 it never wrote);
//   - when the hello's hints say prefill=program, an admit of T tokens also
//     writes zeros at positions T .. roundup(T, 32)-1 of the sequence (as
//     far as its block table reaches): offcard's own engine prefills with
//     paged_fill_cache, which writes the prompt's last 32-row tile whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offcard_protocol.hpp"

namespace offcard {

// Config is the part of a Hugging Face Qwen3 config.json the model reads.
struct Config {
    int hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
    float eps = 1e-6f;
    double theta = 1e6;
    bool tied = false;
    static Config parse(const nlohmann::json& c);
};

class Model : public Engine {
public:
    explicit Model(const Hello& h);
    std::vector<Output> admit(const Admit& a) override;
    std::vector<Output> decode(const std::vector<Step>& batch) override;
    std::vector<Output> prefill_from(const PrefillFrom& p) override;
    std::vector<std::vector<Output>> verify(const std::vector<VerifyStep>& batch) override;
    void copy_blocks(const std::vector<BlockCopy>& copies) override;

private:
    using bf16 = uint16_t;
    struct Layer {
        std::vector<bf16> in_norm, q, k, v, q_norm, k_norm, o, post_norm, gate, up, down;
    };
    // Slot is one position being computed: its token, position, block
    // table and the activations of the current layer.
    struct Slot {
        int32_t token = 0;
        int pos = 0;
        const std::vector<int32_t>* blocks = nullptr;
        std::vector<bf16> x, a, q, k, v, attn, o, gate, up, cos, sin;
        std::vector<float> logits;
    };

    void check_table(const std::vector<int32_t>& blocks, int last) const;
    void check_token(int32_t t) const;
    long row(const std::vector<int32_t>& blocks, int pos) const;  // block*bs + pos%bs
    void hold(long rows);                                         // grows the cache to cover rows
    void forward(std::vector<Slot>& slots, bool logits = true);  // logits: compute the rows too
    Output output(const Slot& s, int seq) const;
    // prefill runs tokens at positions start.. one by one (admit, prefill_from).
    std::vector<Output> prefill(int seq, int start, const std::vector<int32_t>& tokens, const std::vector<int32_t>& blocks);

    Config c_;
    int bs_ = 0, num_blocks_ = 0;
    bool pad_prompt_ = false;
    std::vector<bf16> embed_, norm_, lm_head_;
    std::vector<Layer> L_;
    // The paged KV cache per layer, [row][kv head][head_dim], row = block*bs
    // + pos%bs; memory is held for rows [0, held_) and grown as writes reach
    // higher rows (rows past it read as zero).
    std::vector<std::vector<bf16>> K_, V_;
    long held_ = 0;
    std::vector<float> xf_, probs_;
};

}  // namespace offcard
