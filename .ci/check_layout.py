#!/usr/bin/env python3
"""check_layout.py — fails when the tree leaves the layout docs/INTERNALS.md
("Dependencies") states:

* an #include in src/ that points against the dependency order
      core <- formats <- codecs <- attention <- calib <- cache <- persist
  (a module includes only itself and the modules before it); the backends
  src/cpu/ and src/cuda/ are leaves that implement headers owned by the
  modules they serve, so they may include any module, and nothing outside a
  backend includes it (src/cpu/<isa> may include another ISA's header of
  src/cpu: AVX-512 files build on AVX2 helpers);
* tools/ and python/ reaching into src/ (they use include/ only; the tests
  may include src/ to test internals);
* a source file name (.c .h .cu .cuh .py .sh) used twice in the tree.

Usage: python3 .ci/check_layout.py   (from anywhere; exit 1 on a finding)
"""
import os
import re
import subprocess
import sys

ORDER = ["core", "formats", "codecs", "attention", "calib", "cache", "persist"]
BACKENDS = {"cpu", "cuda"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".py", ".sh")


def module_of(path):
    """src/<module>/... -> module (None outside src/)."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "src" else None


def resolve(includer, name, files):
    """The repository path an include names: relative to the includer's folder,
    then to src/, then include/ (None for a system or generated header)."""
    for base in (os.path.dirname(includer), "src", "include"):
        p = os.path.normpath(os.path.join(base, name))
        if p in files:
            return p
    return None


def main():
    root = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True,
                                   cwd=os.path.dirname(os.path.abspath(__file__))).strip()
    os.chdir(root)
    files = set(subprocess.check_output(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                                        text=True).split("\n")) - {""}
    problems = []
    for f in sorted(files):
        if not f.endswith((".c", ".h", ".cu", ".cuh")) or not os.path.exists(f):
            continue
        text = open(f, encoding="utf-8", errors="replace").read()
        src_mod = module_of(f)
        for name in INCLUDE.findall(text):
            target = resolve(f, name, files)
            if target is None:
                continue
            dst_mod = module_of(target)
            if f.startswith(("tools/", "python/")) and target.startswith("src/"):
                problems.append(f"{f}: includes {target}: tools and python use include/ only")
                continue
            if src_mod is None or dst_mod is None or src_mod == dst_mod:
                continue
            if dst_mod in BACKENDS:
                problems.append(f"{f}: includes {target}: nothing outside src/{dst_mod} includes a backend")
            elif src_mod in BACKENDS:
                continue
            elif src_mod not in ORDER or dst_mod not in ORDER:
                problems.append(f"{f}: includes {target}: src/{src_mod} or src/{dst_mod} is not in the order")
            elif ORDER.index(dst_mod) > ORDER.index(src_mod):
                problems.append(f"{f}: includes {target}: src/{src_mod} comes before src/{dst_mod} "
                                f"({' <- '.join(ORDER)})")
    seen = {}
    for f in sorted(files):
        if f.endswith(SOURCE_EXT) and not f.startswith("bench/results/"):
            seen.setdefault(os.path.basename(f), []).append(f)
    for name, paths in sorted(seen.items()):
        if len(paths) > 1:
            problems.append(f"file name {name} is used {len(paths)} times: {', '.join(paths)}")
    for p in problems:
        print("check_layout:", p)
    print(f"check_layout: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
