#!/usr/bin/env python3
"""quality_table.py — the README's quality table, in one command.

    python3 tools/quality_table.py --ctx 2048       # every preset + the target rows at 2048 (~30 min on 2 cores)
    python3 tools/quality_table.py                  # 2048 and 8192 tokens (8192 decode-faithfully: hours)
    python3 tools/quality_table.py --render         # only re-render README.md from the saved JSON
    python3 tools/quality_table.py --ctx 2048 --kv f16 --llama-perplexity PATH/llama-perplexity
                                                    # also (re)run llama.cpp's KV cache types

For each context it runs

    vq perplexity --ctx C --windows W --sink 4 --smooth --batch 1 --residual R --kv PRESETS,EXTRA --json \
        --plot quality_C.png TEXT

saves the report as bench/results/model/quality_C.json (commit, date and machine are in it) and then
rewrites the table between the README's `quality-table` markers from every saved quality_*.json run
with that protocol (`--batch 1`; the older chunked runs stay in bench/results for docs/QUALITY.md) and
every llamacpp_*.json. With --llama-perplexity, llama.cpp's own quantized KV cache runs on the same
model file and text by the same protocol: `llama-perplexity -c C --chunks W -b C -ub 1 -fa on`, first
with the f16 cache (its logits saved), then each `-ctk T -ctv T` with `--kl-divergence` against them
(one token per micro-batch, so each token is stored in the cache and then attended, as generation
does; llama.cpp scores 1023 tokens of each window where `vq perplexity` scores 1024), saved as
bench/results/model/llamacpp_C.json with the same row fields.
PRESETS defaults to every preset `vq perplexity` can run (those that need fitted tables are left out:
the model commands take no codebooks); EXTRA are the per-layer allocations with the 8-bit window that
were the cheapest measured within 1 % and within 5 % of the f16 cache (docs/QUALITY.md). `--batch 1` is the
decode-faithful protocol: every token is appended and then attended alone, as in generation, so every
query sees the cache exactly as a decoding step would (with 256-token prefill chunks the chunk's own
tokens are attended through the quantized cache: several times the loss, bench/results/model/protocol/).
Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join("bench", "results", "model")
BEGIN, END = "<!-- quality-table:begin -->", "<!-- quality-table:end -->"
# exact transforms (docs/QUALITY.md), decode-faithful; KIVI pages in f32, the arithmetic the tables
# were measured with (the default, auto, rounds the query to int8 for speed: README "Limits")
OPTIONS = ["--sink", "4", "--smooth", "--batch", "1", "--kivi-arith", "f32"]
# llama.cpp's KV cache types and their bits per element (ggml blocks of 32: a f16 scale, and a f16 min or
# the 5th bits where the type has them)
LLAMACPP_TYPES = {"q8_0": 8.5, "q5_1": 6.0, "q5_0": 5.5, "q4_1": 5.0, "q4_0": 4.5, "iq4_nl": 4.5}
# The allocations of docs/QUALITY.md (bench/results/model/screen/ has the screens that chose them): the
# window at 8 bits (+w8); TurboQuant 3-bit values in the value-sensitive layers 0-2 (the cheapest measured
# within 1 %); KIVI 2-bit keys over 32 tokens with 4-bit keys in the key-sensitive layers 1, 10, 18 (the
# layer scan) and the newest 28 tokens in the window (the cheapest measured within 5 %, <= 3.0 bits);
# kivi4-turbo2 with R = 64 (free at 2048 tokens: the partial key group holds 124 tokens there anyway);
# the mixed-width keys (kivimix-turbo2) the same way; and 20 wide key channels, f16 value scales and
# TurboQuant 3-bit values in layers 0-2: the fewest bits measured within 1 %, <= 3.0 bits
# (bench/results/model/screen/3bits)
EXTRA = ["kivi4-turbo3+w8", "kivi4-turbo2@0-2=kivi4-turbo3+w8", "kivi4-turbo2+w8", "kivi4-turbo2+w8+r64",
         "kivimix-turbo2+w8+r64", "kivimix-turbo2@0-2=kivimix-turbo2/kivi4-turbo3+wide20+vs16+w8+r64",
         "kivi2/turbo2@1.10.18=kivi4/turbo2+w8+r28"]


def presets(vq):
    """The preset names `vq perplexity` accepts, from `vq presets --json`-free parsing of its error list."""
    out = subprocess.run([vq, "perplexity", "--kv", "?", "data/pride_and_prejudice.txt"], cwd=ROOT,
                         capture_output=True, text=True)
    names = []
    for line in out.stderr.splitlines():
        parts = line.split()
        if len(parts) >= 3 and line.startswith("  ") and parts[2] == "+" and "(needs fitted tables)" not in line:
            names.append(parts[0])
    if not names:
        sys.exit("quality_table: could not read the preset list from `vq perplexity --kv ?`:\n" + out.stderr)
    return [n for n in names if n != "f16"]


def run(vq, ctx, kv, windows, residual):
    cmd = [vq, "perplexity", "--ctx", str(ctx), "--windows", str(windows), *OPTIONS, "--residual", str(residual),
           "--kv", ",".join(kv),
           "--json", "--plot", os.path.join(RESULTS, "quality_%d.png" % ctx), "data/pride_and_prejudice.txt"]
    print("quality_table: " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, check=True, text=True).stdout
    json.loads(out)  # a report, or fail before overwriting the saved one
    with open(os.path.join(ROOT, RESULTS, "quality_%d.json" % ctx), "w") as f:
        f.write(out)


def run_llamacpp(binary, ctx, windows, types, threads):
    """llama.cpp's KV cache types by the table's protocol (module docstring); saves llamacpp_<ctx>.json."""
    import platform
    import re
    import tempfile
    import time
    binary = os.path.abspath(binary)  # the runs' cwd is ROOT
    model = os.path.join("models", "SmolLM2-135M-Instruct.Q4_1.gguf")  # relative to ROOT, the cwd of the runs
    text = os.path.join("data", "pride_and_prejudice.txt")
    common = [binary, "-m", model, "-f", text, "-c", str(ctx), "--chunks", str(windows), "-b", str(ctx), "-ub", "1",
              "-fa", "on", "-t", str(threads)]
    num = r"([-+0-9.eE]+)"
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "f16.kld")
        print("quality_table: " + " ".join(common + ["--kl-divergence-base", base]), file=sys.stderr)
        out = subprocess.run(common + ["--kl-divergence-base", base], cwd=ROOT, capture_output=True, text=True,
                             check=True)
        m = re.findall(r"Final estimate: PPL = " + num + r" \+/- " + num, out.stdout + out.stderr)
        if not m:
            sys.exit("quality_table: no final estimate in llama-perplexity's output:\n" + out.stderr[-2000:])
        rows = [{"ctx": ctx, "kv": "llama.cpp f16", "windows": windows, "scored_tokens": windows * (ctx - 1 - ctx // 2),
                 "ppl": float(m[-1][0]), "ppl_change": 0, "ppl_change_se": 0, "kl": 0, "top1_agreement": 100,
                 "bits_per_element": 16}]
        for t in types:
            cmd = common + ["-ctk", t, "-ctv", t, "--kl-divergence-base", base, "--kl-divergence"]
            print("quality_table: " + " ".join(cmd), file=sys.stderr)
            log = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
            log = log.stdout + log.stderr
            def grab(label):
                g = re.search(re.escape(label) + r"\s*:\s*" + num + r"(?:\s*±\s*" + num + ")?", log)
                if not g:
                    sys.exit("quality_table: no '%s' in llama-perplexity's output:\n%s" % (label, log[-2000:]))
                return float(g.group(1)), float(g.group(2) or "nan")
            ppl = grab("Mean PPL(Q)")[0]
            ratio, ratio_se = grab("Mean PPL(Q)/PPL(base)")
            top1 = grab("Same top p")[0]
            rows.append({"ctx": ctx, "kv": "llama.cpp %s" % t, "windows": windows, "scored_tokens": rows[0]["scored_tokens"],
                         "ppl": ppl, "ppl_change": 100 * (ratio - 1), "ppl_change_se": 100 * ratio_se,
                         "kl": grab("Mean    KLD")[0], "top1_agreement": top1, "bits_per_element": LLAMACPP_TYPES[t]})
    rep = {"tool": "llama-perplexity", "args": common[1:], "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"cpu": _cpu_name(), "arch": platform.machine()}, "info": {"seconds": time.time() - t0},
           "rows": rows}
    with open(os.path.join(ROOT, RESULTS, "llamacpp_%d.json" % ctx), "w") as f:
        json.dump(rep, f, indent=1)


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cell_change(r):
    if r["kv"] in ("f16", "llama.cpp f16"):
        return "reference"
    if r["ppl_change"] > 500:
        return "collapse (%+.0f %%)" % r["ppl_change"]
    return "%+.1f %% ± %.1f" % (r["ppl_change"], r.get("ppl_change_se", float("nan")))


def render():
    reports = []
    for name in sorted(os.listdir(os.path.join(ROOT, RESULTS))):
        if name.startswith(("quality_", "llamacpp_")) and name.endswith(".json"):
            with open(os.path.join(ROOT, RESULTS, name)) as f:
                rep = json.load(f)
            # the README's protocol only: decode-faithful vq runs (--batch 1) and llama.cpp's
            a = rep.get("args", [])
            if rep.get("tool") == "llama-perplexity" or any(x == "--batch" and y == "1" for x, y in zip(a, a[1:])):
                reports.append(rep)
    if not reports:
        sys.exit("quality_table: no %s/quality_*.json yet" % RESULTS)
    ctxs = sorted({r["ctx"] for rep in reports for r in rep["rows"]})
    rows = {}  # (kv) -> ctx -> row
    order = []
    for rep in reports:
        for r in rep["rows"]:
            if r["kv"] not in rows:
                rows[r["kv"]] = {}
                order.append(r["kv"])
            rows[r["kv"]][r["ctx"]] = r
    # sorted by bits at the first context (f16 first), falling back to the fewest bits
    order.sort(key=lambda kv: -(rows[kv][ctxs[0]] if ctxs[0] in rows[kv] else min(rows[kv].values(), key=lambda x: x[
        "bits_per_element"]))["bits_per_element"])
    head = "| kv |" + "".join(" bits (%d) | ppl | change ± s.e. | KL | top-1 |" % c for c in ctxs)
    sub = "|---|" + "---:|---:|---:|---:|---:|" * len(ctxs)
    lines = [head, sub]
    for kv in order:
        cells = []
        for c in ctxs:
            r = rows[kv].get(c)
            if r is None:
                cells.append("– | – | not run | – | –")
            else:
                cells.append("%.2f | %.2f | %s | %.3f | %.1f %%" % (r["bits_per_element"], r["ppl"], cell_change(r),
                                                                    r["kl"], r["top1_agreement"]))
        lines.append("| %s | %s |" % (kv, " | ".join(cells)))
    def options(args):  # the run's options, without the method list and the outputs
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("--kv", "--plot", "--ctx", "--windows", "--threads"):
                skip = True
            elif a.startswith("-") and a != "--json":
                out.append(a)
            elif out and out[-1] in ("--sink", "--batch", "--residual", "--kivi-arith"):
                out.append(a)
        return " ".join(out)

    src = []
    for rep in reports:
        c = sorted({r["ctx"] for r in rep["rows"]})
        scored = max(r["scored_tokens"] for r in rep["rows"])
        if rep.get("tool") == "llama-perplexity":
            src.append("llama.cpp, %s tokens: `llama-perplexity -b %s -ub 1 -fa on` with `-ctk/-ctv` and "
                       "`--kl-divergence`, %s window(s), %d scored tokens, %s, %s, %.0f s" % (
                           "/".join(map(str, c)), c[0], rep["rows"][0]["windows"], scored, rep["date"][:10],
                           rep["machine"]["cpu"], rep["info"]["seconds"]))
            continue
        src.append("%s tokens: `%s`, %s window(s), %d scored tokens, %s, %s, %.0f s" % (
            "/".join(map(str, c)), options(rep["args"]), rep["rows"][0]["windows"], scored,
            rep["date"][:10], rep["machine"]["cpu"], rep["info"]["seconds"]))
    lines.append("")
    lines.append("No layer in f16; bits count everything stored at the end of each window (codes, scales, zeros, "
                 "norms, the window: the partial key group and the newest R tokens, f16 or with +w8 8-bit "
                 "TurboQuant codes, and the sink tokens in f16). Standard errors are paired per scored token (a "
                 "lower bound: tokens are correlated). Runs (the build's commit is in each %s/quality_*.json): %s." % (
                     RESULTS, "; ".join(src)))
    table = "\n".join(lines)
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit("quality_table: README.md has no %s ... %s markers" % (BEGIN, END))
    a, rest = text.split(BEGIN, 1)
    _, b = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(a + BEGIN + "\n" + table + "\n" + END + b)
    print(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vq", default=os.path.join("build", "tools", "vq"), help="the vq binary (build/tools/vq)")
    ap.add_argument("--ctx", default="2048,8192", help="contexts to (re)run, comma-separated")
    ap.add_argument("--kv", default=None, help="presets to run (default: all the model commands take)")
    ap.add_argument("--windows", type=int, default=3, help="windows per context (default 3)")
    ap.add_argument("--residual", type=int, default=0, help="newest tokens in the window (default 0)")
    ap.add_argument("--render", action="store_true", help="only rewrite README.md from the saved JSON")
    ap.add_argument("--llama-perplexity", default=None, metavar="BIN",
                    help="also run llama.cpp's KV cache types with this llama-perplexity binary")
    ap.add_argument("--llama-types", default=",".join(LLAMACPP_TYPES), help="llama.cpp cache types to run")
    ap.add_argument("--llama-only", action="store_true", help="run only llama.cpp (with --llama-perplexity)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama-perplexity's threads")
    a = ap.parse_args()
    if not a.render:
        if not a.llama_only:
            vq = os.path.join(ROOT, a.vq) if not os.path.isabs(a.vq) else a.vq
            kv = a.kv.split(",") if a.kv else presets(vq) + EXTRA
            for c in a.ctx.split(","):
                run(vq, int(c), kv, a.windows, a.residual)
        if a.llama_perplexity:
            types = a.llama_types.split(",")
            unknown = [t for t in types if t not in LLAMACPP_TYPES]
            if unknown:
                sys.exit("quality_table: unknown llama.cpp cache type(s) %s; known: %s" % (
                    ",".join(unknown), ",".join(LLAMACPP_TYPES)))
            for c in a.ctx.split(","):
                run_llamacpp(a.llama_perplexity, int(c), a.windows, types, a.threads)
    render()


if __name__ == "__main__":
    main()
