"""The perplexity change of each cache method against f16 on the shipped text,
through transformers + veloxquant.hf, compared token by token with the C
runtime's `vq perplexity` on the same windows.

Make the C side's per-token file first, e.g.
    vq perplexity --kv kivi4,kivi2 --ctx 512 --windows 64 --no-center --threads 1 \
        --tokens c.tsv data/pride_and_prejudice.txt
then
    python bench/python_perplexity.py c.tsv [--windows N] [--threads T] [--json]
The same windows (the file's, or its first N) run through
veloxquant.hf.token_nll (vq perplexity's protocol: windows from an empty cache,
prefill chunks of 256, the second half scored; residual_tokens=0 as
--residual 0; raw keys as --no-center). Prints, per method, both runtimes'
perplexity and change, the difference of the changes and its paired standard
error (python/tests/ppl_compare.py says why paired). Progress on stderr.
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np
import torch
import transformers

import veloxquant.hf as vh

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))
from ppl_compare import change, change_difference, read_tokens_tsv  # noqa: E402
from run_info import provenance, run_info  # noqa: E402  (bench/, the script's own folder, is on sys.path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokens", help="the per-token file of `vq perplexity --tokens`")
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=str(ROOT / "data" / "pride_and_prejudice.txt"))
    ap.add_argument("--windows", type=int, default=0, help="the file's first N windows (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--nll", help="FILE.npz: the Python side's per-token nll, read from it when it holds these "
                                  "methods and windows, else computed and written there")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = read_tokens_tsv(a.tokens)
    C, W = g["ctx"], g["windows"] if not a.windows else min(a.windows, g["windows"])
    model = pathlib.Path(a.model)
    tok = vh.gguf_tokenizer(model)
    m = transformers.AutoModelForCausalLM.from_pretrained(model.parent, gguf_file=model.name,
                                                          dtype=torch.float32).eval()
    ids = torch.tensor(tok(pathlib.Path(a.text).read_text(encoding="utf-8")).input_ids)
    same = bool((ids[:W * C].numpy().reshape(W, C) == g["tokens"][:W]).all())
    if not same:
        sys.exit("python_perplexity: the tokenizer's ids differ from the C runtime's in these windows")
    rows, py = [], {}
    saved = dict(np.load(a.nll)) if a.nll and pathlib.Path(a.nll).exists() else {}
    for meth in g["nll"]:
        if meth in saved and saved[meth].shape[0] >= W and saved[meth].shape[1] == C // 2:
            py[meth] = saved[meth][:W]
            continue
        t = time.perf_counter()
        py[meth] = vh.token_nll(m, ids, meth, ctx=C, windows=W, residual_tokens=0).numpy()
        print(f"python_perplexity: {meth}: {W} windows in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        if a.nll:
            saved[meth] = py[meth]
            np.savez(a.nll, **saved)
    c = {k: v[:W] for k, v in g["nll"].items()}
    for meth in g["nll"]:
        cc, cse = change(c[meth], c["f16"])
        pc, pse = change(py[meth], py["f16"])
        diff, dse = change_difference(py[meth], py["f16"], c[meth], c["f16"])
        rows.append({"kv": meth, "c_ppl": float(np.exp(c[meth].mean())), "c_change": cc, "c_change_se": cse,
                     "py_ppl": float(np.exp(py[meth].mean())), "py_change": pc, "py_change_se": pse,
                     "difference_pp": diff, "difference_se_pp": dse,
                     "max_abs_token_nll_diff": float(np.abs(py[meth] - c[meth]).max())})
    info = run_info(ctx=C, windows=W, scored_tokens=W * C // 2, threads=a.threads)
    if a.json:
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return
    print(f"# perplexity change, C runtime vs transformers + veloxquant.hf, {W} windows of {C} "
          f"({W * C // 2} scored tokens), {provenance(info)}")
    print("| method | C ppl | C change (se) | Python ppl | Python change (se) | difference (paired se) | "
          "max token nll diff |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kv']} | {r['c_ppl']:.4f} | {r['c_change']:+.2f}% ({r['c_change_se']:.2f}) | {r['py_ppl']:.4f} | "
              f"{r['py_change']:+.2f}% ({r['py_change_se']:.2f}) | {r['difference_pp']:+.2f} pp "
              f"({r['difference_se_pp']:.2f}) | {r['max_abs_token_nll_diff']:.4f} |")


if __name__ == "__main__":
    main()
