#!/usr/bin/env python3
"""Cross-check fixtures for offcard's ref oracle, computed by PyTorch.

A hand-written mirror of Hugging Face transformers' eager Qwen3 path
(src/transformers/models/qwen3/modeling_qwen3.py: Qwen3RMSNorm,
Qwen3RotaryEmbedding, apply_rotary_pos_emb, repeat_kv,
eager_attention_forward, Qwen3MLP, Qwen3ForCausalLM), run in bf16 on the CPU
with torch's own kernels (Debian's python3-torch). It shares no code with
offcard: it reads config.json + model.safetensors (written by
ref/testdata/crosscheck/export), generates greedily from a prompt, and
writes, for every position of the final token sequence, the greedy token and
the top-k logits (float32 of the bf16 logits) as JSON.

Usage: hf_eager.py MODEL_DIR OUT.json --name NAME --prompt 1,2,3 --steps N [--top K]
"""

import argparse
import json
import struct
import sys

import torch

DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}


def load_safetensors(path):
    """The safetensors format: u64 LE header length, JSON header, raw data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        buf = bytearray(data[base + lo : base + hi])
        out[name] = torch.frombuffer(buf, dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


class RMSNorm:
    """Qwen3RMSNorm: fp32 variance and rsqrt, cast to bf16, times the weight in bf16."""

    def __init__(self, weight, eps):
        self.weight, self.eps = weight, eps

    def __call__(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(cfg, n, dtype):
    """Qwen3RotaryEmbedding (default rope): fp32 inv_freq and angles, cos/sin cast to bf16."""
    d = cfg["head_dim"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    pos = torch.arange(n, dtype=torch.float32)
    freqs = (inv_freq[None, :, None].float() @ pos[None, None, :].float()).transpose(1, 2)[0]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def repeat_kv(x, n_rep):
    b, h, s, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


class Qwen3:
    def __init__(self, cfg, w):
        self.cfg = cfg
        self.w = w
        self.eps = cfg["rms_norm_eps"]
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = self.embed if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
        self.norm = RMSNorm(w["model.norm.weight"], self.eps)

    def layer(self, i, x, cos, sin, mask):
        c, w, p = self.cfg, self.w, f"model.layers.{i}."
        nh, nkv, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        lin = torch.nn.functional.linear
        residual = x
        h = RMSNorm(w[p + "input_layernorm.weight"], self.eps)(x)
        b, s, _ = h.shape
        q = lin(h, w[p + "self_attn.q_proj.weight"]).view(b, s, nh, d)
        k = lin(h, w[p + "self_attn.k_proj.weight"]).view(b, s, nkv, d)
        v = lin(h, w[p + "self_attn.v_proj.weight"]).view(b, s, nkv, d)
        q = RMSNorm(w[p + "self_attn.q_norm.weight"], self.eps)(q).transpose(1, 2)
        k = RMSNorm(w[p + "self_attn.k_norm.weight"], self.eps)(k).transpose(1, 2)
        v = v.transpose(1, 2)
        # apply_rotary_pos_emb (unsqueeze_dim=1)
        cu, su = cos[None, None], sin[None, None]
        q = (q * cu) + (rotate_half(q) * su)
        k = (k * cu) + (rotate_half(k) * su)
        # eager_attention_forward
        k = repeat_kv(k, nh // nkv)
        v = repeat_kv(v, nh // nkv)
        scaling = d**-0.5
        attn = torch.matmul(q, k.transpose(2, 3)) * scaling
        attn = attn + mask
        attn = torch.nn.functional.softmax(attn, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(attn, v).transpose(1, 2).contiguous().reshape(b, s, nh * d)
        x = residual + lin(out, w[p + "self_attn.o_proj.weight"])
        residual = x
        h = RMSNorm(w[p + "post_attention_layernorm.weight"], self.eps)(x)
        g = lin(h, w[p + "mlp.gate_proj.weight"])
        u = lin(h, w[p + "mlp.up_proj.weight"])
        m = torch.nn.functional.silu(g) * u
        return residual + lin(m, w[p + "mlp.down_proj.weight"])

    @torch.no_grad()
    def forward(self, ids, last_only=False):
        """Logits (bf16) of every position of ids, or of the last one."""
        s = len(ids)
        x = self.embed[torch.tensor(ids)][None]
        cos, sin = rope_tables(self.cfg, s, x.dtype)
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for i in range(self.cfg["num_hidden_layers"]):
            x = self.layer(i, x, cos, sin, mask)
        x = self.norm(x)
        if last_only:
            x = x[:, -1:]
        return torch.nn.functional.linear(x, self.lm_head)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--name", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(1)
    with open(a.model + "/config.json") as f:
        cfg = json.load(f)
    m = Qwen3(cfg, load_safetensors(a.model + "/model.safetensors"))
    ids = [int(t) for t in a.prompt.split(",")]
    # Greedy generation (argmax: the first index among equals).
    for _ in range(a.steps):
        logits = m.forward(ids, last_only=True)[-1].float()
        ids.append(int(torch.argmax(logits)))
    # The whole sequence in one forward: the logits of every position.
    logits = m.forward(ids).float()
    positions = []
    for p in range(len(ids)):
        row = logits[p]
        vals, top = torch.sort(row, descending=True, stable=True)
        positions.append({
            "pos": p,
            "token": int(torch.argmax(row)),
            "top_ids": [int(i) for i in top[: a.top]],
            "top_logits": [float(v) for v in vals[: a.top]],
        })
    doc = {
        "name": a.name,
        "generator": "ref/testdata/crosscheck/hf_eager.py (HF eager Qwen3 in bf16, torch %s, CPU)" % torch.__version__,
        "config": {k: cfg[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                         "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")},
        "prompt_len": len(ids) - a.steps,
        "tokens": ids,
        "positions": positions,
    }
    with open(a.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    import os
    os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    sys.exit(main())
