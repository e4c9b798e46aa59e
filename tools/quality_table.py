#!/usr/bin/env python3
"""quality_table.py — the README's quality table, one command, one cached result per row.

    python3 tools/quality_table.py --llama-perplexity BIN     # run the rows not yet measured, then render
    python3 tools/quality_table.py --add kivi2-turbo2,llama.cpp:iq4_nl   # add rows (run only those)
    python3 tools/quality_table.py --rerun kivi4              # measure these rows again (--rerun all: every row)
    python3 tools/quality_table.py --render                   # only rewrite README.md from the saved rows
    python3 tools/quality_table.py --model gemma              # only Gemma 3 270M's rows (--model smollm2: SmolLM2's)

Two models, one table each in the README's block: SmolLM2-135M (Llama: head dim 64, 3 kv heads) at --ctx
2048 over --windows 4 with llama.cpp's caches beside vq's, and Gemma 3 270M (head dim 256, one kv head, 15
of 18 layers attending a 512-token sliding window) at 2048 tokens over 8 windows and at 8192 over 1, in
columns side by side: the f16 cache, the named presets and the tuned profile in profiles/gemma-3-270m/.
--ctx / --windows replace the selected model's runs.

The protocol is `vq perplexity`'s (tools/vq/perplexity.c), llama.cpp's llama-perplexity protocol: the
novel's tokens cut into non-overlapping windows of --ctx tokens from the start, each window from an empty
cache, the second half of each window scored, one token per step (appended, then attended alone, as in
generation), every method paired with the f16 cache on the same tokens (perplexity change with its paired
standard error, mean KL of the next-token distribution from the f16 cache's, top-1 agreement).

A row is one --kv method of `vq perplexity` (a preset, a per-layer allocation or a profile FILE; NAME=SPEC
shows SPEC as NAME in the table), or
`llama.cpp:TYPE`, llama.cpp's own quantized KV cache (`-ctk TYPE -ctv TYPE`) on the same model file and
text: `llama-perplexity -c C --chunks W -b C -ub 1 -fa on` first with its f16 cache (its log-probabilities
saved, --kl-divergence-base), then each type with --kl-divergence against them. `-ub 1` makes one token
per micro-batch, so every token is stored in the quantized cache and then attended (without it a chunk's
own tokens reach its queries unquantized); `-fa on` is required for a quantized V cache. llama.cpp
tokenizes the same GGUF and puts BOS first in a window only where the model asks for it, as vq does;
it scores 1023 tokens of each window (the logits of positions C/2 .. C-2) where vq scores 1024 (from
C/2 - 1). --check compares the two runtimes' tokens and f16 per-token log-likelihoods.

Each row is saved as bench/results/model/quality/ctx<C>_w<W>_<row>.json (Gemma's under gemma-3-270m/)
with the commit of the build, the date, the machine, the command and the seconds it took; a later call runs
only the rows that have no file (the f16 reference runs with every `vq perplexity` call anyway: its row is
refreshed for free). A table renders every saved row of its runs, sorted by bits.
Standard library only.
"""
import argparse
import json
import os
import platform
import re
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS_DIR = os.path.join("bench", "results", "model", "quality")
TEXT = os.path.join("data", "pride_and_prejudice.txt")
BEGIN, END = "<!-- quality-table:begin -->", "<!-- quality-table:end -->"
# exact transforms (docs/QUALITY.md), decode-faithful; KIVI pages in f32, the arithmetic the tables
# were measured with (the default, auto, rounds the query to int8 for speed: README "Limits")
OPTIONS = ["--sink", "4", "--smooth", "--batch", "1", "--kivi-arith", "f32", "--residual", "0"]
# llama.cpp's KV cache types and their bits per element (ggml blocks of 32: a f16 scale, and a f16 min or
# the 5th bits where the type has them)
LLAMACPP_TYPES = {"f16": 16.0, "q8_0": 8.5, "q5_1": 6.0, "q5_0": 5.5, "q4_1": 5.0, "q4_0": 4.5, "iq4_nl": 4.5}
# The rows of the README table: the f16 reference, the named presets (one per budget), the method presets
# they are built from, and llama.cpp's quantized caches. Profiles and more rows come with --add and stay
# (their saved files are rows of the table).
DEFAULT_ROWS = ["f16", "quality-4bit", "balanced-3bit", "compact-2.5bit",
                "kivi4", "kivi4-turbo3", "kivimix-turbo2+w8+r64", "kivi2",
                "llama.cpp:f16", "llama.cpp:q8_0", "llama.cpp:q5_0", "llama.cpp:q4_0"]
