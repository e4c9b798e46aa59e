"""Perplexity changes compared token by token between two runtimes (used by
test_hf.py and bench/python_perplexity.py): reading the per-token file of the
C runtime's `vq perplexity --tokens`, and the paired statistics.

Why paired and per token: a compressed cache's effect on one token's nll is
large and, through 30 layers of rounding decisions, chaotic (perturbing the
keys by 1e-5 relative moves kivi4's per-token nll by 0.12 nats on average),
so two runtimes whose float arithmetic differs at all see different draws of
the quantization noise. Their perplexity changes then differ by a random
amount whose standard error follows from the per-token differences."""

import csv
import math

import numpy as np


def read_tokens_tsv(path):
    """A `vq perplexity --tokens` file (lines starting with '#' are comments)
    -> dict with ctx, windows, tokens [W, ctx] (int64) and nll {method: [W,
    ctx/2] float64, the scored second half of each window}. One --ctx size."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader((line for line in f if not line.startswith("#")), delimiter="\t"))
    head, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(head)}
    a = np.array(body, dtype=object)
    ctx = {int(x) for x in a[:, col["ctx"]]}
    if len(ctx) != 1:
        raise ValueError(f"{path}: one --ctx size expected, got {sorted(ctx)}")
    C = ctx.pop()
    W = len(body) // C
    if W * C != len(body) or [int(x) for x in a[:, col["pos"]]] != list(range(C)) * W:
        raise ValueError(f"{path}: expected every position 0..{C - 1} of each window")
    tokens = a[:, col["token"]].astype(np.int64).reshape(W, C)
    nll = {name[4:]: a[:, i].astype(np.float64).reshape(W, C)[:, C // 2:]
           for name, i in col.items() if name.startswith("nll_")}
    return {"ctx": C, "windows": W, "tokens": tokens, "nll": nll}


def change(nll, ref):
    """Perplexity change of nll against ref (same tokens), in %, and its paired
    standard error (delta method on d = nll - ref per token)."""
    d = (np.asarray(nll) - np.asarray(ref)).ravel()
    md = d.mean()
    return 100 * math.expm1(md), 100 * math.exp(md) * d.std(ddof=1) / math.sqrt(d.size)


def change_difference(a, a_ref, b, b_ref):
    """change(a, a_ref) - change(b, b_ref) in percentage points, with its
    standard error from the per-token e = (a - a_ref) - (b - b_ref)."""
    da = (np.asarray(a) - np.asarray(a_ref)).ravel()
    e = da - (np.asarray(b) - np.asarray(b_ref)).ravel()
    diff = change(a, a_ref)[0] - change(b, b_ref)[0]
    return diff, 100 * math.exp(da.mean()) * e.std(ddof=1) / math.sqrt(e.size)
