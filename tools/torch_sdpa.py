"""torch_sdpa.py - the uncompressed baselines for bench/results/h200.md, run
on the GPU machine by tools/device_check.sh: f16 decode through torch.nn.functional.
scaled_dot_product_attention (Sq = 1), the same after dequantizing a 2-bit
KIVI cache with torch ops (dequantize-then-SDPA), and bf16 prefill SDPA
(Sq = Skv = 4096) for the prefill target. --decode: the f16 decode rows only;
--b1: batch 1 only. Median of CUDA-event timings,
rotating over enough input copies to overflow the L2."""
import math
import sys

import torch
import torch.nn.functional as F


def bench(fn, sets, reps=30, warm=5):
    times = []
    for i in range(reps + warm):
        args = sets[i % len(sets)]
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(*args)
        e1.record()
        e1.synchronize()
        if i >= warm:
            times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2] * 1e-3


def nsets(nbytes):
    return max(1, min(32, math.ceil(400e6 / nbytes)))


def sdpa(q, k, v, gqa):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)


def dequant_2bit(codes, scale, zero, g, axis_tokens):
    """codes [B,H,S,D/4] u8 -> [B,H,S,D] f16 via per-group scale/zero."""
    c = torch.stack([(codes >> s) & 3 for s in (0, 2, 4, 6)], dim=-1).flatten(-2).to(torch.float16)
    if axis_tokens:  # keys: groups of g tokens per channel, scale [B,H,S/g,D]
        s = scale.repeat_interleave(g, dim=2)[:, :, : c.shape[2]]
        z = zero.repeat_interleave(g, dim=2)[:, :, : c.shape[2]]
    else:  # values: groups of g channels per token, scale [B,H,S,D/g]
        s = scale.repeat_interleave(g, dim=3)
        z = zero.repeat_interleave(g, dim=3)
    return c * s + z


def main():
    decode_only = "--decode" in sys.argv[1:]
    batches = (1,) if "--b1" in sys.argv[1:] else (1, 8)
    dev = "cuda"
    torch.manual_seed(0)
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev).random_(0, 255)
    b = torch.empty_like(a)
    t = bench(lambda x, y: y.copy_(x), [(a, b)])
    print(f"copy bandwidth (read+write): {2 * n / t / 1e9:.0f} GB/s")
    del a, b
    D, Hq, g = 128, 32, 32
    print(f"{'what':28s} {'B':>2s} {'Hq':>3s} {'Hkv':>4s} {'Skv':>7s} {'us':>9s} {'GB/s':>7s}")
    for skv in (4096, 32768, 131072):
        for B in batches:
            for hkv in (32, 8):
                kvbytes = 2 * B * hkv * skv * D * 2
                sets = []
                for _ in range(nsets(kvbytes)):
                    q = torch.randn(B, Hq, 1, D, dtype=torch.float16, device=dev)
                    k = torch.randn(B, hkv, skv, D, dtype=torch.float16, device=dev)
                    v = torch.randn(B, hkv, skv, D, dtype=torch.float16, device=dev)
                    sets.append((q, k, v))
                t = bench(lambda q, k, v: sdpa(q, k, v, hkv != Hq), sets)
                print(f"{'f16 sdpa':28s} {B:2d} {Hq:3d} {hkv:4d} {skv:7d} {t * 1e6:9.1f} {kvbytes / t / 1e9:7.0f}",
                      flush=True)
                del sets
                # dequantize-then-SDPA on a 2-bit KIVI cache (g = 32, f16 scales)
                if B == 1 and not decode_only:
                    cb = B * hkv * skv * (D // 4) * 2 + B * hkv * skv * 2 * 2 * (D // g) * 2
                    sets = []
                    for _ in range(nsets(cb)):
                        q = torch.randn(B, Hq, 1, D, dtype=torch.float16, device=dev)
                        kc = torch.randint(0, 256, (B, hkv, skv, D // 4), dtype=torch.uint8, device=dev)
                        vc = torch.randint(0, 256, (B, hkv, skv, D // 4), dtype=torch.uint8, device=dev)
                        ks = torch.rand(B, hkv, skv // g, D, dtype=torch.float16, device=dev)
                        kz = torch.rand(B, hkv, skv // g, D, dtype=torch.float16, device=dev)
                        vs = torch.rand(B, hkv, skv, D // g, dtype=torch.float16, device=dev)
                        vz = torch.rand(B, hkv, skv, D // g, dtype=torch.float16, device=dev)
                        sets.append((q, kc, ks, kz, vc, vs, vz))

                    def deq_sdpa(q, kc, ks, kz, vc, vs, vz):
                        k = dequant_2bit(kc, ks, kz, g, True)
                        v = dequant_2bit(vc, vs, vz, g, False)
                        return sdpa(q, k, v, hkv != Hq)

                    t = bench(deq_sdpa, sets, reps=10, warm=2)
                    print(f"{'dequant(kivi2)+f16 sdpa':28s} {B:2d} {Hq:3d} {hkv:4d} {skv:7d} {t * 1e6:9.1f} "
                          f"{cb / t / 1e9:7.0f}", flush=True)
                    del sets
    if decode_only:
        return
    # prefill: bf16 flash SDPA, Sq = Skv = 4096, Hq = 32, D = 128
    for hkv in (32, 8):
        q = torch.randn(1, 32, 4096, D, dtype=torch.bfloat16, device=dev)
        k = torch.randn(1, hkv, 4096, D, dtype=torch.bfloat16, device=dev)
        v = torch.randn(1, hkv, 4096, D, dtype=torch.bfloat16, device=dev)
        t = bench(lambda q, k, v: sdpa(q, k, v, hkv != 32), [(q, k, v)])
        flops = 4 * 32 * 4096 * 4096 * D
        print(f"{'bf16 prefill sdpa 4096':28s} {1:2d} {32:3d} {hkv:4d} {4096:7d} {t * 1e6:9.1f} "
              f"{flops / t / 1e12:7.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