# Each model: its GGUF, where its rows are saved, its default rows and its runs ((ctx, windows) pairs: the
# columns of its table). SmolLM2's rows stay at the top of ROWS_DIR.
MODELS = {
    "smollm2": {"title": "SmolLM2-135M", "gguf": os.path.join("models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                "dir": ROWS_DIR, "rows": DEFAULT_ROWS, "runs": [(2048, 4)]},
    "gemma": {"title": "Gemma 3 270M", "gguf": os.path.join("models", "gemma-3-270m-q4_k_m.gguf"),
              "dir": os.path.join(ROWS_DIR, "gemma-3-270m"),
              "rows": ["f16", "quality-4bit", "balanced-3bit", "compact-2.5bit",
                       os.path.join("profiles", "gemma-3-270m", "tuned-3.1bit.vqprof"),
                       os.path.join("profiles", "gemma-3-270m", "searched-3.4bit.vqprof"),
                       os.path.join("profiles", "gemma-3-270m", "tuned-3.35bit.vqprof"),
                       os.path.join("profiles", "gemma-3-270m", "tuned-3.6bit.vqprof")],
              "runs": [(2048, 8), (8192, 1)]},
}


def split_row(row):
    """NAME=SPEC names a vq method (a `=` before any `@`; `@LAYERS=METHOD` overrides are part of a SPEC)."""
    at, eq = row.find("@"), row.find("=")
    if eq > 0 and (at < 0 or eq < at):
        return row[:eq], row[eq + 1:]
    return None, row


def label(row):
    """A row's name in the table: NAME of NAME=SPEC, a profile FILE by its base name, llama.cpp types as
    `llama.cpp TYPE`."""
    name, row = split_row(row)
    if name:
        return name
    if row.startswith("llama.cpp:"):
        return "llama.cpp " + row.split(":", 1)[1]
    if os.path.isfile(os.path.join(ROOT, row)):
        return os.path.splitext(os.path.basename(row))[0] + " (profile)"
    return row


def row_path(m, ctx, windows, row):
    slug = re.sub(r"[^A-Za-z0-9.+=@-]+", "_", label(row)).strip("_")
    return os.path.join(ROOT, m["dir"], "ctx%d_w%d_%s.json" % (ctx, windows, slug))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def save_row(m, ctx, windows, row, rec):
    os.makedirs(os.path.join(ROOT, m["dir"]), exist_ok=True)
    with open(row_path(m, ctx, windows, row), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")


def run_vq(m, vq, ctx, windows, rows, threads, tokens_out):
    """One `vq perplexity` over every missing vq row (f16 runs as the reference anyway); one file per row."""
    kv = [r for r in rows if r != "f16"] or ["f16"]
    spec = {r: split_row(r)[1] for r in ["f16"] + kv}
    cmd = [vq, "perplexity", "-m", m["gguf"], "--ctx", str(ctx), "--windows", str(windows), *OPTIONS,
           "--threads", str(threads), "--kv", ",".join(spec[r] for r in kv), "--json", TEXT]
    if tokens_out:
        cmd[-1:-1] = ["--tokens", tokens_out]
    print("quality_table: " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, check=True, text=True).stdout
    rep = json.loads(out)
    by_kv = {r["kv"]: r for r in rep["rows"] if r["ctx"] == ctx}
    for row in ["f16"] + kv:
        r = by_kv.get(spec[row])
        if r is None:
            sys.exit("quality_table: `vq perplexity` reported no row '%s' (rows: %s)" % (row, ", ".join(by_kv)))
        save_row(m, ctx, windows, row, {
            "runtime": "vq", "row": row, "label": label(row), "spec": spec[row], "commit": rep.get("commit"), "date": rep["date"],
            "machine": rep["machine"], "isa": rep.get("isa"), "threads": rep.get("threads"),
            "seconds_of_run": rep["info"]["seconds"], "methods_in_run": len(by_kv),
            "command": ["vq"] + rep["args"], "result": r})


def import_tokens(m, tsv, bits, vq_run):
    """Rows from the --tokens file of a `vq perplexity` run stopped before its last window (--keep-tokens
    writes it, flushed per window): every window it holds whole, paired with f16 token by token as vq
    does (perplexity change and its paired standard error); the KL and top-1 agreement are not in the
    file (left empty), and the bits per element, deterministic at a window's end, come from `bits`
    (LABEL=B, counted by `vq tune`'s counter)."""
    import math
    with open(tsv) as f:
        head = f.readline().rstrip("\n").split("\t")
        cols = [h[4:] for h in head[4:]]
        wins = {}
        for line in f:
            x = line.rstrip("\n").split("\t")
            if len(x) != len(head):
                continue  # a line cut by the stop
            wins.setdefault((int(x[0]), int(x[1])), []).append([float(v) for v in x[4:]])
    full = sorted(k for k, v in wins.items() if len(v) == k[0])
    if not full or len({c for c, _ in full}) != 1:
        sys.exit("quality_table: %s holds no whole window of one --ctx" % tsv)
    ctx, n_win = full[0][0], len(full)
    if [w for _, w in full] != list(range(n_win)):
        sys.exit("quality_table: %s: the whole windows are not the first %d" % (tsv, n_win))
    ref = cols.index("f16")
    rows = [r for k in full for r in wins[k] if not math.isnan(r[ref])]
    n = len(rows)
    ref_ppl = math.exp(sum(r[ref] for r in rows) / n)
    for i, name in enumerate(cols):
        d = [r[i] - r[ref] for r in rows]
        md = sum(d) / n
        sd = math.sqrt(max(0.0, (sum(x * x for x in d) / n - md * md) * n / (n - 1)))
        ppl = math.exp(sum(r[i] for r in rows) / n)
        row = name
        lab = label(row)
        if lab not in bits and name != "f16":
            sys.exit("quality_table: --import-bits has no bits for '%s'" % lab)
        res = {"ctx": ctx, "kv": name, "windows": n_win, "scored_tokens": n, "ppl": ppl,
               "ppl_change": 100 * (ppl / ref_ppl - 1), "ppl_change_se": 100 * math.exp(md) * sd / math.sqrt(n),
               "kl": None, "top1_agreement": None, "bits_per_element": 16.0 if name == "f16" else bits[lab]}
        save_row(m, ctx, n_win, row, {
            "runtime": "vq", "row": row, "label": lab, "spec": name, "commit": git_commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(tsv))),
            "machine": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "arch": platform.machine()},
            "stopped_run": {"tokens_file": os.path.basename(tsv), "windows_whole": n_win, "command": vq_run,
                            "bits": "vq tune's counter (vq_cache_memory of a one-layer cache of each kind filled "
                                    "to %d tokens, the last appended alone)" % ctx},
            "result": res})
    print("quality_table: imported %d whole windows of %d tokens from %s" % (n_win, ctx, tsv), file=sys.stderr)
    return ctx, n_win


