# insn_hist.py — gdb script: steps one call of a function instruction by
# instruction and prints how many times each mnemonic ran, split by operand
# kind (.r registers only, .ld a memory source, .st a memory destination)
# and register width (@z zmm, @y ymm, none: xmm or scalar);
# the dynamic counts behind the instruction floors of docs/PERFORMANCE.md,
# and a port floor from them: 512-bit uops by port
# class on this core (contrib/port_throughput.c: p0 and p5, two per cycle; p5
# only: shuffles and permutes, vpermt2b two cycles; p0 only: shifts, class
# tests, compares into masks, vdivps three uops), the floor
# max(p5-only, p0-only, all / 2) cycles; register moves, loads and stores
# are reported beside it, not counted (eliminated or on other ports). No
# hardware counters needed (this KVM guest has
# none); slow (~1000 instructions per second), so one call only:
#
#   gdb -q -batch -ex 'set $fn = "kivi_int8_block_avx512"' -x contrib/insn_hist.py --args ./kivi_int8_block 4 1 once
import collections
import gdb

gdb.execute("set pagination off")
fn = str(gdb.parse_and_eval("$fn")).strip('"')
gdb.execute("break " + fn)
gdb.execute("run")
arch = gdb.selected_frame().architecture()
sp0 = int(gdb.parse_and_eval("$sp"))
hist = collections.Counter()
total = 0
while True:
    asm = arch.disassemble(int(gdb.parse_and_eval("$pc")))[0]["asm"]
    mnem = asm.split()[0]
    ops = asm[len(mnem):].strip()
    width = "@z" if "zmm" in ops else "@y" if "ymm" in ops else ""
    hist[mnem + (".st" if ops.endswith(")") else ".ld" if "(" in ops else ".r") + width] += 1
    total += 1
    if mnem.startswith("ret") and int(gdb.parse_and_eval("$sp")) == sp0:
        break
    gdb.execute("stepi", to_string=True)
print("instructions %d" % total)
for k, v in hist.most_common():
    print("%6d %s" % (v, k))

P5 = set("vpermt2d vpermt2b vpermps vpermilps vshuff32x4 vpermd vpackssdw vpacksswb vpermi2ps vpermi2d vpermi2b "
         "vpbroadcastd vpbroadcastq vbroadcastss vinserti64x4 vinsertps kmovw kmovb vmovd vmovq vextractf64x4 "
         "vextractf128 vshufps vunpcklps vunpckhps vpermt2ps valignq vextracti64x2 vextracti64x4 vextractps".split())
P0 = set("vpsrld vfpclassps vfpclasspsz vdivps vrndscaleps vcvtdq2ps vcmpge_oqps vcmpnlt_uqps vcmple_oqps vcmpeqps "
         "vcmpgt_oqps vucomiss knotw korw kandnw vscalefps vpsrad kortestb kortestw".split())
EITHER = set("vpdpbusd vfmadd132ps vfmadd231ps vfmadd213ps vfnmadd231ps vfnmadd132ps vmulps vmulss vaddps vsubps "
             "vmaxps vpandd vrangeps vcvtps2dq vpaddd vblendmps vpxord vpxor vxorps vmaxss vsubss vaddss "
             "vfmadd231ss".split())
MOVES = set("vmovdqa32 vmovdqa64 vmovaps vmovups vmovdqu64 vmovdqu32 vmovdqu16 vmovdqu8 vmovdqa vmovss "
            "vbroadcastf32x4 vmovlps".split())
cls = collections.Counter()
unknown = {}
for k, v in hist.items():
    m, kind = k.split("@")[0].rsplit(".", 1)
    if m in MOVES:
        cls["move" if kind == "r" else kind] += v
    elif m == "vcvtph2ps":  # one p0 and one p5 uop
        cls["p0"] += v
        cls["p5"] += v
        cls["ld"] += v if kind == "ld" else 0
    elif m in ("vpbroadcastd", "vpbroadcastq", "vbroadcastss") and kind == "ld":
        cls["ld"] += v  # a broadcast load: load port only
    elif m in P5 or m in P0 or m in EITHER:
        cls["p5" if m in P5 else "p0" if m in P0 else "either"] += v * (2 if m == "vpermt2b" else 3 if m == "vdivps" else 1)
        cls["ld"] += v if kind == "ld" else 0
    elif m.startswith("v") or m.startswith("k"):
        unknown[k] = v
    else:
        cls["scalar"] += v
vec = cls["p5"] + cls["p0"] + cls["either"]
print("512-bit ALU uops %d (p5 only %d, p0 only %d, either %d): floor %.0f cycles; register moves %d, loads %d, "
      "stores %d, scalar %d; not classified %s" % (vec, cls["p5"], cls["p0"], cls["either"],
                                                    max(cls["p5"], cls["p0"], vec / 2.0), cls["move"], cls["ld"],
                                                    cls["st"], cls["scalar"], unknown))
gdb.execute("kill")
