// offcard_protocol.hpp: offcard's line protocol (version 3) for a C++ engine.
//
// Header only; C++17, the standard library and nlohmann/json (Debian:
// nlohmann-json3-dev). An engine derives from offcard::Engine, and its main
// is
//
//     int main() {
//         return offcard::serve(std::cin, std::cout, [](const offcard::Hello& h, offcard::Caps& caps) {
//             caps.engine = "my engine";
//             return std::make_unique<MyEngine>(h);
//         });
//     }
//
// offcard starts the engine as a child process and writes one JSON request
// per line on its stdin; serve answers each with one JSON line on stdout
// (log to stderr: stdout carries replies only). An exception thrown by the
// engine becomes an error reply ({"ok":false,"error":...}): offcard reports
// the engine refusing that call and the session goes on.
//
// offcard is the scheduler: it owns the block pool and hands every call the
// sequence's block table (blocks[i] holds positions i*block_size ...), as
// vLLM's scheduler does. The README's "Put your engine under test" states
// the protocol; this header implements the tokens-and-full-logits subset
// (no device observations) and the serving calls of version 3
// (prefill_from, verify, copy_blocks): an engine lists those it implements
// in Caps::serves, and offcard sends no other. Rollback and preemption need
// no call (the README says why). To a hello of version 1 or 2 it answers
// that version and serves nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace offcard {

// kProtocolVersion is the newest version this header speaks: a hello of
// version v is answered with min(v, kProtocolVersion).
constexpr int kProtocolVersion = 3;

// ModelSpec names the weights: a synthetic preset and its seed, the Hugging
// Face config.json object, and a directory holding config.json +
// model.safetensors (bf16) of exactly those weights.
struct ModelSpec {
    std::string preset;
    std::string seed;
    nlohmann::json config;
    std::string weights;
};

// Hints are the scenario's options for offcard's own engine. An engine may
// ignore them; prefill matters for what a cache row past a prompt holds
// (see the reference engine's model.hpp).
struct Hints {
    std::string width, mode, prefill, arch;
    int recapture_every = 0;
    bool strict = false, verify = false;
    // trace_region: the device's trace region in bytes (ttnn's
    // trace_region_size at open; 0: ttnn's default, no region).
    std::uint64_t trace_region = 0;
};

// Hello is the first request: what to run.
struct Hello {
    int version = 0;
    ModelSpec model;
    int block_size = 0;  // positions per KV-cache block
    int num_blocks = 0;  // blocks in the KV cache (block ids 0..num_blocks-1)
    int capacity = 0;    // most sequences live at once
    Hints hints;
};

// Admit: prefill prompt at positions 0..prompt.size()-1 of sequence seq.
struct Admit {
    int seq = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> blocks;
};

// Step is one sequence's entry of a decode batch: token at position pos.
struct Step {
    int seq = 0;
    int32_t token = 0;
    int pos = 0;
    std::vector<int32_t> blocks;
};

// PrefillFrom (version 3): compute positions start..start+tokens.size()-1
// of sequence seq over KV already in the cache: positions 0..start-1 are
// read through blocks (a prefix-cache hit's shared blocks, or this
// sequence's earlier chunks of a chunked prefill). start 0 is an admit.
struct PrefillFrom {
    int seq = 0;
    int start = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
};

// VerifyStep (version 3) is one sequence's entry of a verify batch: k >= 1
// tokens at positions pos..pos+k-1, answered as k decode steps would be.
struct VerifyStep {
    int seq = 0;
    std::vector<int32_t> tokens;
    int pos = 0;
    std::vector<int32_t> blocks;
};

// BlockCopy (version 3): every layer's K and V of block src, all rows,
// written over block dst.
struct BlockCopy {
    int32_t src = 0, dst = 0;
};

// Output is one processed position: the greedy token and, when the engine
// offers full logits, the row as bf16 bit patterns (vocab_size values).
struct Output {
    int seq = 0;
    int pos = 0;
    int32_t token = 0;
    std::vector<uint16_t> logits;
};

// Caps is what the engine answers to hello.
struct Caps {
    std::string engine;          // a name for reports
    std::string logits = "full"; // "full" (every Output carries its row) or "none" (tokens only)
    bool exact = false;          // claims bit-exactness with offcard's oracle
    // serves (version 3): the serving calls the engine implements, of
    // "prefill_from", "verify", "copy_blocks"; offcard sends no other.
    std::vector<std::string> serves;
};

