#!/usr/bin/env python3
"""hf_decode_bench.py — decode tokens/s and GPU memory of a Llama-architecture
model in transformers, with veloxquant.hf.Cache presets against transformers'
DynamicCache (sdpa attention), at long contexts.

    python3 tools/hf_decode_bench.py [--batch 8] [--contexts 8192,32768,65536]
        [--methods dynamic,quality-4bit,balanced-3bit] [--steps 16] [--json FILE]

The model has the shape of Llama-3.1-8B (32 layers, 32 query heads, 8 kv
heads, head dim 128, hidden 4096, MLP 14336, vocabulary 128256), bf16, its
weights randomly initialised from that config, so nothing is downloaded.
--tiny shrinks it to a 2-layer model of the same head layout for a check on a
CPU.

What is timed is the decode step, the thing a compressed cache changes: each
cache is filled with the context's keys and values directly (random normal
tensors of the model's kv shape, in chunks, through the cache's own append),
without running the prefill, then `--steps` single-token forward passes of
the batch are timed after `--warmup` untimed ones (the device synchronized
around them). The attention's cost does not depend on the values of the keys,
so random tokens time the same as real ones.

Memory: "kv GiB" is what the cache itself holds (veloxquant: its memory
report's total bytes less the unused pages of its pools; DynamicCache: its key
and value tensors); "peak GiB" is the most device memory the process had in
use (cudaMemGetInfo: torch's reserved pool plus the library's allocations),
sampled after the cache is filled and after every decode step, less what was
in use before the cache was made (after a garbage collection and
torch.cuda.empty_cache(), so the previous method's memory is gone), so it
includes the decode's working memory. A method that does not fit is reported
as out of memory, and the next one runs.
"""

import argparse
import gc
import json
import sys
import time

import torch


def llama_config(tiny):
    from transformers import LlamaConfig
    if tiny:
        return LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=128, vocab_size=1024, max_position_embeddings=131072,
                           rope_theta=500000.0)
    return LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, vocab_size=128256, max_position_embeddings=131072,
                       rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)


def make_model(cfg, device, dtype):
    from transformers import LlamaForCausalLM
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model.eval()
    model.set_attn_implementation("sdpa")
    return model


def device_used(device):
    if device.type != "cuda":
        return 0
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def fill_dynamic(cfg, batch, ctx, device, dtype):
    from transformers import DynamicCache
    cache = DynamicCache()
    hkv, d = cfg.num_key_value_heads, cfg.head_dim
    g = torch.Generator(device=device).manual_seed(0)
    for layer in range(cfg.num_hidden_layers):
        k = torch.randn(batch, hkv, ctx, d, device=device, dtype=dtype, generator=g)
        v = torch.randn(batch, hkv, ctx, d, device=device, dtype=dtype, generator=g)
        cache.update(k, v, layer)
        del k, v
    kv_bytes = 2 * cfg.num_hidden_layers * batch * hkv * ctx * d * torch.finfo(dtype).bits // 8
    return cache, kv_bytes


