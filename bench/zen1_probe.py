# zen1_probe.py — two questions bench/zen1_floor.py's floor depends on, for
# a core that runs ymm instructions as two 128-bit uops (AMD Zen 1):
#   1. do cheap vector ops beside the one multiply pipe cost anything? A
#      stream of groups of one vpmaddubsw and three cheap ops (vpaddw, vpand,
#      vpshufb) against vpmaddubsw alone;
#   2. do the decoders limit a block whose code is larger than the op cache?
#      Each stream as a loop of 256 instructions (fits the 2K-entry op cache)
#      and of 6000 (does not; ~30 KB, fits the 64 KB L1i).
# Writes a C file with the streams as inline asm (12 independent registers,
# no dependencies), builds it with gcc, runs it, prints TSC ticks per
# instruction, least of 400 passes of ~1 ms (robust to other work on the
# core). x86-64 with AVX2:
#
#   python3 bench/zen1_probe.py
import os
import subprocess
import tempfile

STREAMS = {
    "vpaddd": ["vpaddd"],
    "vpmaddubsw": ["vpmaddubsw"],
    "1 vpmaddubsw + 3 cheap": ["vpmaddubsw", "vpaddw", "vpand", "vpshufb"],
    # 2 vector + 3 scalar: the FP pipes need 1 cycle (ymm) per group, the
    # scalar adds go to the integer pipes; 5 instructions, 7 macro-ops (ymm)
    "2 vector + 3 scalar add": ["vpaddd", "vpshufb", "add", "add", "add"],
}
CLOBBERS = ", ".join(['"xmm%d"' % i for i in range(12)] + ['"r%d"' % i for i in range(8, 12)] + ['"cc"'])


def instruction(op, reg, i):
    if op == "add":  # scalar, into one of 4 integer registers
        return '"add %%%%r%d, %%%%r%d\\n\\t"\n' % (8 + (i + 1) % 4, 8 + i % 4)
    return '"%s %%%%%s12, %%%%%s13, %%%%%s%d\\n\\t"\n' % (op, reg, reg, reg, i % 12)


def stream_function(name, ops, reg, n):
    body = "".join(instruction(ops[i % len(ops)], reg, i) for i in range(n))
    return ("__attribute__((noinline)) static void %s(long it)\n{\n    for (long i = 0; i < it; i++)\n"
            "        __asm__ volatile(%s ::: %s);\n}\n" % (name, body, CLOBBERS))


def main():
    src = ["#include <stdio.h>", "#include <x86intrin.h>"]
    calls = []
    for k, (label, ops) in enumerate(STREAMS.items()):
        for reg in ("ymm", "xmm"):
            for n in (256, 6000):
                fn = "s%d_%s_%d" % (k, reg, n)
                src.append(stream_function(fn, ops, reg, n))
                it = max(1, 60000 // n)
                calls.append('    { unsigned long long best = ~0ull;\n'
                             '      for (int r = 0; r < 400; r++) { unsigned long long t = __rdtsc(); %s(%d);\n'
                             '        t = __rdtsc() - t; if (t < best) best = t; }\n'
                             '      printf("%%-24s %%s %%5d instructions: %%.3f ticks each\\n", "%s", "%s", %d,\n'
                             '             (double)best / (%d.0 * %d)); }' % (fn, it, label, reg, n, it, n))
    src.append("int main(void)\n{\n" + "\n".join(calls) + "\n    return 0;\n}\n")
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        open(c, "w").write("\n".join(src))
        subprocess.run(["gcc", "-O1", "-mavx2", c, "-o", exe], check=True)
        subprocess.run([exe], check=True)


main()