// Engine is what serve drives. admit answers every prompt position in order,
// or the last one only; decode one Output per batch entry, in order.
class Engine {
public:
    virtual ~Engine() = default;
    virtual std::vector<Output> admit(const Admit& a) = 0;
    virtual std::vector<Output> decode(const std::vector<Step>& batch) = 0;
    // finish: the sequence is done, its blocks are offcard's again.
    virtual void finish(int seq) { (void)seq; }
    // reset: a re-capture request (drop a captured trace); the next step starts cold.
    virtual void reset() {}
    // The serving calls (version 3), sent only when Caps::serves lists them.
    // prefill_from answers every position in order, or the last one only.
    virtual std::vector<Output> prefill_from(const PrefillFrom& p) {
        (void)p;
        throw std::runtime_error("prefill_from is not implemented");
    }
    // verify answers, per batch entry, its k Outputs in position order.
    virtual std::vector<std::vector<Output>> verify(const std::vector<VerifyStep>& batch) {
        (void)batch;
        throw std::runtime_error("verify is not implemented");
    }
    // copy_blocks performs every copy; the copies are independent (no block
    // is the dst of two, or both a src and a dst): refuse a list that is
    // not, changing nothing.
    virtual void copy_blocks(const std::vector<BlockCopy>& copies) {
        (void)copies;
        throw std::runtime_error("copy_blocks is not implemented");
    }
};

// OpenFn builds the engine a hello asks for and fills in its caps.
using OpenFn = std::function<std::unique_ptr<Engine>(const Hello&, Caps&)>;

// bf16_bits rounds a float to bfloat16 (round to nearest even; a NaN stays
// a quiet NaN) and returns its bit pattern.
inline uint16_t bf16_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (x != x) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

