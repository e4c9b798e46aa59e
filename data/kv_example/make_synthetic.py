#!/usr/bin/env python3
"""Writes the synthetic example set of `vq cache-eval` (keys.npy, values.npy,
queries.npy in this directory), shaped like SmolLM2-135M's attention: Hkv 3,
Hq 9 (GQA 3), D 64, RoPE (half layout, theta 1e5), here 2 layers of 256
tokens and 8 queries per head, stored as f16.

Synthetic until real captures replace it: keys are N(0,1) per channel with
four outlier channels (large mean and spread, in the slowly rotating half of
the RoPE pairs, as in real models) and RoPE applied at positions 0..S-1;
values are N(0,1) scaled per channel; each query is a mix of three cached
keys plus noise, so that attention is peaked as in a trained model. NumPy's
PCG64 with a fixed seed: rerunning writes the same files.
    python3 data/kv_example/make_synthetic.py
"""
import os

import numpy as np

L, HKV, HQ, S, SQ, D, THETA = 2, 3, 9, 256, 8, 64, 1e5
rng = np.random.default_rng(20261201)
here = os.path.dirname(os.path.abspath(__file__))

half = D // 2
inv = THETA ** (-np.arange(half) * 2.0 / D)
ang = np.arange(S)[:, None] * inv[None, :]
cos, sin = np.cos(ang), np.sin(ang)


def rope(x):  # x [..., S, D], half layout: pairs (i, i + D/2)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


keys = rng.standard_normal((L, HKV, S, D))
for j, ch in enumerate([half - 1, D - 1, half - 4, D - 4]):
    sign = 1 if j % 2 == 0 else -1
    keys[..., ch] = sign * 8.0 + 3.0 * rng.standard_normal((L, HKV, S))
keys = rope(keys)
values = rng.standard_normal((L, HKV, S, D)) * rng.uniform(0.5, 2.0, (L, HKV, 1, D))
queries = np.empty((L, HQ, SQ, D))
g = HQ // HKV
for l in range(L):
    for h in range(HQ):
        for i in range(SQ):
            picks = rng.integers(0, S, 3)
            mix = keys[l, h // g, picks].sum(axis=0) / np.sqrt(3)
            queries[l, h, i] = 0.3 * mix + rng.standard_normal(D)
for name, arr in (("keys", keys), ("values", values), ("queries", queries)):
    np.save(os.path.join(here, name + ".npy"), arr.astype(np.float16))
