# device_env.sh — sourced by the device_*.sh scripts: $OUT, the log folder $L,
# everything printed also going to $OUT/$1.log, step(), the GPU's name and
# clocks, and $DLP, a DLPack include folder (the tree's copy where the
# machine has none).
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT" /tmp/vqlogs
L=/tmp/vqlogs
exec > >(tee "$OUT/$1.log") 2>&1
step() { echo "== $(date -u +%T) $*"; }
step start; cat COMMIT 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
DLP=/usr/include
[ -f $DLP/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r dlpack_include/dlpack $DLP/; }
