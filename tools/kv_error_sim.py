#!/usr/bin/env python3
"""kv_error_sim.py — where a KV quantizer's error goes, offline, on keys/values/queries captured from the model.

    vq capture-kv -o A --tokens 2048 --queries 1            # keys, values of tokens 0..2047 (all layers)
    vq capture-kv -o B --tokens 1024 --queries 1024         # queries of tokens 1024..2047
    python3 tools/kv_error_sim.py A B [--every 16]

For every layer and kv head it replays causal attention of the captured queries (every --every-th position of
1024..2047, the positions `vq perplexity --ctx 2048` scores) over the keys and values up to that position, the
first 4 tokens exact (the sink), and prints the relative RMS error of the attention output for

  - KIVI keys per channel over 128-token groups at 2/3/4 bits, min-max range (what the cache stores) and the
    range chosen per group and channel to minimise the key's squared error ("mse clip", 8 shrink factors);
  - the same KIVI keys quantized before RoPE (RoPE undone with --rope-base, pairs 2i/2i+1, then redone on the
    decoded keys): what a cache that applies RoPE at attention time would gain;
  - mixed per-channel bits: the n channels of largest E[q^2] * range^2 at the higher width, the rest lower;
  - TurboQuant-like values (random signs, Hadamard, Lloyd-Max N(0,1) codes, least-squares scale per token) at
    2/3 bits, and KIVI values per token over 32 or 16 channels (min-max or mse clip);

plus the drift of the keys' mean over the window, after and before RoPE (the runtime centers keys with the
mean of its first chunk: a bias that RoPE rotates leaves that mean behind as the context grows), and, per head,
how concentrated the query-weighted key error is over channels (AM/GM of E[q^2] * range^2:
the gain, in error variance, of an ideal per-channel bit allocation; 0.5 log2 of it is that gain in bits).
The last query-weighted stats use the same queries (no held-out set): an upper bound on what allocation buys.
This is an analysis of one window, not a perplexity: `vq perplexity` measures the loss. numpy only.
"""
import argparse
import os

import numpy as np

LLOYD_MAX = {2: [-1.5104, -0.4528, 0.4528, 1.5104],
             3: [-2.1520, -1.3439, -0.7560, -0.2451, 0.2451, 0.7560, 1.3439, 2.1520]}
SINK, GROUP = 4, 128


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def affine(x, axis, bits, shrink=1.0):
    """Min-max affine codes of x along axis (the group), range shrunk about its centre by `shrink`."""
    lo, hi = x.min(axis, keepdims=True), x.max(axis, keepdims=True)
    if shrink != 1.0:
        c, hw = (lo + hi) / 2, (hi - lo) / 2 * shrink
        lo, hi = c - hw, c + hw
    n = 2 ** bits - 1
    s = (hi - lo) / n
    s[s == 0] = 1
    return np.clip(np.round((x - lo) / s), 0, n) * s + lo


def kivi_clip(x, axis, bits):
    """affine() with the shrink factor of least squared error per group and channel."""
    best, best_err = None, None
    for shrink in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4):
        y = affine(x, axis, bits, shrink)
        e = ((y - x) ** 2).sum(axis, keepdims=True)
        if best is None:
            best, best_err = y, e
        else:
            better = e < best_err
            best, best_err = np.where(better, y, best), np.minimum(e, best_err)
    return best


def kivi_keys(k, bits, clip=False):
    """k [..., S, D]: per channel over GROUP-token groups; the partial last group stays exact (the cache's f16
    window)."""
    n = k.shape[-2] // GROUP * GROUP
    out = k.copy()
    g = k[..., :n, :].reshape(k.shape[:-2] + (-1, GROUP, k.shape[-1]))
    out[..., :n, :] = (kivi_clip(g, -2, bits) if clip else affine(g, -2, bits)).reshape(k.shape[:-2] + (n, -1))
    return out


def mixed_keys(k, q2, n_hi, b_hi, b_lo):
    D = k.shape[1]
    n = k.shape[0] // GROUP * GROUP
    g = k[:n].reshape(-1, GROUP, D)
    w = q2 * ((g.max(1) - g.min(1)) ** 2).mean(0)
    hi = np.zeros(D, bool)
    hi[np.argsort(w)[::-1][:n_hi]] = True
    out = k.copy()
    out[:n] = np.where(hi, affine(g, 1, b_hi), affine(g, 1, b_lo)).reshape(n, D)
    return out


