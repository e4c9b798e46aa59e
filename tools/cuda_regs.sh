#!/bin/bash
# cuda_regs.sh — registers and stack (spill) bytes of every kernel in the CUDA
# objects of a build: one line per kernel, "REG:n STACK:b SHARED:s name".
#   bash tools/cuda_regs.sh BUILD_DIR
# Needs cuobjdump (CUDA toolkit). STACK counts a kernel's whole local frame
# (arrays indexed at run time as well as spills); `nvcc -Xptxas -v` tells the
# spill bytes apart.
set -u
B=${1:?build dir}
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
[ -x "$CO" ] || { echo "cuda_regs.sh: no cuobjdump" >&2; exit 2; }
for o in $(find "$B" -name '*.cu.o' | sort); do
    f=$(basename "$o" .cu.o)
    "$CO" --dump-resource-usage "$o" 2>/dev/null | awk -v f="$f" '
        /Function/ { name = $2; sub(/:$/, "", name) }
        /REG:/ { r = ""; s = ""; sh = "";
                 for (i = 1; i <= NF; i++) { if ($i ~ /^REG:/) r = $i; if ($i ~ /^STACK:/) s = $i; if ($i ~ /^SHARED:/) sh = $i }
                 printf "%-10s %-10s %-14s %s %s\n", r, s, sh, f, name }'
done | c++filt 2>/dev/null | cut -c1-220
