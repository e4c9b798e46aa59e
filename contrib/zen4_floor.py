# zen4_floor.py — a cycle floor per block from two contrib/insn_hist.py
# histograms of one fused call (runs of N1 and N3 blocks: per block =
# (N3 - N1) / (n3 - n1)) on AMD Zen 4 with AVX-512, with the rates measured
# by contrib/port_pairs_avx512.c on this machine (docs/PERFORMANCE.md,
# Zen 4 floors). A zmm instruction holds a 256-bit pipe for two cycles
# (counted as 2 pipe-cycles, ymm / xmm as 1):
#   M: FMAs, vmulps, vpdpbusd, vpmadd*, vpopcnt*: pipes FP0 / FP1
#      (dpbusd pairs: 2.0 cycles per zmm pair);
#   S: shuffles, permutes, shifts, broadcasts from a register, packs,
#      inserts / extracts, conversions: 2 pipes (pshufb pairs 2.0; with M:
#      1.31-1.44 per pair, i.e. M and S share a third pipe);
#   F: vaddps / vsubps / vmaxps / compares / vrangeps / vscalefps /
#      vrndscaleps / vfpclassps / vblendmps: 2 pipes (addps pairs 2.0; with
#      an FMA 1.31);
#   A: vpaddd, vpandd, vpxord, vpternlogd and the other integer logic:
#      4 pipes (pairs 1.0);
#   M, S and F together: 3 pipes (their mixed pairs ~1.33);
#   loads: zmm 1.15 cycles, ymm 0.62, broadcasts 0.65 each (pairs of each
#      1:1 mixed add up), other loads 1/3 (three per cycle: Zen 4's spec);
#   stores: zmm 2.15 cycles, ymm 1.08, others 0.5;
#   dispatch: 6 instructions per cycle.
# Register-to-register moves are not counted (eliminated at rename), as in
# the Intel floors of the fifth pass. floor = the largest of these bounds.
#
#   python3 contrib/zen4_floor.py hist_n1.txt hist_n3.txt [n1 n3]   (default 1 3)
import re
import sys
from collections import Counter

import insn_hist_block

M = re.compile(r"^(vpdpbusds?|vpdpwssds?|vpmaddwd|vpmaddubsw|vpmulld|vpmullw|vpopcnt[bwdq]|vfn?m(add|sub)\d+[ps][sd]|"
               r"vmul[ps][sd])$")
S = re.compile(r"^(vpshufb|vpshufd|vpunpck\w+|vpsr[al]v?[wdq]|vpsllv?[wdq]|vpsrldq|vpslldq|vperm\w+|vpack\w+|"
               r"vextract\w+|vinsert\w+|vshuf\w+|vmovshdup|vmovhlps|vpalignr|valign[dq]|vpbroadcast[bwdq]|"
               r"vbroadcast\w+|vcvt\w+|vpmov[zs]x\w+|vpmov(u?s)?[dqw][bwd]|vunpck\w+|vpcompress\w|vpexpand\w)$")
F = re.compile(r"^(vadd[ps][sd]|vsub[ps][sd]|vmax[ps][sd]|vmin[ps][sd]|vcmp\w+|vrange[ps][sd]|vscalef[ps][sd]|"
               r"vrndscale[ps][sd]|vfpclass\w+|vblendm\w+|vucomiss|vcomiss|vdiv[ps][sd])$")
A = re.compile(r"^(vpadd[bwdq]|vpsub[bwdq]|vpaddsw|vpand[dq]?|vpandn[dq]?|vpor[dq]?|vpxor[dq]?|vpternlog[dq]|"
               r"vpcmp\w+|vpmax\w+|vpmin\w+|vxorps|vandps|vorps|vpblendm\w+|vpabs\w)$")
MOVE = re.compile(r"^(vmovdq[au]\d*|vmova?ps|vmovups|vmovss|vmovd|vmovq|vmovlps|vmovhps)$")


def floor(h):
    pc = Counter()
    ld = st = insns = 0.0
    other = Counter()
    for key, n in h.items():
        insns += n
        name, _, width = key.partition("@")
        mnem, kind = name.rsplit(".", 1)
        z = width == "z"
        cost = 2 if z else 1
        if kind == "ld":
            bcast = mnem.startswith(("vpbroadcast", "vbroadcastss"))
            ld += n * (0.65 if bcast else 1.15 if z else 0.62 if width == "y" else 1 / 3)
        if kind == "st":
            st += n * (2.15 if z else 1.08 if width == "y" else 0.5)
        if MOVE.match(mnem) or (mnem.startswith(("vpbroadcast", "vbroadcastss")) and kind == "ld"):
            continue  # moves, loads, stores and broadcast loads: no ALU pipe
        for cls, rx in (("M", M), ("S", S), ("F", F), ("A", A)):
            if rx.match(mnem):
                pc[cls] += n * cost
                break
        else:
            if mnem.startswith("v"):
                other[key] += n
    vec = pc["M"] + pc["S"] + pc["F"] + pc["A"]
    bounds = {"M/2": pc["M"] / 2, "S/2": pc["S"] / 2, "F/2": pc["F"] / 2, "MSF/3": (pc["M"] + pc["S"] + pc["F"]) / 3,
              "V/4": vec / 4, "loads": ld, "stores": st, "I/6": insns / 6}
    return insns, pc, bounds, other


n1, n3 = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (1, 3)
per = insn_hist_block.per_block(sys.argv[1], sys.argv[2], n1, n3)
insns, pc, bounds, other = floor(per)
print("per block: %.0f instructions; pipe-cycles M %.0f, S %.0f, F %.0f, A %.0f" % (insns, pc["M"], pc["S"], pc["F"], pc["A"]))
print("bounds: " + ", ".join("%s %.0f" % kv for kv in bounds.items()))
print("floor %.0f cycles per block (%s)" % (max(bounds.values()), max(bounds, key=bounds.get)))
if other:
    print("vector instructions not classified (not counted): %s" % dict(other))