def turbo_values(v, bits, rot, signs):
    """v [..., D]: per token, rotated, Lloyd-Max codes, least-squares scale."""
    y = (v * signs) @ rot.T
    s = np.linalg.norm(y, axis=-1, keepdims=True) / np.sqrt(v.shape[-1])
    s[s == 0] = 1
    c = np.array(LLOYD_MAX[bits])
    yh = c[np.abs(y[..., None] / s[..., None] - c).argmin(-1)]
    a = (yh * y).sum(-1, keepdims=True) / np.maximum((yh * yh).sum(-1, keepdims=True), 1e-30)
    return ((yh * a) @ rot) * signs


def kivi_values(v, bits, g, clip=False):
    x = v.reshape(v.shape[0], -1, g)
    return (kivi_clip(x, 2, bits) if clip else affine(x, 2, bits)).reshape(v.shape)


def rope_tables(S, D, base):
    ang = np.arange(S)[:, None] * base ** (-2.0 * np.arange(D // 2) / D)[None, :]
    return np.cos(ang), np.sin(ang)


def rotate(k, cs, sign):
    """RoPE (sign +1) or its inverse (-1) of k [..., S, D] on pairs (2i, 2i+1) at positions 0..S-1."""
    c, s = cs
    out = np.empty_like(k)
    x, y = k[..., 0::2], k[..., 1::2]
    out[..., 0::2], out[..., 1::2] = x * c - sign * y * s, sign * x * s + y * c
    return out


def attention(q, k, v):
    s = q @ k.T / np.sqrt(k.shape[1])
    w = np.exp(s - s.max())
    return (w / w.sum()) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kv_dir", help="capture-kv output with the keys and values of 2048 tokens")
    ap.add_argument("q_dir", help="capture-kv output with the queries of tokens 1024..2047")
    ap.add_argument("--every", type=int, default=16, help="score every N-th query position (16)")
    ap.add_argument("--rope-base", type=float, default=100000.0, help="the model's RoPE base (SmolLM2: 100000)")
    a = ap.parse_args()
    K = np.load(os.path.join(a.kv_dir, "keys.npy")).astype(np.float64)
    V = np.load(os.path.join(a.kv_dir, "values.npy")).astype(np.float64)
    Q = np.load(os.path.join(a.q_dir, "queries.npy")).astype(np.float64)
    L, H, S, D = K.shape
    G = Q.shape[1] // H
    q0 = S - Q.shape[2]
    pos = np.arange(q0, S, a.every)
    rot, signs = hadamard(D), np.random.default_rng(1).choice([-1.0, 1.0], D)

    cs = rope_tables(S, D, a.rope_base)

    def pre_rope(bits):
        def f(k):  # k = tokens SINK.. of one head: undo RoPE at their positions, quantize, redo
            c = (cs[0][SINK:], cs[1][SINK:])
            return rotate(kivi_keys(rotate(k, c, -1), bits), c, 1)
        return f

    def error(kq=None, vq=None, mixed=None):
        err = np.zeros((L, H))
        for l in range(L):
            for h in range(H):
                k, v = K[l, h], V[l, h]
                kh, vh = k.copy(), v.copy()
                qs = Q[l, h * G:(h + 1) * G]
                if kq:
                    kh[SINK:] = kq(k[SINK:])
                if mixed:
                    kh[SINK:] = mixed_keys(k[SINK:], (qs ** 2).mean((0, 1)), *mixed)
                if vq:
                    vh[SINK:] = vq(v[SINK:])
                num = den = 0.0
                for qh in qs:
                    for p in pos:
                        o, oh = attention(qh[p - q0], k[:p + 1], v[:p + 1]), attention(qh[p - q0], kh[:p + 1],
                                                                                        vh[:p + 1])
                        num += ((o - oh) ** 2).sum()
                        den += (o ** 2).sum()
                err[l, h] = np.sqrt(num / den)
        return err

    cases = [
        ("keys KIVI 4-bit g128", dict(kq=lambda k: kivi_keys(k, 4))),
        ("keys KIVI 3-bit g128", dict(kq=lambda k: kivi_keys(k, 3))),
        ("keys KIVI 3-bit g128 mse clip", dict(kq=lambda k: kivi_keys(k, 3, True))),
        ("keys KIVI 2-bit g128", dict(kq=lambda k: kivi_keys(k, 2))),
        ("keys KIVI 2-bit g128 mse clip", dict(kq=lambda k: kivi_keys(k, 2, True))),
        ("keys KIVI 4-bit g128 pre-RoPE", dict(kq=pre_rope(4))),
        ("keys KIVI 3-bit g128 pre-RoPE", dict(kq=pre_rope(3))),
        ("keys KIVI 2-bit g128 pre-RoPE", dict(kq=pre_rope(2))),
        ("keys 16 ch 4-bit + 48 ch 2-bit (2.5)", dict(mixed=(16, 4, 2))),
        ("keys 32 ch 4-bit + 32 ch 2-bit (3.0)", dict(mixed=(32, 4, 2))),
        ("keys 32 ch 4-bit + 32 ch 3-bit (3.5)", dict(mixed=(32, 4, 3))),
        ("values TurboQuant 3-bit", dict(vq=lambda v: turbo_values(v, 3, rot, signs))),
        ("values TurboQuant 2-bit", dict(vq=lambda v: turbo_values(v, 2, rot, signs))),
        ("values KIVI 2-bit g32", dict(vq=lambda v: kivi_values(v, 2, 32))),
        ("values KIVI 2-bit g32 mse clip", dict(vq=lambda v: kivi_values(v, 2, 32, True))),
        ("values KIVI 2-bit g16 mse clip", dict(vq=lambda v: kivi_values(v, 2, 16, True))),
    ]
    print(f"{L} layers x {H} kv heads x D {D}; queries at {len(pos)} positions of {q0}..{S - 1}, {G} per kv head")
    print("relative RMS error of the attention output (mean over heads), overall and per layer:")
    for name, kw in cases:
        e = error(**kw)
        print(f"  {name:38s} {e.mean():.3f}  | " + " ".join(f"{x:.2f}" for x in e.mean(1)), flush=True)
    print("key mean drift, per 256 tokens: |local mean - mean of tokens 1..255| and rms(k - that mean), over the")
    print("rms of k about its local mean (1 = the stale mean leaves a bias as large as the keys' own spread):")
    for name, X in (("after RoPE ", K), ("before RoPE", rotate(K, cs, -1))):
        mu0 = X[:, :, 1:256].mean(2, keepdims=True)
        for t in range(256, S - 255, 256):
            w = X[:, :, t:t + 256]
            mw = w.mean(2, keepdims=True)
            spread = np.sqrt(((w - mw) ** 2).sum(3).mean(2))
            drift = np.linalg.norm((mw - mu0)[:, :, 0], axis=2) / spread
            left = np.sqrt(((w - mu0) ** 2).sum(3).mean(2)) / spread
            raw = np.sqrt((w ** 2).sum(3).mean(2)) / spread
            print(f"  {name} tokens {t:4d}-{t + 255:4d}: drift {drift.mean():.2f}, rms(k - mean) {left.mean():.2f}, "
                  f"rms(k) {raw.mean():.2f}")
    print("query-weighted key error over channels, AM/GM of E[q^2] range^2 per head (ideal allocation gain):")
    gains = []
    for l in range(L):
        row = []
        for h in range(H):
            n = (S - SINK) // GROUP * GROUP
            g = K[l, h, SINK:SINK + n].reshape(-1, GROUP, D)
            w = (Q[l, h * G:(h + 1) * G] ** 2).mean((0, 1)) * ((g.max(1) - g.min(1)) ** 2).mean(0)
            gain = w.mean() / np.exp(np.log(w + 1e-30).mean())
            top8 = np.sort(w)[::-1][:8].sum() / w.sum()
            gains.append(gain)
            row.append(f"{gain:5.1f} (top-8 ch {100 * top8:3.0f} %)")
        print(f"  layer {l:2d}: " + "  ".join(row))
    print(f"  median over heads {np.median(gains):.2f} = {0.5 * np.log2(np.median(gains)):.2f} bits")


if __name__ == "__main__":
    main()