def git_commit():
    try:
        c = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def llama_base(m, binary, ctx, windows, threads, cache_dir, rerun):
    """llama.cpp's f16 run; its saved log-probabilities are the base of every type's KL. Returns (file, log)."""
    stem = "" if m is MODELS["smollm2"] else os.path.splitext(os.path.basename(m["gguf"]))[0] + "_"
    base = os.path.join(cache_dir, "llama_f16_%sctx%d_w%d.kld" % (stem, ctx, windows))
    logf = base + ".log"
    if rerun or not os.path.exists(base) or not os.path.exists(logf):
        cmd = llama_cmd(m, binary, ctx, windows, threads) + ["--kl-divergence-base", base]
        print("quality_table: " + " ".join(cmd), file=sys.stderr)
        t0 = time.time()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("quality_table: llama-perplexity failed:\n" + (p.stdout + p.stderr)[-3000:])
        with open(logf, "w") as f:
            f.write("seconds %.1f\n" % (time.time() - t0) + p.stdout + p.stderr)
    with open(logf) as f:
        return base, f.read()


def llama_cmd(m, binary, ctx, windows, threads):
    return [binary, "-m", m["gguf"], "-f", TEXT, "-c", str(ctx), "--chunks", str(windows), "-b", str(ctx), "-ub", "1",
            "-fa", "on", "-t", str(threads)]


