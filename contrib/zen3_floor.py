# zen3_floor.py — a cycle floor per call from contrib/insn_hist.py histograms
# on AMD Zen 3 (AVX2, 256-bit ops), with the per-class rates measured on the
# Zen 3 machine (docs/PERFORMANCE.md; pairs of
# independent instructions, throughput against vfmadd231ps at 2 per cycle):
#   M: vpmaddwd, vpmaddubsw, vpsadbw, vpmulld, FMAs, vmulps: the two FMA
#      pipes, 2 per cycle (pairs with FMAs: 1 cycle per pair);
#   S: vpshufb, vpunpck*, vpsraw and the other shifts, permutes, packs,
#      extracts / inserts, register broadcasts: 2 per cycle (pairs: 1 cycle);
#   V: every vector instruction: 4 pipes (2.6 per cycle measured for
#      vpaddd pairs: the second floor);
#   I: every instruction, 6 per cycle (dispatch).
# floor = max(M/2, S/2, V/4, I/6); floor_measured = max(M/2, S/2, V/2.6, I/6).
#
#   python3 contrib/zen3_floor.py hist1.txt [hist2.txt ...]   (summed)
import re
import sys

M = re.compile(r"^(vpmaddwd|vpmaddubsw|vpsadbw|vpmulld|vfn?m(add|sub)\d+[ps][sd]|vmulps|vmulss)$")
S = re.compile(r"^(vpshufb|vpunpck\w+|vpsr[al][wdq]|vpsll[wdq]|vpsrldq|vpslldq|vperm\w+|vpack\w+|vextract\w+|vinsert\w+|"
               r"vpshufd|vshufps|vmovshdup|vmovhlps|vpalignr|vpbroadcast[bwdq]\.r|vbroadcastss\.r)$")
tot = m = s = v = 0
for path in sys.argv[1:]:
    for line in open(path):
        f = line.split()
        if len(f) != 2 or not f[0].isdigit():
            continue
        n, name = int(f[0]), f[1]
        mnem = name.rsplit(".", 1)[0]
        tot += n
        if mnem.startswith("v"):
            v += n
            if M.match(mnem):
                m += n
            elif S.match(name) or S.match(mnem):
                s += n
print("instructions %d, vector %d (M %d, S %d)" % (tot, v, m, s))
print("floor %.0f cycles (M/2 %.0f, S/2 %.0f, V/4 %.0f, I/6 %.0f); with V/2.6: %.0f"
      % (max(m / 2, s / 2, v / 4, tot / 6), m / 2, s / 2, v / 4, tot / 6, max(m / 2, s / 2, v / 2.6, tot / 6)))
