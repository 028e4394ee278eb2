#!/usr/bin/env python3
"""A Python engine behind offcard's line protocol (stdlib only).

    offcard check --engine 'python3 examples/python-engine/engine.py'

Requests arrive on stdin, one JSON object per line; each gets one JSON reply
line on stdout. This toy runs Qwen3 itself, in float64 with bf16 rounding at
the op boundaries, over a paged KV cache laid out by offcard's block tables;
a real engine replaces Model with calls into ttnn / tt_transformers and keeps
the loop. It offers tokens and full logit rows and no device observations.
"""
import base64, json, math, struct, sys
from array import array
from operator import mul


def bf16(xs):  # round a list of floats to bfloat16 (nearest even)
    u = array('I', struct.pack('<%df' % len(xs), *xs))
    for i, x in enumerate(u):
        u[i] = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16 << 16) & 0xFFFFFFFF
    return array('f', u.tobytes()).tolist()


def load(path):  # safetensors with bf16 tensors -> {name: (shape, floats)}
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        head, data = json.loads(f.read(n)), f.read()
    out = {}
    for name, t in head.items():
        if name == '__metadata__':
            continue
        a, b = t['data_offsets']
        h = array('H', data[a:b])
        out[name] = (t['shape'], array('f', array('I', (x << 16 for x in h)).tobytes()).tolist())
    return out


class Model:
    def __init__(self, hello):
        c, self.bs = hello['model']['config'], hello['block_size']
        self.hd, self.nh, self.nkv = c['head_dim'], c['num_attention_heads'], c['num_key_value_heads']
        self.eps, self.theta, self.layers = c['rms_norm_eps'], c['rope_theta'], c['num_hidden_layers']
        w = load(hello['model']['weights'] + '/model.safetensors')
        self.w = {k: self.rows(v) if len(v[0]) == 2 else v[1] for k, v in w.items()}
        self.w.setdefault('lm_head.weight', self.w['model.embed_tokens.weight'])
        self.k, self.v = {}, {}  # (layer, block, row) -> a position's keys / values

    @staticmethod
    def rows(t):
        (n, m), x = t
        return [x[i * m:(i + 1) * m] for i in range(n)]

    def lin(self, name, a):
        return bf16([sum(map(mul, row, a)) for row in self.w[name]])

    def norm(self, x, weight):
        s = 1 / math.sqrt(sum(map(mul, x, x)) / len(x) + self.eps)
        return bf16(list(map(mul, weight, bf16([v * s for v in x]))))

    def rope(self, x, pos):
        h = len(x) // 2
        f = [pos / self.theta ** (2 * i / len(x)) for i in range(h)]
        c, s = bf16([math.cos(v) for v in f]), bf16([math.sin(v) for v in f])
        lo = [a + b for a, b in zip(bf16(list(map(mul, x[:h], c))), bf16([-v * w for v, w in zip(x[h:], s)]))]
        hi = [a + b for a, b in zip(bf16(list(map(mul, x[h:], c))), bf16(list(map(mul, x[:h], s))))]
        return bf16(lo + hi)

    def step(self, tok, pos, blocks):
        hd, g, L = self.hd, self.nh // self.nkv, 'model.layers.%d.'
        x = self.w['model.embed_tokens.weight'][tok]
        for l in range(self.layers):
            p = L % l
            a = self.norm(x, self.w[p + 'input_layernorm.weight'])
            q, k, v = (self.lin(p + 'self_attn.%s_proj.weight' % n, a) for n in 'qkv')
            qs = [self.rope(self.norm(q[i * hd:(i + 1) * hd], self.w[p + 'self_attn.q_norm.weight']), pos) for i in range(self.nh)]
            ks = [self.rope(self.norm(k[i * hd:(i + 1) * hd], self.w[p + 'self_attn.k_norm.weight']), pos) for i in range(self.nkv)]
            at = (l, blocks[pos // self.bs], pos % self.bs)  # the paged cache slot of this position
            self.k[at], self.v[at] = ks, [v[i * hd:(i + 1) * hd] for i in range(self.nkv)]
            zero = [[0.0] * hd] * self.nkv  # a row never written reads as fresh (zero) memory
            kc = [self.k.get((l, blocks[t // self.bs], t % self.bs), zero) for t in range(pos + 1)]
            vc = [self.v.get((l, blocks[t // self.bs], t % self.bs), zero) for t in range(pos + 1)]
            out = []
            for i, qh in enumerate(qs):
                sc = bf16([v / math.sqrt(hd) for v in bf16([sum(map(mul, qh, k[i // g])) for k in kc])])
                e = [math.exp(v - max(sc)) for v in sc]
                pr = bf16([v / sum(e) for v in e])
                out += bf16([sum(pt * v[i // g][d] for pt, v in zip(pr, vc)) for d in range(hd)])
            x = bf16(list(map(float.__add__, x, self.lin(p + 'self_attn.o_proj.weight', out))))
            a = self.norm(x, self.w[p + 'post_attention_layernorm.weight'])
            gate, up = self.lin(p + 'mlp.gate_proj.weight', a), self.lin(p + 'mlp.up_proj.weight', a)
            h = bf16(list(map(mul, bf16([v / (1 + math.exp(-v)) for v in gate]), up)))
            x = bf16(list(map(float.__add__, x, self.lin(p + 'mlp.down_proj.weight', h))))
        logits = self.lin('lm_head.weight', self.norm(x, self.w['model.norm.weight']))
        row = array('I', struct.pack('<%df' % len(logits), *logits))
        return {'token': max(range(len(logits)), key=lambda i: (logits[i], -i)),
                'logits': base64.b64encode(array('H', (u >> 16 for u in row)).tobytes()).decode()}


def main():
    model = None
    for line in sys.stdin:
        req = json.loads(line)
        op, rep = req['op'], {'ok': True}
        try:
            if op == 'hello':
                model = Model(req)
                rep.update(version=1, engine='python toy', logits='full')
            elif op == 'admit':
                toks = req['prompt']
                rep['outputs'] = [dict(seq=req['seq'], pos=i, **model.step(t, i, req['blocks'])) for i, t in enumerate(toks)]
            elif op == 'decode':
                rep['outputs'] = [dict(seq=s['seq'], pos=s['pos'], **model.step(s['token'], s['pos'], s['blocks'])) for s in req['batch']]
            elif op == 'bye':
                print(json.dumps(rep), flush=True)
                return
            # finish and reset: nothing to do (the cache is addressed by block tables)
        except Exception as e:  # an error reply; offcard reports it as the engine refusing a call
            rep = {'ok': False, 'error': '%s: %s' % (type(e).__name__, e)}
        print(json.dumps(rep), flush=True)


if __name__ == '__main__':
    main()
