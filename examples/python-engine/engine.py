#!/usr/bin/env python3
"""A Python engine behind offcard's line protocol (version 3).

    offcard check --engine 'python3 examples/python-engine/engine.py'
    offcard check --engine 'python3 examples/python-engine/engine.py --stdlib'

Requests arrive on stdin, one JSON object per line; each gets one JSON reply
line on stdout (log to stderr). This reference runs Qwen3 itself over the
`weights` directory the hello names (config.json + model.safetensors, bf16),
in float with bf16 rounding at the op boundaries (the op order of offcard's
oracle `ref`), over a paged KV cache addressed by offcard's block tables. It
answers tokens and full logit rows and offers no device observations; it is
judged by the tolerant judge, not bit for bit.

To a hello of version 3 it answers 3 and serves the serving calls
(`serves`): prefill_from (positions start.. over KV already in the cache:
a prefix-cache hit, a later chunk of a chunked prefill, a preempted
sequence's recompute), verify (k tokens at pos..pos+k-1 per sequence, as k
decode rounds) and copy_blocks (a fork's copy-on-write: every layer's K and
V of a block over another). Rollback and preemption need no call: offcard
sends the accepted position next, and a preempted sequence is finished and
recomputed by prefill_from. To a hello of version 1 or 2 it answers that
version and serves nothing.

Two back ends compute the same thing: numpy when it is importable (Debian:
apt-get install python3-numpy, for /usr/bin/python3), the standard library
otherwise, or when --stdlib is given. A real engine replaces `Model` (its
constructor, prefill, decode, zero_rows and copy_block) with calls into
ttnn / tt_transformers and keeps `main`.

What the KV cache holds where the sequence never wrote (rows offcard keeps
out of its verdict; this engine does what offcard's oracle does):
  - fresh cache memory reads as zero;
  - `finish` and `reset` clear nothing: a finished sequence's rows stay in
    its blocks, and a later sequence given those blocks reads them where it
    has not written (a decode whose first position jumps ahead, `skip=` in a
    script, reads rows len..pos-1 it never wrote);
  - when the hello's hints say prefill=program, an admit of T tokens also
    writes zeros at positions T .. roundup(T, 32)-1 of the sequence (as far
    as its block table reaches): offcard's own engine prefills with
    paged_fill_cache, which writes the prompt's last 32-row tile whole.
"""
import base64, json, math, os, struct, sys
from array import array
from operator import mul

STDLIB = '--stdlib' in sys.argv[1:]
np = None
if not STDLIB:
    for v in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        os.environ.setdefault(v, '1')  # offcard runs cases in parallel: one core each
    try:
        import numpy as np
    except ImportError:
        pass

TILE = 32                 # paged_fill_cache writes whole 32-row tiles
MAX_REPLY = 16 << 20      # above this an admit answers its last position only


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of a .safetensors file."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        head, data = json.loads(f.read(n)), memoryview(f.read())
    return {k: (t['dtype'], t['shape'], data[t['data_offsets'][0]:t['data_offsets'][1]])
            for k, t in head.items() if k != '__metadata__'}


def tensor_names(c):
    """Hugging Face Qwen3 tensor names: embedding, final norm, lm_head, and per layer."""
    per = ['input_layernorm', 'self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj',
           'self_attn.q_norm', 'self_attn.k_norm', 'self_attn.o_proj',
           'post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj']
    return [['model.layers.%d.%s.weight' % (l, p) for p in per] for l in range(c['num_hidden_layers'])]


def to_bits(raw, dtype):  # a tensor's bytes -> float32 bit patterns (array 'I')
    if dtype == 'BF16':
        h = array('H')
        h.frombytes(raw)
        if sys.byteorder == 'big':
            h.byteswap()
        return array('I', (x << 16 for x in h))
    if dtype == 'F32':
        u = array('I')
        u.frombytes(raw)
        if sys.byteorder == 'big':
            u.byteswap()
        return u
    raise ValueError('tensor dtype %s: want BF16 or F32' % dtype)


def logits_b64(bits16):  # bf16 bit patterns (array 'H') -> the wire's base64
    if sys.byteorder == 'big':
        bits16 = array('H', bits16)
        bits16.byteswap()
    return base64.b64encode(bits16.tobytes()).decode()


