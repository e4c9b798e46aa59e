"""float64 references for the tests (plain NumPy loops and matrix products, as
the C tests' attention_ref.h): nothing here calls veloxquant."""

import math

import numpy as np


def hadamard_matrix(d):
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h


def rot(x, diag=None):
    """rot(x) = H_D (diag * x) / sqrt(D) along the last axis, float64."""
    x = np.asarray(x, np.float64)
    d = x.shape[-1]
    if diag is not None:
        x = x * np.asarray(diag, np.float64)
    return x @ hadamard_matrix(d).T / math.sqrt(d)


def rot_inv(y, diag=None):
    y = np.asarray(y, np.float64)
    d = y.shape[-1]
    x = y @ hadamard_matrix(d).T / math.sqrt(d)
    return x if diag is None else x * np.asarray(diag, np.float64)


def nearest(x, cents):
    """Index of the nearest centroid, ties to the lower index."""
    x = np.asarray(x, np.float64)[..., None]
    dist = np.abs(x - np.asarray(cents, np.float64))
    return np.argmin(dist, axis=-1)  # argmin returns the first (lowest) on ties


def near_boundary(x, cents, tol):
    """True where x is within tol of a midpoint between adjacent centroids
    (where f32 rounding may legitimately pick either side)."""
    c = np.asarray(cents, np.float64)
    mids = (c[1:] + c[:-1]) / 2
    return np.min(np.abs(np.asarray(x, np.float64)[..., None] - mids), axis=-1) < tol


def pack_bits_u8(bits):
    """[..., D] of 0/1 -> [..., D/8] u8, element j = bit j % 8 of byte j / 8."""
    b = np.asarray(bits, np.uint8).reshape(bits.shape[:-1] + (-1, 8))
    return (b << np.arange(8, dtype=np.uint8)).sum(-1).astype(np.uint8)


def bit_pack(idx, bits):
    idx = np.asarray(idx, np.int64) & ((1 << bits) - 1)
    n = idx.shape[-1]
    w = (n * bits + 31) // 32
    out = np.zeros(idx.shape[:-1] + (w,), np.uint64)
    for i in range(n):
        for b in range(bits):
            s = i * bits + b
            out[..., s // 32] |= ((idx[..., i] >> b) & 1).astype(np.uint64) << np.uint64(s % 32)
    return out.astype(np.uint32)


def round_half_even(x):
    return np.round(x)  # numpy rounds half to even


def kivi_params(x, bits, axis_groups):
    """min/max affine parameters over groups along an axis, float64."""
    lo, hi = x.min(axis=axis_groups, keepdims=True), x.max(axis=axis_groups, keepdims=True)
    scale = (hi - lo) / (2 ** bits - 1)
    return scale, lo


def attention(q, k, v, scale, mask=None, causal=False):
    """softmax(scale q k^T + mask) v, float64, GQA: q [B,Hq,Sq,D], k/v [B,Hkv,Skv,D]."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, Hq, Sq, D = q.shape
    Hkv, Skv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ kk.transpose(0, 1, 3, 2)
    if mask is not None:
        s = s + np.asarray(mask, np.float64)
    if causal:
        i = np.arange(Sq)[:, None]
        j = np.arange(Skv)[None, :]
        s = np.where(j <= Skv - Sq + i, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(-1, keepdims=True)) @ vv


def attention_scores(s, v, groups):
    """softmax over given scores [B,Hq,Sq,Skv] times v [B,Hkv,Skv,D]."""
    vv = np.repeat(np.asarray(v, np.float64), groups, axis=1)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(-1, keepdims=True)) @ vv


def popcount_u8(x):
    return np.unpackbits(np.asarray(x, np.uint8)[..., None], axis=-1).sum(-1)