NUM = r"([-+0-9.eE]+|nan|inf)"


def grab(log, lab):
    g = re.search(re.escape(lab) + r"\s*:\s*" + NUM + r"(?:\s*±\s*" + NUM + ")?", log)
    if not g:
        sys.exit("quality_table: no '%s' in llama-perplexity's output:\n%s" % (lab, log[-3000:]))
    return float(g.group(1)), float(g.group(2) or "nan")


def llama_build(log):
    m = re.search(r"build: (\d+ \([0-9a-f]+\))", log)
    return m.group(1) if m else "unknown"


def run_llama(m, binary, ctx, windows, types, threads, cache_dir, rerun_base):
    """llama.cpp's rows (module docstring); one file per type."""
    binary = os.path.abspath(binary)
    base, base_log = llama_base(m, binary, ctx, windows, threads, cache_dir, rerun_base)
    m = re.findall(r"Final estimate: PPL = " + NUM + r" \+/- " + NUM, base_log)
    if not m:
        sys.exit("quality_table: no final estimate in llama-perplexity's f16 output:\n" + base_log[-3000:])
    scored = windows * (ctx - 1 - ctx // 2)
    common = {"runtime": "llama.cpp", "commit": git_commit(), "llama_build": llama_build(base_log),
              "machine": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "arch": platform.machine()},
              "threads": threads}
    secs = float(base_log.split("\n", 1)[0].split()[1])
    procs = {}  # the types run side by side (with -t 1 each, no thread waits on another under load)
    for t in types:
        if t == "f16":
            continue
        cmd = llama_cmd(m, binary, ctx, windows, threads) + ["-ctk", t, "-ctv", t, "--kl-divergence-base", base,
                                                          "--kl-divergence"]
        print("quality_table: " + " ".join(cmd), file=sys.stderr)
        procs[t] = (subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                    time.time())
    for t in types:
        row = "llama.cpp:" + t
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if t == "f16":
            r = {"ctx": ctx, "kv": label(row), "windows": windows, "scored_tokens": scored, "ppl": float(m[-1][0]),
                 "ppl_change": 0, "ppl_change_se": 0, "kl": 0, "top1_agreement": 100, "bits_per_element": 16}
            save_row(m, ctx, windows, row, dict(common, row=row, label=label(row), date=date, seconds=secs,
                                                command=llama_cmd(m, "llama-perplexity", ctx, windows, threads) +
                                             ["--kl-divergence-base", "F16.kld"], result=r))
            continue
        p, t0 = procs[t]
        log = p.communicate()[0]
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if p.returncode != 0:
            sys.exit("quality_table: llama-perplexity -ctk %s failed:\n%s" % (t, log[-3000:]))
        ratio, ratio_se = grab(log, "Mean PPL(Q)/PPL(base)")
        kl, kl_se = grab(log, "Mean    KLD")
        r = {"ctx": ctx, "kv": label(row), "windows": windows, "scored_tokens": scored,
             "ppl": grab(log, "Mean PPL(Q)")[0], "ppl_change": 100 * (ratio - 1), "ppl_change_se": 100 * ratio_se,
             "kl": kl, "kl_se": kl_se, "top1_agreement": grab(log, "Same top p")[0],
             "bits_per_element": LLAMACPP_TYPES[t]}
        save_row(m, ctx, windows, row, dict(common, row=row, label=label(row), date=date, seconds=time.time() - t0,
                                            side_by_side=len(procs),
                                            command=llama_cmd(m, "llama-perplexity", ctx, windows, threads) +
                                         ["-ctk", t, "-ctv", t, "--kl-divergence-base", "F16.kld", "--kl-divergence"],
                                         result=r))