class Shape:
    def __init__(self, hello):
        c = hello['model']['config']
        self.c, self.bs, self.num_blocks = c, hello['block_size'], hello['num_blocks']
        self.h, self.nh, self.nkv = c['hidden_size'], c['num_attention_heads'], c['num_key_value_heads']
        self.hd = c.get('head_dim') or self.h // self.nh
        self.g, self.layers, self.vocab = self.nh // self.nkv, c['num_hidden_layers'], c['vocab_size']
        self.eps = c['rms_norm_eps']
        self.theta = float(c.get('rope_theta') or c['rope_parameters']['rope_theta'])
        self.pad = ((hello.get('hints') or {}).get('prefill') == 'program')
        st = read_safetensors(os.path.join(hello['model']['weights'], 'model.safetensors'))
        if 'lm_head.weight' not in st:  # tied embeddings
            st['lm_head.weight'] = st['model.embed_tokens.weight']
        self.tensors = st

    def slot(self, blocks, pos):  # the cache row of position pos: block*bs + row, or None
        b = pos // self.bs
        return blocks[b] * self.bs + pos % self.bs if b < len(blocks) else None

    def pad_positions(self, blocks, T):  # rows an admit of T tokens zero-pads (see the module doc)
        if not self.pad:
            return []
        return [p for p in range(T, (T + TILE - 1) // TILE * TILE) if self.slot(blocks, p) is not None]


# ---------------------------------------------------------------- numpy
class NumpyModel(Shape):
    """Qwen3 on numpy in float32, bf16 rounding (R) at each op boundary."""

    def __init__(self, hello):
        super().__init__(hello)
        f = np.float32
        w = {k: self.arr(*v) for k, v in self.tensors.items()}
        del self.tensors
        self.embed, self.norm_w, self.lm_head = w['model.embed_tokens.weight'], w['model.norm.weight'], w['lm_head.weight']
        self.L = [[w[n] for n in names] for names in tensor_names(self.c)]
        half = self.hd // 2
        e = np.arange(0, self.hd, 2, dtype=f) / f(self.hd)
        self.inv = f(1) / np.array([self.theta ** float(x) for x in e], dtype=f)[:half]
        self.scale = f(1 / math.sqrt(self.hd))
        rows = self.num_blocks * self.bs  # np.zeros: untouched pages cost no memory
        self.K = [np.zeros((rows, self.nkv, self.hd), f) for _ in range(self.layers)]
        self.V = [np.zeros((rows, self.nkv, self.hd), f) for _ in range(self.layers)]

    @staticmethod
    def arr(dtype, shape, raw):
        if dtype == 'BF16':
            return (np.frombuffer(raw, dtype='<u2').astype(np.uint32) << 16).view(np.float32).reshape(shape)
        if dtype == 'F32':
            return np.frombuffer(raw, dtype='<f4').astype(np.float32).reshape(shape)
        raise ValueError('tensor dtype %s: want BF16 or F32' % dtype)

    @staticmethod
    def R(x):  # round float32 values to bf16 (nearest even), as float32
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        return ((u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)).view(np.float32)

    def rms(self, x, w):  # RMSNorm over the last axis: s = 1/sqrt(mean(x²)+eps), R(w·R(x·s))
        f = np.float32
        v = np.einsum('...i,...i->...', x, x, dtype=f) / f(x.shape[-1])
        s = (1 / np.sqrt((v + f(self.eps)).astype(np.float64))).astype(f)
        return self.R(w * self.R(x * s[..., None]))

    def lin(self, x, w):  # R(x·wᵀ), float32 accumulation
        return self.R(x @ w.T)

    def rope(self, x, pos):  # x [n, heads, hd]; half-split rotary at positions pos [n]
        f = np.float32
        ang = pos.astype(f)[:, None] * self.inv[None, :]
        c, s = self.R(np.cos(ang.astype(np.float64)).astype(f))[:, None, :], self.R(np.sin(ang.astype(np.float64)).astype(f))[:, None, :]
        h = self.hd // 2
        x0, x1 = x[..., :h], x[..., h:]
        return np.concatenate([self.R(self.R(x0 * c) + self.R(-x1 * s)), self.R(self.R(x1 * c) + self.R(x0 * s))], axis=-1)

    def softmax_av(self, s, v):  # s [..., t] raw scores; v [..., t, hd]
        s = self.R(self.R(s) * self.scale)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = self.R(e / e.sum(axis=-1, keepdims=True, dtype=np.float32))
        return self.R(p @ v)

    def forward(self, toks, pos, attend, last_only=False):
        """Runs positions toks/pos [n]; attend(l, q, k, v) writes the cache and
        returns the attention output [n, nh*hd]. Returns logits [n or 1, vocab]."""
        x = self.embed[toks]
        n = len(toks)
        for l, (inorm, wq, wk, wv, qn, kn, wo, pnorm, wg, wu, wd) in enumerate(self.L):
            a = self.rms(x, inorm)
            q = self.rope(self.rms(self.lin(a, wq).reshape(n, self.nh, self.hd), qn), pos)
            k = self.rope(self.rms(self.lin(a, wk).reshape(n, self.nkv, self.hd), kn), pos)
            v = self.lin(a, wv).reshape(n, self.nkv, self.hd)
            x = self.R(x + self.lin(attend(l, q, k, v), wo))
            a = self.rms(x, pnorm)
            gate, up = self.lin(a, wg), self.lin(a, wu)
            silu = self.R(gate / (np.float32(1) + np.exp(-gate.astype(np.float64)).astype(np.float32)))
            x = self.R(x + self.lin(self.R(silu * up), wd))
        if last_only:
            x = x[-1:]
        return self.lin(self.rms(x, self.norm_w), self.lm_head)

    def outputs(self, logits):
        lg = np.where(np.isnan(logits), -np.inf, logits)
        toks = lg.argmax(axis=-1)  # the first largest, as offcard's Argmax
        bits = (np.ascontiguousarray(logits, dtype=np.float32).view(np.uint32) >> 16).astype('<u2')
        return [(int(t), base64.b64encode(b.tobytes()).decode()) for t, b in zip(toks, bits)]

    def prefill(self, toks, blocks, last_only, start=0):
        """Positions start..start+T-1; rows 0..start-1 are read from the cache
        (a prefix-cache hit's shared blocks, or earlier chunks)."""
        T, n = len(toks), start + len(toks)
        pos = np.arange(start, n)
        slots = np.array([self.slot(blocks, p) for p in range(start, n)])
        rows = np.array([self.slot(blocks, p) for p in range(n)])
        masked = np.arange(n)[None, :] > pos[:, None]                # [T, n]: key row past the query

        def attend(l, q, k, v):  # position p reads rows 0..p through the table
            self.K[l][slots], self.V[l][slots] = k, v
            kh, vh = self.K[l][rows].transpose(1, 0, 2), self.V[l][rows].transpose(1, 0, 2)  # [nkv, n, hd]
            qh = q.transpose(1, 0, 2).reshape(self.nkv, self.g * T, self.hd)
            s = (qh @ kh.transpose(0, 2, 1)).reshape(self.nkv, self.g, T, n)
            s = np.where(masked, -np.inf, s)
            o = self.softmax_av(s, vh[:, None])                      # [nkv, g, T, hd]
            return o.transpose(2, 0, 1, 3).reshape(T, self.nh * self.hd)
        return self.outputs(self.forward(np.asarray(toks), pos, attend, last_only))

    def decode(self, batch):
        pos = np.array([s['pos'] for s in batch])
        slots = [self.slot(s['blocks'], s['pos']) for s in batch]
        reads = [np.array([self.slot(s['blocks'], t) for t in range(s['pos'] + 1)]) for s in batch]

        def attend(l, q, k, v):
            for i, sl in enumerate(slots):  # every entry writes before any reads (as ref)
                self.K[l][sl], self.V[l][sl] = k[i], v[i]
            out = np.empty((len(batch), self.nh * self.hd), np.float32)
            for i, rd in enumerate(reads):
                kc, vc = self.K[l][rd].transpose(1, 2, 0), self.V[l][rd].transpose(1, 0, 2)  # [nkv,hd,t], [nkv,t,hd]
                s = q[i].reshape(self.nkv, self.g, self.hd) @ kc
                out[i] = self.softmax_av(s, vc).reshape(-1)
            return out
        return self.outputs(self.forward(np.array([s['token'] for s in batch]), pos, attend))

    def zero_rows(self, rows):
        for l in range(self.layers):
            self.K[l][rows], self.V[l][rows] = 0, 0

    def copy_block(self, src, dst):
        a, b = src * self.bs, dst * self.bs
        for l in range(self.layers):
            self.K[l][b:b + self.bs], self.V[l][b:b + self.bs] = self.K[l][a:a + self.bs], self.V[l][a:a + self.bs]


# ---------------------------------------------------------------- stdlib
def R(xs):  # round a list of floats to bfloat16 (float32 first, then nearest even)
    u = array('I', struct.pack('%df' % len(xs), *xs))
    return array('f', array('I', [((x + 0x7FFF + ((x >> 16) & 1)) >> 16 << 16) & 0xFFFFFFFF for x in u]).tobytes()).tolist()


class StdlibModel(Shape):
    """Qwen3 in Python floats (float64), bf16 rounding at each op boundary."""

    def __init__(self, hello):
        super().__init__(hello)
        w = {k: self.arr(*v) for k, v in self.tensors.items()}
        del self.tensors
        self.embed, self.norm_w, self.lm_head = w['model.embed_tokens.weight'], w['model.norm.weight'], w['lm_head.weight']
        self.L = [[w[n] for n in names] for names in tensor_names(self.c)]
        f32 = lambda v: struct.unpack('f', struct.pack('f', v))[0]
        self.inv = [f32(1 / f32(self.theta ** (2 * i / self.hd))) for i in range(self.hd // 2)]
        self.scale = 1 / math.sqrt(self.hd)
        self.zero = [[0.0] * self.hd] * self.nkv
        self.K = [{} for _ in range(self.layers)]  # cache row -> [kv head][hd]; absent: fresh (zero)
        self.V = [{} for _ in range(self.layers)]

    @staticmethod
    def arr(dtype, shape, raw):
        x = array('f', to_bits(raw, dtype).tobytes()).tolist()
        if len(shape) == 1:
            return x
        m = shape[1]
        return [x[i * m:(i + 1) * m] for i in range(shape[0])]

    def rms(self, x, w):
        s = 1 / math.sqrt(sum(map(mul, x, x)) / len(x) + self.eps)
        return R(list(map(mul, w, R([v * s for v in x]))))

    @staticmethod
    def lin(w, a):
        return R([sum(map(mul, row, a)) for row in w])

    def rope(self, x, c, s):
        h = len(x) // 2
        x0, x1 = x[:h], x[h:]
        lo = [a + b for a, b in zip(R(list(map(mul, x0, c))), R([-v * w for v, w in zip(x1, s)]))]
        hi = [a + b for a, b in zip(R(list(map(mul, x1, c))), R(list(map(mul, x0, s))))]
        return R(lo + hi)

    def heads(self, x, n, wn, c, s):
        hd = self.hd
        return [self.rope(self.rms(x[i * hd:(i + 1) * hd], wn), c, s) for i in range(n)]

    def forward(self, steps, logits=True):
        """steps: [(token, pos, blocks)], run as one batch (each entry writes
        its cache row of a layer before any entry reads)."""
        xs = [self.embed[t] for t, _, _ in steps]
        tabs = []
        for _, p, _ in steps:
            ang = [struct.unpack('f', struct.pack('f', p * f))[0] for f in self.inv]
            tabs.append((R([math.cos(a) for a in ang]), R([math.sin(a) for a in ang])))
        for l, (inorm, wq, wk, wv, qn, kn, wo, pnorm, wg, wu, wd) in enumerate(self.L):
            K, V, qs = self.K[l], self.V[l], []
            for i, (t, p, blocks) in enumerate(steps):
                a = self.rms(xs[i], inorm)
                c, s = tabs[i]
                qs.append(self.heads(self.lin(wq, a), self.nh, qn, c, s))
                sl = self.slot(blocks, p)
                K[sl] = self.heads(self.lin(wk, a), self.nkv, kn, c, s)
                v = self.lin(wv, a)
                V[sl] = [v[j * self.hd:(j + 1) * self.hd] for j in range(self.nkv)]
            for i, (t, p, blocks) in enumerate(steps):
                rows = [self.slot(blocks, u) for u in range(p + 1)]
                kc = [K.get(r, self.zero) for r in rows]
                vc = [V.get(r, self.zero) for r in rows]
                out = []
                for h, qh in enumerate(qs[i]):
                    j = h // self.g
                    sc = R([v * self.scale for v in R([sum(map(mul, qh, k[j])) for k in kc])])
                    m = max(sc)
                    e = [math.exp(v - m) for v in sc]
                    tot = sum(e)
                    pr = R([v / tot for v in e])
                    out += R([sum(map(mul, pr, col)) for col in zip(*[v[j] for v in vc])])
                x = xs[i]
                x = R([a + b for a, b in zip(x, self.lin(wo, out))])
                a = self.rms(x, pnorm)
                gate, up = self.lin(wg, a), self.lin(wu, a)
                hmid = R(list(map(mul, R([g / (1 + math.exp(-g)) for g in gate]), up)))
                xs[i] = R([a + b for a, b in zip(x, self.lin(wd, hmid))])
        if not logits:
            return None
        outs = []
        for x in xs:
            lg = self.lin(self.lm_head, self.rms(x, self.norm_w))
            tok = max(range(len(lg)), key=lambda i: (lg[i] if lg[i] == lg[i] else -math.inf, -i))
            bits = array('H', (u >> 16 for u in array('I', struct.pack('%df' % len(lg), *lg))))
            outs.append((tok, logits_b64(bits)))
        return outs

    def prefill(self, toks, blocks, last_only, start=0):
        outs = []
        for i, t in enumerate(toks):  # position by position, each reading rows 0..p
            o = self.forward([(t, start + i, blocks)], logits=not last_only or i == len(toks) - 1)
            if o:
                outs += o
        return outs

    def decode(self, batch):
        return self.forward([(s['token'], s['pos'], s['blocks']) for s in batch])

    def zero_rows(self, rows):
        for l in range(self.layers):
            for r in rows:
                self.K[l].pop(r, None)
                self.V[l].pop(r, None)

    def copy_block(self, src, dst):
        for l in range(self.layers):
            for C in (self.K[l], self.V[l]):
                for r in range(self.bs):  # rows are replaced, never changed in place: sharing is safe
                    if src * self.bs + r in C:
                        C[dst * self.bs + r] = C[src * self.bs + r]
                    else:
                        C.pop(dst * self.bs + r, None)


Model = NumpyModel if np is not None else StdlibModel


# ---------------------------------------------------------------- protocol
def check_table(model, blocks, last):
    if last // model.bs >= len(blocks):
        raise ValueError('position %d is past the block table (%d blocks of %d)' % (last, len(blocks), model.bs))
    for b in blocks[:last // model.bs + 1]:
        if not 0 <= b < model.num_blocks:
            raise ValueError('block %d outside the cache of %d blocks' % (b, model.num_blocks))


def check_tokens(model, toks):
    for t in toks:
        if not 0 <= t < model.vocab:
            raise ValueError('token %d outside the vocabulary of %d' % (t, model.vocab))


def last_only(model, T):  # full rows of every position would not fit in a reply
    return T * model.vocab * 3 > MAX_REPLY


def prefill(model, seq, toks, blocks, start):
    """Positions start..start+T-1 of sequence seq (rows below start are read
    from the cache), answered in order, or the last one only."""
    check_tokens(model, toks)
    check_table(model, blocks, start + len(toks) - 1)
    outs = model.prefill(toks, blocks, last_only(model, len(toks)), start)
    first = start + len(toks) - len(outs)
    return [dict(seq=seq, pos=first + i, token=t, logits=lg) for i, (t, lg) in enumerate(outs)]


def admit(model, req):
    toks, blocks = req['prompt'], req['blocks']
    if not toks:
        raise ValueError('empty prompt')
    outs = prefill(model, req['seq'], toks, blocks, 0)
    model.zero_rows([model.slot(blocks, p) for p in model.pad_positions(blocks, len(toks))])
    return outs


def prefill_from(model, req):
    """A prefill over KV already in the cache (a prefix-cache hit, a later
    chunk, a recompute): exactly its positions are written, no tile
    padding."""
    if not req['tokens']:
        raise ValueError('prefill_from of sequence %d with no tokens' % req['seq'])
    if req['start'] < 0:
        raise ValueError('negative start %d' % req['start'])
    return prefill(model, req['seq'], req['tokens'], req['blocks'], req['start'])


def decode(model, req):
    batch = req['batch']
    for i, s in enumerate(batch):
        if any(o['seq'] == s['seq'] for o in batch[:i]):
            raise ValueError('sequence %d twice in one batch' % s['seq'])
        check_tokens(model, [s['token']])
        check_table(model, s['blocks'], s['pos'])
    if not batch:
        return []
    return [dict(seq=s['seq'], pos=s['pos'], token=t, logits=lg) for s, (t, lg) in zip(batch, model.decode(batch))]


def verify(model, req):
    """k tokens per entry at pos..pos+k-1, run as k decode rounds (round j:
    position pos+j of every entry with more than j tokens); the outputs go
    entry after entry, each in position order."""
    batch = req['batch']
    for i, s in enumerate(batch):  # everything checked before anything is written
        if any(o['seq'] == s['seq'] for o in batch[:i]):
            raise ValueError('sequence %d twice in one verify batch' % s['seq'])
        if not s['tokens']:
            raise ValueError('verify of sequence %d with no tokens' % s['seq'])
        check_tokens(model, s['tokens'])
        check_table(model, s['blocks'], s['pos'] + len(s['tokens']) - 1)
    outs = [[] for _ in batch]
    for j in range(max((len(s['tokens']) for s in batch), default=0)):
        rnd = [(i, dict(seq=s['seq'], token=s['tokens'][j], pos=s['pos'] + j, blocks=s['blocks']))
               for i, s in enumerate(batch) if j < len(s['tokens'])]
        for (i, st), (t, lg) in zip(rnd, model.decode([st for _, st in rnd])):
            outs[i].append(dict(seq=st['seq'], pos=st['pos'], token=t, logits=lg))
    return [o for entry in outs for o in entry]


def copy_blocks(model, req):
    """Every layer's K and V of block src, all rows, written over block dst."""
    copies, src, dst = req['copies'], set(), set()
    for c in copies:  # everything checked before anything is written
        for b in (c['src'], c['dst']):
            if not 0 <= b < model.num_blocks:
                raise ValueError('block copy %d->%d: block %d outside the cache of %d blocks' % (c['src'], c['dst'], b, model.num_blocks))
        if c['dst'] in dst:
            raise ValueError('block %d is the destination of two copies' % c['dst'])
        src.add(c['src'])
        dst.add(c['dst'])
    if src & dst:
        raise ValueError('block %d is both a source and a destination' % min(src & dst))
    for c in copies:
        model.copy_block(c['src'], c['dst'])


VERSION = 3                                   # the newest protocol version this engine speaks
SERVES = {'prefill_from': prefill_from, 'verify': verify, 'copy_blocks': copy_blocks}  # version 3's calls


def main():
    model, version = None, 0
    for line in sys.stdin:
        rep = {'ok': True}
        try:
            req = json.loads(line)
            op = req['op']
            if op == 'hello':
                v = req.get('version', 1)
                if v < 1:
                    raise ValueError('protocol version %d: this engine speaks 1 to %d' % (v, VERSION))
                model, version = Model(req), min(v, VERSION)
                rep.update(version=version, engine='python reference (%s)' % ('numpy ' + np.__version__ if np else 'stdlib'), logits='full')
                if version >= 3:
                    rep['serves'] = list(SERVES)
            elif op == 'bye':
                print(json.dumps(rep), flush=True)
                return
            elif model is None:
                raise ValueError('%s before hello' % op)
            elif op == 'admit':
                rep['outputs'] = admit(model, req)
            elif op == 'decode':
                rep['outputs'] = decode(model, req)
            elif op in SERVES:
                if version < 3:
                    raise ValueError('%s is not served (protocol version %d)' % (op, version))
                out = SERVES[op](model, req)
                if out is not None:
                    rep['outputs'] = out
            elif op not in ('finish', 'reset'):  # finish, reset: nothing to do (see the module doc)
                raise ValueError('unknown op %r' % op)
        except Exception as e:  # an error reply: offcard reports the engine refusing the call
            rep = {'ok': False, 'error': '%s: %s' % (type(e).__name__, e)}
        print(json.dumps(rep, separators=(',', ':')), flush=True)


if __name__ == '__main__':
    main()
