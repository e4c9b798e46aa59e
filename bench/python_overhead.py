"""Per-call overhead of the Python binding (Python call -> C kernel start).

For tiny inputs (where the kernel's own work is tens of nanoseconds) it times,
in one run:
  * the public function with out= given (what a decode loop calls),
  * the public function allocating its outputs,
  * the extension module's wrapper alone (_vq.<fn>(ctx, ...)),
for NumPy and PyTorch CPU tensors. The time of a tiny call is an upper bound
of the binding's overhead, since it includes the C call (validation plus
work). Usage: python bench/python_overhead.py [--json]
"""

import json
import sys
import time

import numpy as np

import veloxquant as vq
from veloxquant import _vq
from veloxquant._runtime import cpu_ctx

from run_info import run_info  # bench/, the script's own folder, is on sys.path


def per_call_us(fn, n=20000, repeats=7):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def cases(mk):
    """(name, public call with out=, public call allocating, raw extension call) per case."""
    ctx = cpu_ctx()
    rows = []
    v_idx, packed = mk(np.zeros((1, 2), np.uint8)), mk(np.zeros((1, 1), np.uint8))
    rows.append(("rabitq_pack_values [1,2]",
                 lambda: vq.rabitq_pack_values(v_idx, out=packed),
                 lambda: vq.rabitq_pack_values(v_idx),
                 lambda: _vq.rabitq_pack_values(ctx, v_idx, packed)))
    B, H, S, D, g = 1, 1, 1, 64, 32
    q = mk(np.zeros((B, H, 1, D), np.float32))
    kc, vc = mk(np.zeros((B, H, S, D // 2), np.uint8)), mk(np.zeros((B, H, S, D // 2), np.uint8))
    ks, kz = mk(np.ones((B, H, 1, D), np.float16)), mk(np.zeros((B, H, 1, D), np.float16))
    vs, vz = mk(np.ones((B, H, S, D // g), np.float16)), mk(np.zeros((B, H, S, D // g), np.float16))
    out = mk(np.zeros((B, H, 1, D), np.float32))
    args = (q, kc, ks, kz, vc, vs, vz, g, 0.125)
    rows.append(("scalar_fused_decode_attend Skv=1 D=64 (7 tensors)",
                 lambda: vq.scalar_fused_decode_attend(*args, 1, bits=4, out=out),
                 lambda: vq.scalar_fused_decode_attend(*args, 1, bits=4),
                 lambda: _vq.scalar_fused_decode_attend(ctx, *args, 1, out, False, 4, None, 0)))
    k, v = mk(np.zeros((B, H, S, D), np.float32)), mk(np.zeros((B, H, S, D), np.float32))
    rows.append(("fused_sdpa plain Skv=1 D=64",
                 lambda: vq.fused_sdpa(q, k, v, 0.125, out=out),
                 lambda: vq.fused_sdpa(q, k, v, 0.125),
                 lambda: _vq.fused_sdpa(ctx, q, 1, (k,), (), 1, (v,), (), 0.125, None, out, False, 0, None)))
    return rows


def main():
    frameworks = [("numpy", lambda a: a)]
    try:
        import torch
        torch.set_num_threads(1)
        frameworks.append(("torch", torch.from_numpy))
    except ImportError:
        pass
    vq.set_num_threads(1)
    info = run_info(isa=vq.isa())
    # the load of a shared machine inflates every Python operation alike: a
    # no-op call and np.empty in the same run give the scale
    info["noop_call_us"] = per_call_us(lambda: None)
    info["np_empty_us"] = per_call_us(lambda: np.empty(64, np.float32))
    rows = []
    for fwname, mk in frameworks:
        for name, with_out, alloc, raw in cases(mk):
            rows.append({"framework": fwname, "call": name, "public_out_us": per_call_us(with_out),
                         "public_alloc_us": per_call_us(alloc), "extension_us": per_call_us(raw)})
    if "--json" in sys.argv:
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return
    print(f"# binding overhead, commit {info['commit']}, {info['date']}, {info['machine']}, "
          f"Python {info['python']}, ISA {info['isa']}, load {info['load']}, "
          f"1 thread; a Python no-op call {info['noop_call_us']:.3f} us, np.empty(64) {info['np_empty_us']:.3f} us")
    print("| framework | call | public, out= (us) | public, allocating (us) | extension only (us) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['framework']} | {r['call']} | {r['public_out_us']:.2f} | {r['public_alloc_us']:.2f} | "
              f"{r['extension_us']:.2f} |")


if __name__ == "__main__":
    main()