def check(base, tokens_tsv, ctx):
    """The two runtimes on the same protocol: the same token ids in every window, and how close their f16
    per-token log-likelihoods are (llama.cpp's saved log-probabilities are 16-bit quantized)."""
    with open(base, "rb") as f:
        if f.read(8) != b"_logits_":
            sys.exit("quality_table: %s is not a llama-perplexity logits file" % base)
        n_ctx, n_vocab, n_chunk = struct.unpack("<3i", f.read(12))
        ltok = struct.unpack("<%di" % (n_ctx * n_chunk), f.read(4 * n_ctx * n_chunk))
        nv = 2 * ((n_vocab + 1) // 2) + 4
        first, n_scored = n_ctx // 2, n_ctx - 1 - n_ctx // 2
        lnll = []  # llama.cpp's f16 nll of token p + 1 for p = first .. ctx-2, per chunk
        for c in range(n_chunk):
            for i in range(n_scored):
                rec = f.read(2 * nv)
                scale, min_lp = struct.unpack("<2f", rec[:8])
                tok = ltok[c * n_ctx + first + i + 1]
                (q,) = struct.unpack_from("<H", rec, 8 + 2 * tok)
                lnll.append((c, first + i + 1, -(scale * q + min_lp)))
    vtok, vnll = {}, {}
    with open(tokens_tsv) as f:
        head = f.readline().rstrip("\n").split("\t")
        col = head.index("nll_f16")
        for line in f:
            x = line.rstrip("\n").split("\t")
            if int(x[0]) != ctx:
                continue
            w, p = int(x[1]), int(x[2])
            vtok[(w, p)] = int(x[3])
            vnll[(w, p)] = float(x[col])
    wins = sorted({w for w, _ in vtok if w < n_chunk})  # the windows vq's token file has
    same = sum(1 for c in wins for p in range(n_ctx) if vtok.get((c, p)) == ltok[c * n_ctx + p])
    pairs = [(n, vnll[(c, p)]) for c, p, n in lnll if (c, p) in vnll]
    d = [v - l for l, v in pairs]
    import math
    mean_l = sum(l for l, _ in pairs) / len(pairs)
    mean_v = sum(v for _, v in pairs) / len(pairs)
    out = {"windows": len(wins), "tokens_compared": len(wins) * n_ctx, "tokens_identical": same,
           "scored_compared": len(pairs), "ppl_llama_f16": math.exp(mean_l), "ppl_vq_f16": math.exp(mean_v),
           "mean_nll_difference": sum(d) / len(d), "mean_abs_nll_difference": sum(abs(x) for x in d) / len(d),
           "max_abs_nll_difference": max(abs(x) for x in d)}
    print("quality_table: check: %d of %d window tokens identical; on the %d tokens both score, f16 ppl llama.cpp "
          "%.3f vs vq %.3f, mean nll difference %+.4f (vq - llama.cpp), mean |difference| %.4f, max %.3f" % (
              same, len(wins) * n_ctx, len(pairs), out["ppl_llama_f16"], out["ppl_vq_f16"], out["mean_nll_difference"],
              out["mean_abs_nll_difference"], out["max_abs_nll_difference"]), file=sys.stderr)
    return out


def cell_change(r):
    if r["kl"] in (0, None) and r["ppl_change"] == 0 and r["bits_per_element"] == 16:
        return "reference"
    if r["ppl_change"] > 500:
        return "collapse (%+.0f %%)" % r["ppl_change"]
    return "%+.1f %% ± %.1f" % (r["ppl_change"], r.get("ppl_change_se", float("nan")))


def load_rows(m, ctx, windows):
    prefix = "ctx%d_w%d_" % (ctx, windows)
    d = os.path.join(ROOT, m["dir"])
    recs = []
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.startswith(prefix) and name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                recs.append(json.load(f))
    return recs


def run_notes(m, recs, ctx, windows):
    """The footnote parts of one run's rows: tokens, commands, machines, dates."""
    vq = [x for x in recs if x["runtime"] == "vq"]
    ll = [x for x in recs if x["runtime"] == "llama.cpp"]
    notes = ["%d tokens per window, %d window%s, %s scored tokens per row" % (
        ctx, windows, "s" if windows > 1 else "",
        " / ".join("%d (%s)" % (x[0]["result"]["scored_tokens"], x[0]["runtime"]) for x in (vq, ll) if x))]
    if vq:
        named = ["%s = `%s`" % (x["label"], x["spec"]) for x in vq
                 if x.get("spec") not in (None, x["label"]) and not x["label"].endswith("(profile)")]
        model = "" if m is MODELS["smollm2"] else "-m %s " % m["gguf"]
        notes.append("vq: `vq perplexity %s%s`%s" % (model, " ".join(OPTIONS), " (%s)" % ", ".join(named) if named else ""))
    if ll:
        build = ll[0].get("llama_build", "unknown")
        notes.append("llama.cpp%s: `llama-perplexity -b %d -ub 1 -fa on -ctk T -ctv T --kl-divergence` against "
                     "its own f16 run" % ("" if build == "unknown" else " " + build, ctx))
    stopped = [x for x in recs if x.get("stopped_run")]
    if stopped:
        w_s = stopped[0].get("windows", windows)
        notes.append("a run stopped after its %d whole window%s (%s: KL and top-1 not recorded, bits counted by "
                     "`vq tune`'s counter)" % (w_s, "s" if w_s > 1 else "",
                                              ", ".join(x["label"] for x in stopped)))
    dates = sorted({x["date"][:10] for x in recs})
    machines = sorted({x["machine"]["cpu"] for x in recs})
    # the README names no commits: each row's file keeps its own
    notes.append("%s; %s (each row's file in %s/ has its commit, date, command and time)" % (
        ", ".join(machines), ", ".join(dates), m["dir"]))
    chk = os.path.join(ROOT, m["dir"], "check_ctx%d_w%d.json" % (ctx, windows))
    if os.path.exists(chk):
        with open(chk) as f:
            c = json.load(f)
        notes.append("the two f16 caches on the first %d window(s) (`--check`): %d of %d tokens identical; on the %d "
                     "tokens both score, perplexity %.2f (llama.cpp) and %.2f (vq), per-token log-likelihoods %.3f "
                     "apart on average" % (c["windows"], c["tokens_identical"], c["tokens_compared"],
                                           c["scored_compared"], c["ppl_llama_f16"], c["ppl_vq_f16"],
                                           c["mean_abs_nll_difference"]))
    return notes


BITS_NOTE = ("Bits count everything each cache stores at the end of a window (codes, scales, zeros, norms, the window "
             "of recent tokens and the sink tokens; llama.cpp: its block formats). Standard errors are paired per "
             "scored token (a lower bound: tokens are correlated).")


def table_single(m, ctx, windows):
    """One run's rows, one line each, sorted by bits (SmolLM2's table)."""
    recs = load_rows(m, ctx, windows)
    if not recs:
        sys.exit("quality_table: no %s/ctx%d_w%d_*.json yet" % (m["dir"], ctx, windows))
    recs.sort(key=lambda x: (-x["result"]["bits_per_element"], x["runtime"] != "vq", x["label"]))
    lines = ["| kv | runtime | bits | ppl | change ± s.e. | KL | top-1 |", "|---|---|---:|---:|---:|---:|---:|"]
    for x in recs:
        r = x["result"]
        lines.append("| %s | %s | %.2f | %.2f | %s | %.3f | %.1f %% |" % (
            x["label"].replace("llama.cpp ", ""), x["runtime"], r["bits_per_element"], r["ppl"], cell_change(r),
            r["kl"], r["top1_agreement"]))
    lines.append("")
    lines.append(BITS_NOTE + " Runs: " + "; ".join(run_notes(m, recs, ctx, windows)) + ".")
    return "\n".join(lines)


def table_columns(m, runs):
    """Several runs side by side, one row per method, in columns per run (the first run's bits order)."""
    per_run = []
    for ctx, w in runs:  # a run's rows; a row it lacks from the saved run of this ctx with the most windows below
        rows, top = {}, 0
        for ww in range(w, 0, -1):
            for x in load_rows(m, ctx, ww):
                if x["label"] not in rows:
                    rows[x["label"]], x["windows"] = x, ww
                    top = top or ww
        if rows:
            per_run.append((ctx, top, rows))
    if not per_run:
        sys.exit("quality_table: no %s/ctx*_w*_*.json of the runs %s yet" % (m["dir"], runs))
    order = []
    for _, _, rows in per_run:
        order += sorted((x for x in rows.values() if x["label"] not in {o["label"] for o in order}),
                        key=lambda x: (-x["result"]["bits_per_element"], x["label"]))
    head = "| kv |" + "".join(" bits | ppl | change ± s.e. | KL | top-1 |" if i == 0 else
                              " bits at %d | change at %d | KL at %d |" % (c, c, c)
                              for i, (c, _, _) in enumerate(per_run))
    ncol = 5 + 3 * (len(per_run) - 1)
    lines = [head.replace("ppl |", "ppl at %d |" % per_run[0][0], 1), "|---|" + "---:|" * ncol]
    for o in order:
        cells = []
        for i, (_, top, rows) in enumerate(per_run):
            x = rows.get(o["label"])
            if x is None:
                cells += ["", "", "", "", ""] if i == 0 else ["", "", ""]
                continue
            r = x["result"]
            kl = "" if r["kl"] is None else "%.3f" % r["kl"]
            top1 = "" if r["top1_agreement"] is None else "%.1f %%" % r["top1_agreement"]
            # a row from fewer windows: its change is paired with f16 on those windows, its ppl is not comparable
            own = x["windows"] == top
            change = cell_change(r) + ("" if own else " (%d windows)" % x["windows"])
            cells += (["%.2f" % r["bits_per_element"], "%.2f" % r["ppl"] if own else "", change, kl, top1] if i == 0 else
                      ["%.2f" % r["bits_per_element"], change, kl])
        lines.append("| %s | %s |" % (o["label"], " | ".join(cells)))
    lines.append("")
    runs_txt = " / ".join("%d tokens: %s" % (c, "; ".join(run_notes(m, list(rows.values()), c, w)))
                          for c, w, rows in per_run)
    lines.append(BITS_NOTE + " Runs: " + runs_txt + ".")
    return "\n".join(lines)


def render(runs_of):
    """The README block: SmolLM2's table, then Gemma's (runs_of: model -> its (ctx, windows) runs)."""
    g = MODELS["gemma"]
    parts = [table_single(MODELS["smollm2"], *runs_of["smollm2"][0])]
    if any(load_rows(g, c, ww) for c, w in runs_of["gemma"] for ww in range(w, 0, -1)):
        parts.append("**%s** (head dim 256, one kv head, 15 of 18 layers attending a 512-token sliding window; "
                     "docs/GEMMA.md):\n\n%s" % (g["title"], table_columns(g, runs_of["gemma"])))
    table = "\n\n".join(parts)
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


def run_model(m, a, ctx, windows):
    """Runs the rows of model m at (ctx, windows) that are not saved (or --rerun), and --check."""
    saved = {x["label"]: x["row"] for x in load_rows(m, ctx, windows)}  # rows are known by their label
    rows = [r for r in a.add.split(",") if r] + (a.rows.split(",") if a.rows else m["rows"])
    if not a.rows:
        rows += [r for _, r in sorted(saved.items())]
    rows = [r for i, r in enumerate(rows) if label(r) not in {label(x) for x in rows[:i]}]  # --add wins
    rerun = {label(r) for r in rows} if a.rerun == "all" else {label(r) for r in a.rerun.split(",") if r}
    todo = [r for r in rows if label(r) in rerun or label(r) not in saved]
    vq_todo = [r for r in todo if not r.startswith("llama.cpp:")]
    ll_todo = [r.split(":", 1)[1] for r in todo if r.startswith("llama.cpp:")]
    for t in ll_todo:
        if t not in LLAMACPP_TYPES:
            sys.exit("quality_table: unknown llama.cpp cache type '%s'; known: %s" % (t, ",".join(LLAMACPP_TYPES)))
    print("quality_table: %s, %d tokens x %d windows: to run: %s" % (m["title"], ctx, windows, ", ".join(todo) or
                                                                      "nothing"), file=sys.stderr)
    vq = a.vq if os.path.isabs(a.vq) else os.path.join(ROOT, a.vq)
    if vq_todo:
        tokens_out = os.path.join(a.llama_cache, "vq_rows_%s_ctx%d_w%d.tsv" % (
            os.path.splitext(os.path.basename(m["gguf"]))[0], ctx, windows)) if a.keep_tokens else None
        run_vq(m, vq, ctx, windows, vq_todo, a.threads, tokens_out)
    if ll_todo or a.check:
        if not a.llama_perplexity:
            print("quality_table: no --llama-perplexity: llama.cpp rows %s not run" % ",".join(ll_todo),
                  file=sys.stderr)
        else:
            run_llama(m, a.llama_perplexity, ctx, windows, ll_todo, a.threads, a.llama_cache,
                      "llama.cpp f16" in rerun)
    if a.check:
        if not a.llama_perplexity:
            sys.exit("quality_table: --check needs --llama-perplexity")
        tokens_tsv = os.path.join(a.llama_cache, "vq_tokens_%s_ctx%d_w%d.tsv" % (
            os.path.splitext(os.path.basename(m["gguf"]))[0], ctx, a.check_windows))
        if not os.path.exists(tokens_tsv):
            cmd = [vq, "perplexity", "-m", m["gguf"], "--ctx", str(ctx), "--windows", str(a.check_windows), *OPTIONS,
                   "--threads", str(a.threads), "--kv", "f16", "--tokens", tokens_tsv, TEXT]
            print("quality_table: " + " ".join(cmd), file=sys.stderr)
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        base, _ = llama_base(m, os.path.abspath(a.llama_perplexity), ctx, windows, a.threads, a.llama_cache, False)
        res = check(base, tokens_tsv, ctx)
        res.update({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_commit(),
                    "machine": cpu_name()})
        with open(os.path.join(ROOT, m["dir"], "check_ctx%d_w%d.json" % (ctx, windows)), "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--vq", default=os.path.join("build", "tools", "vq"), help="the vq binary (build/tools/vq)")
    ap.add_argument("--model", choices=["all"] + sorted(MODELS), default="all",
                    help="whose rows to run (all); the README block always shows both models' saved rows")
    ap.add_argument("--ctx", type=int, default=None, help="tokens per window (SmolLM2: 2048; replaces the "
                    "selected model's runs)")
    ap.add_argument("--windows", type=int, default=None,
                    help="windows (SmolLM2: 4, the README table's; another count makes another table)")
    ap.add_argument("--rows", default=None, help="the rows to have (default: the model's default rows, and every "
                    "saved row; SmolLM2: %s)" % ",".join(DEFAULT_ROWS))
    ap.add_argument("--add", default="", help="rows to add to the table (run if not saved)")
    ap.add_argument("--rerun", default="", help="rows to measure again although saved ('all': every row)")
    ap.add_argument("--render", action="store_true", help="only rewrite README.md from the saved rows")
    ap.add_argument("--llama-perplexity", default=None, metavar="BIN", help="llama.cpp's llama-perplexity "
                    "(without it, llama.cpp rows that are not saved are left out)")
    ap.add_argument("--llama-cache", default=os.path.join(tempfile.gettempdir(), "vq_quality_llama"),
                    help="where llama.cpp's f16 log-probabilities (~100 MB a window) and --keep-tokens files are kept")
    ap.add_argument("--keep-tokens", action="store_true", help="vq perplexity writes every position's "
                    "log-likelihoods (--tokens) to --llama-cache, flushed per window: a run stopped early keeps them")
    ap.add_argument("--check", action="store_true", help="compare vq's and llama.cpp's tokens and f16 "
                    "log-likelihoods (needs --llama-perplexity; runs vq's f16 cache with --tokens on "
                    "--check-windows windows)")
    ap.add_argument("--check-windows", type=int, default=1, help="windows of vq's f16 run for --check (1)")
    ap.add_argument("--import-tokens", default=None, metavar="TSV", help="save rows from the --keep-tokens file "
                    "of a run stopped early (its whole windows; one --model), then render")
    ap.add_argument("--import-bits", default="", metavar="LABEL=B,...", help="the bits per element of the imported "
                    "rows (vq tune's counter)")
    ap.add_argument("--import-command", default="", help="the stopped run's command, recorded in the rows")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of both runtimes")
    a = ap.parse_args()
    runs_of = {}
    for name, m in MODELS.items():
        mine = a.model in ("all", name) and (a.ctx or a.windows)
        runs_of[name] = [(a.ctx or m["runs"][0][0], a.windows or m["runs"][0][1])] if mine else m["runs"]
    if a.import_tokens:
        if a.model == "all":
            sys.exit("quality_table: --import-tokens needs --model")
        bits = {k: float(v) for k, v in (x.rsplit("=", 1) for x in a.import_bits.split(",") if x)}
        import_tokens(MODELS[a.model], a.import_tokens, bits, a.import_command)
    elif not a.render:
        os.makedirs(a.llama_cache, exist_ok=True)
        for name, m in MODELS.items():
            if a.model in ("all", name):
                for ctx, windows in runs_of[name]:
                    run_model(m, a, ctx, windows)
    render(runs_of)


if __name__ == "__main__":
    main()
