#!/usr/bin/env python3
"""kv_tier_sim.py — perplexity of a cache that keeps a few *important* old tokens at high precision, simulated.

    build-pyenv/bin/python tools/kv_tier_sim.py [--ctx 2048] [--windows 3] [--configs ...] [--json FILE]

Why. The output error that quantized values add to one attention row is sum_j p_j e_j, of variance
sum_j p_j^2 var(e_j); quantized keys move the row by sum_j p_j ds_j (v_j - out), again weighted by p_j^2. On
SmolLM2-135M (keys, values and queries captured from the first 2048-token window of the shipped text) the
attention sinks hold about 40 % of sum_j p_j^2 and the newest 128 tokens about 38 %, and of the rest most sits
on about 2 % of the tokens: the ones the cache already keeps exact (sinks, the f16 window) plus a handful of
heavy hitters. A token's importance is visible while it is in the recent window (the attention it gets from the
queries of those steps), so a cache could keep the few tokens that matter most at 8 bits when they leave the
window, as ZipCache and MiKV keep salient tokens at higher precision, for a small part of a bit per element.

What it runs. transformers' Llama (the GGUF model dequantized to f32, `gguf_file=`) with an attention function
that fake-quantizes each layer's keys and values (quantize -> decode, numpy, as tools/kv_error_sim.py):
KIVI keys per channel over 128-token groups (min-max, 2/3/4 bits), TurboQuant-like values (random signs,
Hadamard, Lloyd-Max N(0,1) codes, least-squares scale per token, 2/3 bits). For query t, key j is exact when
j < 4 (the sink), j > t - R (the recent window), or j is a heavy hitter (and j <= t - R): the `--heavy` fraction
of each (layer, kv head)'s tokens with the most attention received from the R queries j .. j + R - 1 (summed
over the query heads of the kv head; the threshold is that fraction's quantile over the window, so it is a
budget, not a causal rule). Scoring follows `vq perplexity`: non-overlapping windows of --ctx tokens, the
second half scored, everything paired against the exact (f32) cache of the same run. Bits per element count
codes and one f16 scale + zero per group (keys) or one f32 scale per token (values), the exact window and sink
tokens at 16 bits and heavy tokens at 8.5 bits.

This is a simulation of an idea with fake quantization in float64/f32, not the library's cache: `vq perplexity`
measures the formats the cache has. Needs torch, transformers, gguf and numpy (the Python package's test
environment, build-pyenv/). Progress on stderr.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kv_error_sim import GROUP, hadamard, kivi_keys, turbo_values  # noqa: E402

SINK = 4


def parse_config(text):
    """'kivi2/turbo2', 'f16/turbo3', 'kivi4/f16'; optional ':R=128,heavy=0.02'."""
    name, _, opts = text.partition(":")
    kname, vname = name.split("/")
    cfg = {"name": text, "kbits": 0 if kname == "f16" else int(kname[4:]),
           "vbits": 0 if vname == "f16" else int(vname[5:]), "R": 128, "heavy": 0.0}
    for o in filter(None, opts.split(",")):
        key, _, val = o.partition("=")
        cfg[key] = float(val) if key == "heavy" else int(val)
    return cfg


def bits_per_element(cfg, S, D):
    exact = min(S, SINK + cfg["R"])
    heavy = cfg["heavy"] * max(0, S - exact)
    low = S - exact - heavy
    kb = 16 if cfg["kbits"] == 0 else cfg["kbits"] + 32 / GROUP
    vb = 16 if cfg["vbits"] == 0 else cfg["vbits"] + 32 / D
    return (exact * 16 + heavy * 8.5 + low * (kb + vb) / 2) / S


class Sim:
    """The attention function transformers calls for every layer (AttentionInterface)."""

    def __init__(self, torch, D):
        self.torch, self.cfg = torch, None
        rng = np.random.default_rng(7)
        self.signs = np.where(rng.random(D) < 0.5, -1.0, 1.0)
        self.rot = hadamard(D)

    def __call__(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        torch, cfg = self.torch, self.cfg
        q, k, v = query[0].float(), key[0].float(), value[0].float()  # [Hq|Hkv, S, D]
        Hq, S, D = q.shape
        Hkv = k.shape[0]
        G = Hq // Hkv
        sc = scaling if scaling is not None else 1 / math.sqrt(D)
        t = torch.arange(S)[:, None]
        j = torch.arange(S)[None, :]
        causal = j <= t
        s_exact = (q @ k.repeat_interleave(G, 0).transpose(1, 2)) * sc
        if cfg is None or (cfg["kbits"] == 0 and cfg["vbits"] == 0):
            p = torch.softmax(s_exact.masked_fill(~causal, -math.inf), -1)
            return (p @ v.repeat_interleave(G, 0)).transpose(0, 1)[None], None
        R = cfg["R"]
        exact = ((j < SINK) | (j > t - R)) & causal
        kn, vn = k.double().numpy(), v.double().numpy()
        kq = torch.from_numpy(kivi_keys(kn, cfg["kbits"])).float() if cfg["kbits"] else k
        vq = torch.from_numpy(turbo_values(vn, cfg["vbits"], self.rot, self.signs)).float() if cfg["vbits"] else v
        s_q = (q @ kq.repeat_interleave(G, 0).transpose(1, 2)) * sc
        use = exact[None].expand(Hq, S, S)
        if cfg["heavy"] > 0:
            # importance: attention received while in the window (queries j .. j+R-1), summed over the group
            p0 = torch.softmax(torch.where(use, s_exact, s_q).masked_fill(~causal, -math.inf), -1)
            win = (t >= j) & (t < j + R)
            imp = (p0 * win).sum(1).reshape(Hkv, G, S).sum(1)  # [Hkv, S]
            cand = torch.arange(SINK, max(SINK, S - R))
            heavy = torch.zeros(Hkv, S, dtype=torch.bool)
            n_keep = int(round(cfg["heavy"] * len(cand)))
            if n_keep > 0:
                for h in range(Hkv):
                    heavy[h, cand[torch.argsort(-imp[h, cand])[:n_keep]]] = True
            use = use | (heavy.repeat_interleave(G, 0)[:, None, :] & causal)
        p = torch.softmax(torch.where(use, s_exact, s_q).masked_fill(~causal, -math.inf), -1)
        out = (p * use) @ v.repeat_interleave(G, 0) + (p * ~use) @ vq.repeat_interleave(G, 0)
        return out.transpose(0, 1)[None], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--text", default="data/pride_and_prejudice.txt")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=[
        "f16/turbo2", "f16/turbo2:heavy=0.02", "kivi2/f16", "kivi2/f16:heavy=0.02",
        "kivi2/turbo2", "kivi2/turbo2:heavy=0.02", "kivi2/turbo2:heavy=0.05", "kivi4/turbo2:heavy=0.02",
        "kivi2/turbo3:heavy=0.02", "kivi2/turbo2:R=64,heavy=0.02"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    a = ap.parse_args()

    import torch
    import transformers
    import veloxquant as vq
    if a.threads:
        torch.set_num_threads(a.threads)
    model_dir, model_file = os.path.split(os.path.abspath(a.model))
    m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=model_file, dtype=torch.float32)
    m.eval()
    D = m.config.hidden_size // m.config.num_attention_heads
    sim = Sim(torch, D)
    transformers.AttentionInterface.register("vq_tier_sim", sim)
    m.set_attn_implementation("vq_tier_sim")
    tok = vq.hf.gguf_tokenizer(a.model)
    text = open(a.text, encoding="utf-8").read()
    # a prefix of ~8 bytes a token is enough (tokenizing all of the novel takes a minute); the last token of a
    # cut may differ from the whole text's, and it lies beyond the windows
    ids = tok(text[:16 * a.ctx * a.windows], add_special_tokens=False)["input_ids"]
    if len(ids) < a.ctx * a.windows + 1:
        sys.exit(f"kv_tier_sim: the text has {len(ids)} tokens, fewer than --ctx x --windows")
    C, first = a.ctx, a.ctx // 2 - 1
    cfgs = [parse_config(c) for c in a.configs]

    def run(cfg, w):
        """log-probabilities [C/2, V] of window w's scored positions, and the targets"""
        sim.cfg = cfg
        x = torch.tensor([ids[w * C:(w + 1) * C]])
        with torch.no_grad():
            lp = torch.log_softmax(m(x).logits[0, first:C - 1].double(), -1).numpy()
        print(f"window {w + 1}/{a.windows} {cfg['name'] if cfg else 'exact'} done", file=sys.stderr, flush=True)
        return lp, x[0, first + 1:].numpy()

    ref = [run(None, w) for w in range(a.windows)]
    ref_nll = np.concatenate([-lp[np.arange(len(t)), t] for lp, t in ref])
    print(f"ctx {C}, {a.windows} windows, {len(ref_nll)} scored tokens; exact ppl {math.exp(ref_nll.mean()):.4f}")
    print(f"{'config':32s} {'bits':>6s} {'ppl':>9s} {'change':>8s} {'+-se':>6s} {'KL':>7s}", flush=True)
    rows = []
    for c in cfgs:  # a row as soon as its windows are done: the long runs report as they go
        lt, kl = [], []
        for w in range(a.windows):
            lp, t = run(c, w)
            lt.append(-lp[np.arange(len(t)), t])
            kl.append((np.exp(ref[w][0]) * (ref[w][0] - lp)).sum(-1))
        lt, kl = np.concatenate(lt), np.concatenate(kl)
        d = lt - ref_nll
        change = math.exp(d.mean()) - 1
        se = math.exp(d.mean()) * d.std(ddof=1) / math.sqrt(len(d))
        b = bits_per_element(c, C, D)
        rows.append({"config": c["name"], "bits": b, "ppl": math.exp(lt.mean()), "change": change, "se": se,
                     "kl": kl.mean()})
        print(f"{c['name']:32s} {b:6.2f} {math.exp(lt.mean()):9.4f} {100 * change:+7.2f}% {100 * se:5.2f}% "
              f"{kl.mean():7.4f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ctx": C, "windows": a.windows, "exact_ppl": math.exp(ref_nll.mean()), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
