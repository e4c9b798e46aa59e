# zen1_floor.py — a cycle floor per 32-token block on AMD Zen 1 (family 23
# model 1: AVX2 executed as 128-bit halves) from two contrib/insn_hist.py
# histograms of one fused call, on runs of 1 and of 3 blocks (a block's
# count: their difference, halved, so the call's entry and exit cancel).
#
# Every ymm instruction is two 128-bit uops, every xmm or scalar-vector one
# one. The uops go to the four FP pipes by class (AMD's family 17h
# optimization guide; the single-pipe classes measured on Zen 1
# machines, docs/PERFORMANCE.md, finding 4):
#   mul    vpmaddubsw, vpmaddwd, vpmulld, vpmullw, vpsadbw   FP0
#   fma    FMAs, vmulps / vmulss / vmulsd                    FP0, FP1
#   fadd   adds, subs, max / min, compares, round, divide    FP2, FP3
#          (a divide counted as 3)
#   shift  vpsrlw and the other shifts                       FP2
#   shuf   vpshufb, unpacks, packs, inserts / extracts,
#          in-lane permutes, register broadcasts, blends      FP1, FP2
#          (vperm2i128 / vperm2f128 / vpermq counted as 2)
#   cvt    vcvtdq2ps, vcvtps2dq, vcvtph2ps                   FP3
#   alu    logic, integer add / sub / max / min / compare    FP0, FP1, FP3
#          (vpaddd ymm measured 3 per 2 cycles: three pipes)
# The pipe floor is the least makespan of that assignment: the largest,
# over every set S of pipes, of the uops that can only run in S divided by
# |S|. The floor is the larger of it and the decoders' rate: a fused
# block's code (~2500 distinct instructions at R 4, most of them two
# macro-ops) does not fit the 2K-entry op cache. Two floors are printed: the
# decoders at four instructions a cycle (the spec), and at three, what
# contrib/zen1_probe.py's xmm stream of ~5-byte instructions got from them
# (~15 bytes a cycle; the kernels' instructions average 5.75). And the
# larger of it and the memory operations' rate: two 128-bit loads or stores
# a cycle in all, at most one a store (contrib/zen1_probe.py, question 4: a ymm
# load is two, a ymm store two on one port). Register moves and pure loads
# are not counted as pipe work (eliminated, or the load ports').
# No hardware counters needed (this KVM guest has none):
#
#   gdb -q -batch -ex 'set $fn = "kivi_int8_block_avx2"' -x contrib/insn_hist.py \
#       --args ./kivi_int8_block 4 1 once 1 > n1.txt        (and "once 3" > n3.txt)
#   python3 contrib/zen1_floor.py n1.txt n3.txt
import collections
import itertools
import re
import sys

import insn_hist_block

CLASSES = [
    ("mul", {0}, r"vpmaddubsw|vpmaddwd|vpmulld|vpmullw|vpsadbw|vpmuludq"),
    ("fma", {0, 1}, r"vf(n)?m(add|sub)\d+[ps][sd]|vmul[ps][sd]"),
    ("fadd", {2, 3}, r"vadd[ps][sd]|vsub[ps][sd]|vmax[ps][sd]|vmin[ps][sd]|vcmp\w+|v?ucomiss|vroundps|vdiv[ps]s"),
    ("shift", {2}, r"vps[rl]l[wdq]|vpsra[wdq]|vps[rl]ldq"),
    ("shuf", {1, 2}, r"vpshufb|vpunpck\w+|vpack\w+|vinsert[fi]128|vextract[fi]128|vpermilps|vshufps|vmovshdup|"
                     r"vmovhlps|vpalignr|vpbroadcast[bwdq]|vbroadcastss|vperm2[fi]128|vpermq|vpermd|vpermps|vpshufd|"
                     r"vunpck\w+|vpextrq|vmovq|vmovd|vinsertps|vblendvps|vmovmskps"),
    ("cvt", {3}, r"vcvtdq2ps|vcvtps2dq|vcvtph2ps|vcvtss2sd|vcvtsd2ss"),
    ("alu", {0, 1, 3}, r"vp(and|or|xor|andn|add|sub|max|min|cmp)\w*|v(and|or|xor|andn)p[sd]|vpabs\w"),
]
MOVES = re.compile(r"^(vmovdqa|vmovdqu|vmovaps|vmovups|vmovss|vmovsd|vmovlps|vmovhps|vzeroupper)$")
BROADCAST_LOADS = ("vbroadcastss", "vpbroadcastd", "vpbroadcastq", "vbroadcasti128")
WEIGHT = {"vperm2i128": 2, "vperm2f128": 2, "vpermq": 2, "vdivps": 3, "vdivss": 3}


def classify(block):
    """uops per class, and the loads, stores and instructions beside them"""
    uops, other, unknown = collections.Counter(), collections.Counter(), {}
    for key, n in block.items():
        name, _, width = key.partition("@")
        mnem, kind = name.rsplit(".", 1)
        halves = 2 if width == "y" else 1
        other["instructions"] += n
        if kind == "ld":
            other["ld128"] += n * halves
        if kind == "st":
            other["st128"] += n * halves
            continue
        if not mnem.startswith("v") or MOVES.match(mnem) or (mnem in BROADCAST_LOADS and kind == "ld"):
            continue
        for cls, _, pattern in CLASSES:
            if re.fullmatch(pattern, mnem):
                uops[cls] += n * halves * WEIGHT.get(mnem, 1)
                break
        else:
            if n:
                unknown[key] = n
    return uops, other, unknown


def floor(uops):
    best, where = 0.0, None
    for k in range(1, 5):
        for pipes in itertools.combinations(range(4), k):
            s = set(pipes)
            load = sum(uops[cls] for cls, allowed, _ in CLASSES if allowed <= s) / len(s)
            if load > best:
                best, where = load, s
    return best, where


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: zen1_floor.py <histogram of 1 block> <histogram of 3 blocks>")
    block = insn_hist_block.per_block(sys.argv[1], sys.argv[2])
    uops, other, unknown = classify(block)
    cycles, pipes = floor(uops)
    decode4, decode3 = other["instructions"] / 4, other["instructions"] / 3
    memory = max((other["ld128"] + other["st128"]) / 2, other["st128"])
    print("per block: %.0f instructions, %.0f FP uops (%s), %.0f 128-bit loads, %.0f stores" % (
        other["instructions"], sum(uops.values()), ", ".join("%s %.0f" % (c, uops[c]) for c, _, _ in CLASSES),
        other["ld128"], other["st128"]))
    print("floor %.0f cycles (decoders at 3 a cycle: %.0f): pipes %.0f (binding: FP %s), memory %.0f, "
          "decode %.0f / %.0f" % (max(cycles, memory, decode4), max(cycles, memory, decode3), cycles, sorted(pipes),
                                  memory, decode4, decode3))
    if unknown:
        print("not classified (not counted): %s" % unknown)


main()
