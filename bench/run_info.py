"""What the Python benchmarks record with their results: commit, date (UTC),
machine, thread count, package versions and the load average (the dev
machine is shared: results are only read together with its load)."""

import os
import pathlib
import platform
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def cpu_name():
    """The model name, with the family and model numbers where the name alone does not tell the core
    (a VM's "AMD EPYC": family 25 model 1 is Zen 3, model 17 Zen 4) and the widest vector extension."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                info.setdefault(key.strip(), val.strip())
    except OSError:
        return platform.processor() or "unknown"
    flags = info.get("flags", "").split()
    vec = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return "%s (family %s, model %s, %s)" % (info.get("model name", "unknown"), info.get("cpu family", "?"),
                                             info.get("model", "?"), vec)


def run_info(**extra):
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    info = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{cpu_name()}, {platform.machine()} {os.cpu_count()} cores",
            "python": platform.python_version(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    try:
        import torch
        import transformers
        info.update(torch=torch.__version__, transformers=transformers.__version__)
    except ImportError:
        pass
    info.update(extra)
    return info


def provenance(info):
    """The part of a table's title line that says where its numbers come from."""
    parts = [f"commit {info['commit']}", info["date"], info["machine"]]
    parts += [f"{k} {info[k]}" for k in ("torch", "transformers") if k in info]
    return ", ".join(parts + [f"load {info['load']}"])
