# zen1_probe.py — two questions contrib/zen1_floor.py's floor depends on, for
# a core that runs ymm instructions as two 128-bit uops (AMD Zen 1):
#   1. do cheap vector ops beside the one multiply pipe cost anything? A
#      stream of groups of one vpmaddubsw and three cheap ops (vpaddw, vpand,
#      vpshufb) against vpmaddubsw alone;
#   2. do the decoders limit a block whose code is larger than the op cache?
#      Each stream as a loop of 256 instructions (fits the 2K-entry op cache)
#      and of 6000 (does not; ~30 KB, fits the 64 KB L1i).
#   3. do multiplies in clumps (as the kernels' multiply loops, between
#      steps of other work) overlap the cheap ops that follow them? The
#      groups of question 1 reordered: M vpmaddubsw, then their 3M cheap ops.
#   4. how many 128-bit loads and stores a cycle, together? Streams of ymm
#      and xmm loads, stores, and three ymm loads to one ymm store, in L1.
# Writes a C file with the streams as inline asm (12 independent registers,
# no dependencies), builds it with gcc, runs it, prints TSC ticks per
# instruction, least of 400 passes of ~1 ms (robust to other work on the
# core). x86-64 with AVX2:
#
#   python3 contrib/zen1_probe.py
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
    # question 3: the ops of "1 vpmaddubsw + 3 cheap" in clumps
    "clumps of 8 multiplies": ["vpmaddubsw"] * 8 + ["vpaddw", "vpand", "vpshufb"] * 8,
    "clumps of 32 multiplies": ["vpmaddubsw"] * 32 + ["vpaddw", "vpand", "vpshufb"] * 32,
    "clumps of 128 multiplies": ["vpmaddubsw"] * 128 + ["vpaddw", "vpand", "vpshufb"] * 128,
}
CLOBBERS = ", ".join(['"xmm%d"' % i for i in range(12)] + ['"r%d"' % i for i in range(8, 12)] + ['"cc"'])


def instruction(op, reg, i):
    if op == "add":  # scalar, into one of 4 integer registers
        return '"add %%%%r%d, %%%%r%d\\n\\t"\n' % (8 + (i + 1) % 4, 8 + i % 4)
    return '"%s %%%%%s12, %%%%%s13, %%%%%s%d\\n\\t"\n' % (op, reg, reg, reg, i % 12)


# question 4: (op, operands) into or from a 4 KB buffer at %0, 32 bytes apart
MEMORY = {
    "load": "vmovdqa %d(%%0), %%%%%s%d",
    "store": "vmovdqa %%%%%s%d, %d(%%0)",
}
MEMORY_STREAMS = {
    "loads": ["load"],
    "stores": ["store"],
    "3 loads + 1 store": ["load", "load", "load", "store"],
}


def memory_instruction(op, reg, i):
    offset, r = 32 * (i % 64), i % 12
    text = MEMORY[op] % ((offset, reg, r) if op == "load" else (reg, r, offset))
    return '"%s\\n\\t"\n' % text


def loop_function(name, lines, memory):
    """a loop of the stream's lines as one asm statement; memory: the lines read or write buf"""
    operands = ' :: "r"(buf) : %s, "memory"' % CLOBBERS if memory else " ::: %s" % CLOBBERS
    return ("__attribute__((noinline)) static void %s(long it)\n{\n    for (long i = 0; i < it; i++)\n"
            "        __asm__ volatile(%s%s);\n}\n" % (name, "".join(lines), operands))


def timed_call(fn, label, reg, n):
    it = max(1, 60000 // n)
    return ('    { unsigned long long best = ~0ull;\n'
            '      for (int r = 0; r < 400; r++) { unsigned long long t = __rdtsc(); %s(%d);\n'
            '        t = __rdtsc() - t; if (t < best) best = t; }\n'
            '      printf("%%-24s %%s %%5d instructions: %%.3f ticks each\\n", "%s", "%s", %d,\n'
            '             (double)best / (%d.0 * %d)); }' % (fn, it, label, reg, n, it, n))


def main():
    src = ["#include <stdio.h>", "#include <x86intrin.h>", "static _Alignas(64) char buf[4096];"]
    calls = []
    for kind, streams, line, sizes in (("s", STREAMS, instruction, (256, 6000)),
                                       ("m", MEMORY_STREAMS, memory_instruction, (256,))):
        for k, (label, ops) in enumerate(streams.items()):
            for reg in ("ymm", "xmm"):
                for n in (n for n in sizes if n >= len(ops)):  # whole patterns only
                    fn = "%s%d_%s_%d" % (kind, k, reg, n)
                    lines = [line(ops[i % len(ops)], reg, i) for i in range(n)]
                    src.append(loop_function(fn, lines, kind == "m"))
                    calls.append(timed_call(fn, label, reg, n))
    src.append("int main(void)\n{\n" + "\n".join(calls) + "\n    return 0;\n}\n")
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        open(c, "w").write("\n".join(src))
        subprocess.run(["gcc", "-O1", "-mavx2", c, "-o", exe], check=True)
        subprocess.run([exe], check=True)


main()
