# insn_hist_block.py — one block's instruction counts from two
# contrib/insn_hist.py histograms of a fused call, on runs of n1 and n3 blocks:
# (count at n3 - count at n1) / (n3 - n1) per "mnemonic.kind@width" key, so the
# call's entry and exit cancel. Shared by the floor scripts
# (contrib/zen1_floor.py, contrib/zen4_floor.py); insn_hist.py itself runs
# inside gdb and cannot be imported.
import collections


def read(path):
    """the histogram file's counts: lines "<count> <key>", others skipped"""
    h = collections.Counter()
    for line in open(path):
        f = line.split()
        if len(f) == 2 and f[0].isdigit():
            h[f[1]] += int(f[0])
    return h


def per_block(path1, path3, n1=1, n3=3):
    one, three = read(path1), read(path3)
    return collections.Counter({k: (three[k] - one[k]) / (n3 - n1) for k in set(one) | set(three)})