// bf16_float widens a bfloat16 bit pattern to float (exact).
inline float bf16_float(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// encode_logits is a row as the wire carries it: little-endian bf16, base64 (std, padded).
inline std::string encode_logits(const std::vector<uint16_t>& row) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<uint8_t> b(2 * row.size());
    for (size_t i = 0; i < row.size(); i++) {
        b[2 * i] = static_cast<uint8_t>(row[i] & 0xff);
        b[2 * i + 1] = static_cast<uint8_t>(row[i] >> 8);
    }
    std::string s;
    s.reserve((b.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= b.size(); i += 3) {
        uint32_t v = (uint32_t(b[i]) << 16) | (uint32_t(b[i + 1]) << 8) | b[i + 2];
        s += tab[v >> 18];
        s += tab[(v >> 12) & 63];
        s += tab[(v >> 6) & 63];
        s += tab[v & 63];
    }
    if (size_t rest = b.size() - i) {
        uint32_t v = uint32_t(b[i]) << 16 | (rest == 2 ? uint32_t(b[i + 1]) << 8 : 0);
        s += tab[v >> 18];
        s += tab[(v >> 12) & 63];
        s += rest == 2 ? tab[(v >> 6) & 63] : '=';
        s += '=';
    }
    return s;
}

namespace detail {

inline std::vector<int32_t> ids(const nlohmann::json& j, const char* key) {
    if (!j.contains(key)) return {};
    return j.at(key).get<std::vector<int32_t>>();
}

inline Hello parse_hello(const nlohmann::json& r) {
    Hello h;
    h.version = r.value("version", 0);
    const auto& m = r.at("model");
    h.model.preset = m.value("preset", "");
    h.model.seed = m.contains("seed") ? (m["seed"].is_string() ? m["seed"].get<std::string>() : m["seed"].dump()) : "";
    h.model.config = m.value("config", nlohmann::json::object());
    h.model.weights = m.value("weights", "");
    h.block_size = r.at("block_size").get<int>();
    h.num_blocks = r.at("num_blocks").get<int>();
    h.capacity = r.value("capacity", 0);
    if (r.contains("hints") && r["hints"].is_object()) {
        const auto& x = r["hints"];
        h.hints.width = x.value("width", "");
        h.hints.mode = x.value("mode", "");
        h.hints.prefill = x.value("prefill", "");
        h.hints.arch = x.value("arch", "");
        h.hints.recapture_every = x.value("recapture_every", 0);
        h.hints.strict = x.value("strict", false);
        h.hints.verify = x.value("verify", false);
        h.hints.trace_region = x.value("trace_region", std::uint64_t{0});
    }
    return h;
}

inline nlohmann::json outputs_json(const std::vector<Output>& outs, const Caps& caps) {
    auto a = nlohmann::json::array();
    for (const auto& o : outs) {
        nlohmann::json j = {{"seq", o.seq}, {"pos", o.pos}, {"token", o.token}};
        if (caps.logits == "full") j["logits"] = encode_logits(o.logits);
        a.push_back(std::move(j));
    }
    return a;
}

}  // namespace detail

// serve speaks the protocol on in and out until bye or the end of in.
// Returns the process exit code (0).
inline int serve(std::istream& in, std::ostream& out, const OpenFn& open) {
    std::unique_ptr<Engine> eng;
    Caps caps;
    int version = 0;  // the session's, agreed at hello
    std::string line;
    while (std::getline(in, line)) {
        nlohmann::json rep = {{"ok", true}};
        bool bye = false;
        try {
            const auto req = nlohmann::json::parse(line);
            const std::string op = req.at("op").get<std::string>();
            if (op == "bye") {
                bye = true;
            } else if (op == "hello") {
                if (eng) throw std::runtime_error("hello twice");
                Hello h = detail::parse_hello(req);
                if (h.version < 1)
                    throw std::runtime_error("protocol version " + std::to_string(h.version) + ": this engine speaks 1 to " + std::to_string(kProtocolVersion));
                Caps c;
                eng = open(h, c);
                caps = c;
                version = std::min(h.version, kProtocolVersion);
                if (version < 3) caps.serves.clear();  // the serving calls are version 3's
                rep["version"] = version;
                if (!caps.engine.empty()) rep["engine"] = caps.engine;
                rep["logits"] = caps.logits;
                if (caps.exact) rep["exact"] = true;
                if (!caps.serves.empty()) rep["serves"] = caps.serves;
            } else if (!eng) {
                throw std::runtime_error(op + " before hello");
            } else if (op == "admit") {
                Admit a{req.at("seq").get<int>(), detail::ids(req, "prompt"), detail::ids(req, "blocks")};
                rep["outputs"] = detail::outputs_json(eng->admit(a), caps);
            } else if (op == "decode") {
                std::vector<Step> batch;
                for (const auto& s : req.value("batch", nlohmann::json::array()))
                    batch.push_back(Step{s.at("seq").get<int>(), s.at("token").get<int32_t>(), s.at("pos").get<int>(), detail::ids(s, "blocks")});
                rep["outputs"] = detail::outputs_json(eng->decode(batch), caps);
            } else if (op == "finish") {
                eng->finish(req.at("seq").get<int>());
            } else if (op == "reset") {
                eng->reset();
            } else if (op == "prefill_from" || op == "verify" || op == "copy_blocks") {
                if (std::find(caps.serves.begin(), caps.serves.end(), op) == caps.serves.end())
                    throw std::runtime_error(op + " is not served (protocol version " + std::to_string(version) + ")");
                if (op == "prefill_from") {
                    PrefillFrom p{req.at("seq").get<int>(), req.at("start").get<int>(), detail::ids(req, "tokens"), detail::ids(req, "blocks")};
                    rep["outputs"] = detail::outputs_json(eng->prefill_from(p), caps);
                } else if (op == "verify") {
                    std::vector<VerifyStep> batch;
                    for (const auto& s : req.value("batch", nlohmann::json::array()))
                        batch.push_back(VerifyStep{s.at("seq").get<int>(), detail::ids(s, "tokens"), s.at("pos").get<int>(), detail::ids(s, "blocks")});
                    auto outs = eng->verify(batch);
                    if (outs.size() != batch.size()) throw std::runtime_error("verify: the engine answered " + std::to_string(outs.size()) + " entries of " + std::to_string(batch.size()));
                    std::vector<Output> flat;  // entry after entry, each in position order
                    for (auto& o : outs) flat.insert(flat.end(), o.begin(), o.end());
                    rep["outputs"] = detail::outputs_json(flat, caps);
                } else {
                    std::vector<BlockCopy> copies;
                    for (const auto& c : req.value("copies", nlohmann::json::array()))
                        copies.push_back(BlockCopy{c.at("src").get<int32_t>(), c.at("dst").get<int32_t>()});
                    eng->copy_blocks(copies);
                }
            } else {
                throw std::runtime_error("unknown op \"" + op + "\"");
            }
        } catch (const std::exception& e) {
            rep = {{"ok", false}, {"error", e.what()}};
        }
        out << rep.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        out.flush();
        if (bye) break;
    }
    return 0;
}

}  // namespace offcard