def fill_veloxquant(model, cfg, method, batch, ctx, device, chunk):
    import veloxquant.hf
    cache = veloxquant.hf.Cache(model, method, residual_tokens=0, grow_pages=256,
                                capacity_pages=max(64, batch * (ctx + 255) // 256 + 8))
    hkv, d = cfg.num_key_value_heads, cfg.head_dim
    adt = cache.other_dtype  # bf16 tokens go in as the cache converts them
    g = torch.Generator(device=device).manual_seed(0)
    cache._ensure_sequences(batch)
    for layer in range(cfg.num_hidden_layers):
        lay = cache.layers[layer]
        for t in range(0, ctx, chunk):
            n = min(chunk, ctx - t)
            k = torch.randn(batch, hkv, n, d, device=device, dtype=adt, generator=g)
            v = torch.randn(batch, hkv, n, d, device=device, dtype=adt, generator=g)
            if not lay.is_initialized:
                lay.lazy_initialization(k, v)
            if t == 0 and cache.smooth:  # as the first forward would: the key scales from its queries
                q = torch.randn(batch, cfg.num_attention_heads, n, d, device=device, dtype=adt, generator=g)
                cache.vq.fit_transforms(layer, cache.seq_ids, k, v, q)
            cache.vq.append(layer, cache.seq_ids, k, v)
        lay.n = ctx
    mem = cache.memory()
    return cache, int(mem["total_bytes"] - mem["slack_bytes"])  # what it holds, not its unused pages


def decode(model, cache, batch, ctx, steps, warmup, device, profile=None, sample=None):
    """The median and mean step in seconds (sample(), when given, is called
    after every step, outside the timed span); with profile (a label), `steps`
    more steps under torch.profiler after the timed ones, whose kernels and
    host calls are printed by self device time (the timed steps are not
    profiled: the profiler slows the host)."""
    import veloxquant.hf
    kw = veloxquant.hf.cache_kwargs(model, cache)
    ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
    times = []
    with torch.no_grad():
        for i in range(warmup + steps):
            pos = torch.full((batch, 1), ctx + i, dtype=torch.long, device=device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t = time.perf_counter()
            out = model(input_ids=ids, position_ids=pos, use_cache=True, **kw)
            ids = out.logits[:, -1:].argmax(-1)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= warmup:
                times.append(time.perf_counter() - t)
            if sample:
                sample()
        if profile:
            from torch.profiler import ProfilerActivity, profile as torch_profile
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            with torch_profile(activities=acts) as prof:
                for i in range(steps):
                    pos = torch.full((batch, 1), ctx + warmup + steps + i, dtype=torch.long, device=device)
                    out = model(input_ids=ids, position_ids=pos, use_cache=True, **kw)
                    ids = out.logits[:, -1:].argmax(-1)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
            key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            print(f"-- profile of {steps} steps: {profile}, by {key}", flush=True)
            print(prof.key_averages().table(sort_by=key, row_limit=25), flush=True)
    times.sort()
    return times[len(times) // 2], sum(times) / len(times)


def run_one(model, cfg, method, batch, ctx, args, device, dtype):
    import veloxquant
    import veloxquant.hf
    gc.collect()  # the previous method's cache, if a reference cycle still held it
    if device.type == "cuda":
        torch.cuda.empty_cache()
    base = device_used(device)
    peak = [base]

    def sample():
        peak[0] = max(peak[0], device_used(device))

    cache = None
    try:
        if method == "dynamic":
            cache, kv_bytes = fill_dynamic(cfg, batch, ctx, device, dtype)
        else:
            cache, kv_bytes = fill_veloxquant(model, cfg, method, batch, ctx, device, args.chunk)
        sample()
        label = f"{method} at {ctx} tokens" if method in args.profile.split(",") else None
        med, mean = decode(model, cache, batch, ctx, args.steps, args.warmup, device, label, sample)
        return {"method": method, "batch": batch, "context": ctx, "step_ms": med * 1e3, "mean_step_ms": mean * 1e3,
                "tokens_per_s": batch / med, "kv_gib": kv_bytes / 2**30, "peak_gib": (peak[0] - base) / 2**30}
    except torch.OutOfMemoryError as e:
        return {"method": method, "batch": batch, "context": ctx, "error": "out of memory: " + str(e).split("\n")[0]}
    except veloxquant.UnsupportedError as e:  # a method this device's cache does not run: the next one goes on
        return {"method": method, "batch": batch, "context": ctx, "error": "unsupported: " + str(e)}
    except veloxquant.OutOfMemoryError as e:
        return {"method": method, "batch": batch, "context": ctx, "error": "out of memory: " + str(e)}
    finally:
        if method != "dynamic":
            veloxquant.hf.uninstall(model)
        del cache
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--contexts", default="8192,32768,65536", help="comma-separated context lengths")
    ap.add_argument("--methods", default="dynamic,quality-4bit,balanced-3bit",
                    help="'dynamic' (transformers DynamicCache, sdpa) and veloxquant presets, comma-separated")
    ap.add_argument("--steps", type=int, default=16, help="timed decode steps (the median is reported)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=4096, help="tokens per append when filling a veloxquant cache")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model of the same head layout (a CPU check)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--profile", default="", metavar="METHODS",
                    help="comma-separated methods whose steps are profiled (torch.profiler, after the timed ones)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = torch.bfloat16
    cfg = llama_config(args.tiny)
    t = time.perf_counter()
    model = make_model(cfg, device, dtype)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"model: Llama {'tiny' if args.tiny else '3.1-8B shape'}, {cfg.num_hidden_layers} layers, "
          f"Hq {cfg.num_attention_heads}, Hkv {cfg.num_key_value_heads}, D {cfg.head_dim}, bf16, random weights "
          f"({time.perf_counter() - t:.1f} s); device {gpu}; torch {torch.__version__}", flush=True)
    rows = []
    print(f"{'context':>8} {'method':>14} {'step ms':>9} {'tok/s':>9} {'vs dynamic':>10} {'kv GiB':>8} "
          f"{'peak GiB':>10}", flush=True)
    for ctx in (int(c) for c in args.contexts.split(",")):
        ref = None
        for method in args.methods.split(","):
            r = run_one(model, cfg, method, args.batch, ctx, args, device, dtype)
            rows.append(r)
            if "error" in r:
                print(f"{ctx:>8} {method:>14} {r['error']}", flush=True)
                continue
            if method == "dynamic":
                ref = r
            ratio = f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x" if ref else "-"
            kvr = f" (kv {ref['kv_gib'] / r['kv_gib']:.1f}x smaller)" if ref and r is not ref else ""
            r["speedup"] = r["tokens_per_s"] / ref["tokens_per_s"] if ref else None
            print(f"{ctx:>8} {method:>14} {r['step_ms']:>9.2f} {r['tokens_per_s']:>9.1f} {ratio:>10} "
                  f"{r['kv_gib']:>8.2f} {r['peak_gib']:>10.2f}{kvr}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": gpu, "torch": torch.__version__, "batch": args.batch, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
