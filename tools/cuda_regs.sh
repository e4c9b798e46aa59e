#!/bin/bash
# cuda_regs.sh — registers and stack (spill) bytes of every kernel in the CUDA
# objects of a build: one line per kernel, "REG:n STACK:b SHARED:s name".
#   bash tools/cuda_regs.sh BUILD_DIR
# Needs cuobjdump (CUDA toolkit). Exits 1 when a decode kernel (attend_*,
# sdpa_*, kv_*) uses stack: a spill there costs local-memory traffic per tile.
set -u
B=${1:?build dir}
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
[ -x "$CO" ] || { echo "cuda_regs.sh: no cuobjdump" >&2; exit 2; }
bad=0
for o in $(find "$B" -name '*.cu.o' | sort); do
    f=$(basename "$o" .cu.o)
    "$CO" --dump-resource-usage "$o" 2>/dev/null | awk -v f="$f" '
        /Function/ { name = $2; sub(/:$/, "", name) }
        /REG:/ { r = ""; s = ""; sh = "";
                 for (i = 1; i <= NF; i++) { if ($i ~ /^REG:/) r = $i; if ($i ~ /^STACK:/) s = $i; if ($i ~ /^SHARED:/) sh = $i }
                 printf "%-10s %-10s %-14s %s %s\n", r, s, sh, f, name }'
done | c++filt 2>/dev/null | tee /tmp/cuda_regs.txt | cut -c1-220
awk '$2 != "STACK:0" && ($4 ~ /^(attend_|kv_|sdpa_|decode_)/) { n++ } END { exit n > 0 }' /tmp/cuda_regs.txt || bad=1
exit $bad
