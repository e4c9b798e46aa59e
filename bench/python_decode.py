"""Decode-step time of SmolLM2-135M (transformers, CPU) at a long context with
three caches, same machine, same thread count, one run:
  * transformers' DynamicCache (f32 keys/values, concatenated every step),
  * transformers' QuantizedCache (quanto backend, 2 bits, its default residual
    of 128 f32 tokens; HQQ when --hqq and installed),
  * veloxquant.hf.Cache(model, method="kivi2") (the library's kernels on the
    compressed cache, no dequantized copy).
The context is filled by chunked prefill, then `--steps` greedy decode steps
are timed one by one (median reported). Bytes of the K/V cache each method
holds are reported beside.

Usage: python bench/python_decode.py [--context 4096] [--steps 16] [--threads N] [--json]
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import torch
import transformers

import veloxquant as vq
import veloxquant.hf
from run_info import provenance, run_info  # bench/, the script's own folder, is on sys.path

ROOT = pathlib.Path(__file__).resolve().parents[1]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load(path):
    from transformers import AutoModelForCausalLM
    tok = vq.hf.gguf_tokenizer(path)
    m = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return m.eval(), tok


def fill(m, ids, cache, chunk=512):
    with torch.no_grad():
        for t in range(0, ids.shape[1], chunk):
            logits = m(ids[:, t:t + chunk], past_key_values=cache).logits
    return logits[:, -1:].argmax(-1)


def time_steps(m, cache, nxt, steps):
    times = []
    with torch.no_grad():
        for _ in range(steps):
            t = time.perf_counter()
            logits = m(nxt, past_key_values=cache).logits
            times.append(time.perf_counter() - t)
            nxt = logits[:, -1:].argmax(-1)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--hqq", action="store_true", help="also the HQQ backend of QuantizedCache")
    ap.add_argument("--caches", default="dynamic,quanto,veloxquant",
                    help="comma list of dynamic, quanto, hqq, veloxquant")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    vq.set_num_threads(a.threads)
    log(f"python_decode: loading {a.model}")
    m, tok = load(pathlib.Path(a.model))
    text = (ROOT / "data" / "pride_and_prejudice.txt").read_text(encoding="utf-8")
    ids = tok(text[: a.context * 8], return_tensors="pt").input_ids[:, : a.context]
    assert ids.shape[1] == a.context, "text too short for the context"
    cfg = m.config
    kv_elems = cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 2

    want = set(a.caches.split(",")) | ({"hqq"} if a.hqq else set())

    def caches():
        if "dynamic" in want:
            yield "DynamicCache (f32)", lambda: transformers.DynamicCache()
        for b in ("quanto", "hqq"):
            if b in want:
                yield f"QuantizedCache ({b}, 2-bit)", lambda b=b: transformers.QuantizedCache(b, cfg, nbits=2)
        if "veloxquant" in want:
            yield "veloxquant kivi2", lambda: vq.hf.Cache(m, method="kivi2")

    rows = []
    for name, make in caches():
        log(f"python_decode: {name}: prefill {a.context} tokens")
        try:
            cache = make()
            t = time.perf_counter()
            nxt = fill(m, ids, cache)
            prefill_s = time.perf_counter() - t
            log(f"python_decode: {name}: {a.steps} decode steps")
            times = time_steps(m, cache, nxt, a.steps)
        except Exception as e:  # a backend that does not install or run here is reported, not fatal
            rows.append({"cache": name, "error": f"{type(e).__name__}: {e}"})
            log(f"python_decode: {name}: {type(e).__name__}: {e}")
            continue
        finally:
            vq.hf.uninstall(m)
        row = {"cache": name, "step_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
               "prefill_s": prefill_s}
        if isinstance(cache, vq.hf.Cache):
            mem = cache.memory()
            row["kv_bytes"] = mem["code_bytes"] + mem["param_bytes"] + mem["residual_bytes"]
        elif name.startswith("DynamicCache"):
            row["kv_bytes"] = 4 * kv_elems * cache.get_seq_length()
        rows.append(row)
        del cache
    base = next((r["step_ms"] for r in rows if r["cache"].startswith("DynamicCache") and "step_ms" in r), None)
    for r in rows:
        if "step_ms" in r and base:
            r["vs_dynamic"] = r["step_ms"] / base
    info = run_info(threads=a.threads, context=a.context, steps=a.steps, isa=vq.isa())
    if a.json:
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return
    print(f"# decode step, SmolLM2-135M f32, context {a.context}, {a.threads} threads, {provenance(info)}")
    print("| cache | decode step (ms, median) | min (ms) | vs DynamicCache | K/V bytes | prefill (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['cache']} | failed: {r['error'][:80]} | | | | |")
            continue
        kb = f"{r['kv_bytes'] / 2**20:.1f} MiB" if "kv_bytes" in r else "?"
        print(f"| {r['cache']} | {r['step_ms']:.1f} | {r['min_ms']:.1f} | {r.get('vs_dynamic', 0):.2f}x | {kb} | "
              f"{r['prefill_s']:.1f} |")


if __name__ == "__main__":
    main()
