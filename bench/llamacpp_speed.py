#!/usr/bin/env python3
"""llamacpp_speed.py — decode speed of one GGUF model: veloxquant's model runtime against llama.cpp, side by side.

    python3 bench/llamacpp_speed.py --llama-bench PATH/llama-bench [--model GGUF] [--kv f16,kivi2,...] [--ctx 8192]

Both runtimes run the same GGUF (--model, default models/SmolLM2-135M-Instruct.Q4_1.gguf) with the same thread count,
one after the other, alternating, --rounds times:
- `vq bench model --ctx C --kv LIST --threads T --json`: ms per decoded token at about 17 tokens of context
  ("short") and at C tokens, per cache method (f16 first);
- `llama-bench -m MODEL -t T -fa 1 -p 0 -n N -d 0,C -ctk K -ctv K -o json`: ms per generated token from an
  empty context (the mean over N tokens) and after C tokens of context, for each llama.cpp cache type K.
The load average (`/proc/loadavg`) is recorded before every command: the machine may be shared, so read
ratios within a round, and rounds with a load above the core count with care. Writes a markdown file in
bench/results/ (commit, date, machine, the load and every command's numbers) and prints it.
Standard library only.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

from run_info import cpu_name  # bench/, the script's own folder, is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join("models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_json(cmd):
    print("llamacpp_speed: " + " ".join(cmd), file=sys.stderr)
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("llamacpp_speed: failed (%d):\n%s" % (p.returncode, p.stderr[-3000:]))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bench", required=True, help="llama.cpp's llama-bench binary")
    ap.add_argument("--model", default=MODEL, help="the GGUF both runtimes decode (default %(default)s)")
    ap.add_argument("--vq", default=os.path.join("build", "tools", "vq"))
    ap.add_argument("--kv", default="f16,kivi2", help="vq cache methods (f16 first)")
    ap.add_argument("--llama-types", default="f16,q8_0,q4_0", help="llama.cpp cache types (-ctk = -ctv)")
    ap.add_argument("--ctx", type=int, default=8192, help="the long context (8192)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32, help="decoded tokens per measurement (both runtimes)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vq-args", default="", help="more options for vq bench model (e.g. '--sink 4 --smooth')")
    ap.add_argument("--out", default=None, help="markdown file (default bench/results/speed_llamacpp_<date>.md)")
    a = ap.parse_args()
    vq = a.vq if os.path.isabs(a.vq) else os.path.join(ROOT, a.vq)
    lb = os.path.abspath(a.llama_bench)
    runs = []  # (round, runtime, kv, ctx, ms_per_token, load, extra)
    meta = {}
    for rnd in range(a.rounds):
        ld = load()
        rep = run_json([vq, "bench", "model", "-m", a.model, "--ctx", str(a.ctx), "--kv", a.kv,
                        "--steps", str(a.steps), "--threads", str(a.threads), "--json"] + a.vq_args.split())
        meta.setdefault("vq_commit", rep.get("commit"))
        meta.setdefault("isa", rep.get("isa"))
        for r in rep["rows"]:
            if r["case"] == "short":
                runs.append((rnd, "veloxquant", "f16 (any)", r["ctx"], r["time"], ld, r.get("cpu_time")))
            else:
                runs.append((rnd, "veloxquant", r["kv"], r["ctx"], r["time"], ld, r.get("cpu_time")))
        for t in a.llama_types.split(","):
            ld = load()
            rows = run_json([lb, "-m", a.model, "-t", str(a.threads), "-fa", "1", "-p", "0", "-n", str(a.steps),
                             "-d", "0,%d" % a.ctx, "-ctk", t, "-ctv", t, "-r", "2", "-o", "json"])
            for r in rows:
                meta.setdefault("llama_build", "%s (%s)" % (r.get("build_number"), r.get("build_commit")))
                runs.append((rnd, "llama.cpp", t, r["n_depth"], 1e-6 * r["avg_ns"] / r["n_gen"], ld, None))
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    machine = "%s, %d logical CPUs, %s" % (cpu_name(), os.cpu_count(), platform.machine())
    lines = ["# %s decode: veloxquant's model runtime against llama.cpp" % os.path.basename(a.model), "",
             "`python3 bench/llamacpp_speed.py %s` (bench/llamacpp_speed.py says what each command measures)." %
             " ".join(sys.argv[1:]).replace(os.path.abspath(a.llama_bench), "llama-bench"), "",
             "- date %s; commit %s (vq binary %s, ISA %s); llama.cpp build %s" % (
                 date, commit, meta.get("vq_commit"), meta.get("isa"), meta.get("llama_build")),
             "- machine: %s; %d threads each; load average (1/5/15 min) before each command in the table" % (
                 machine, a.threads),
             "- ms per decoded token (wall); veloxquant: %d steps at about 17 tokens of context (`short`, the "
             "f16 cache) and at %d tokens; llama.cpp: the mean over %d generated tokens from an empty context "
             "(`-d 0`) and after %d tokens (`-d %d`), flash attention on, `-ctk = -ctv`" % (
                 a.steps, a.ctx, a.steps, a.ctx, a.ctx), "",
             "| round | runtime | KV cache | context | ms / token | vs llama.cpp f16 (same round, context) | load |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for rnd, rt, kv, ctx, ms, ld, _ in runs:
        ref = [m for r2, rt2, kv2, c2, m, _, _ in runs if r2 == rnd and rt2 == "llama.cpp" and kv2 == "f16" and
               (c2 == ctx or (c2 == 0 and ctx < 64))]
        ratio = "%.2fx" % (ref[0] / ms) if ref else "-"
        lines.append("| %d | %s | %s | %d | %.2f | %s | %s |" % (rnd + 1, rt, kv, ctx, ms, ratio, ld))
    lines += ["", "`vs llama.cpp f16` is llama.cpp's f16 time over this row's (above 1: faster than llama.cpp); "
              "veloxquant's short case (17 tokens) is compared with llama.cpp's `-d 0`."]
    out = a.out or os.path.join(ROOT, "bench", "results", "speed_llamacpp_%s.md" % time.strftime("%Y-%m-%d"))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
