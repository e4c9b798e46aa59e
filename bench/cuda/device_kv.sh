#!/bin/bash
# device_kv.sh — one device call for the decode skeleton work (issue 13):
# build the CUDA backend, every tests/test_cuda_* (full), compute-sanitizer
# memcheck, racecheck and initcheck on their quick modes, `vq bench attention
# --backend cuda` (fast KIVI/RaBitQ kernels and every vq_fused_sdpa key
# format) and PyTorch's f16 SDPA in the same call. Logs under $OUT.
# Run from the tree's root (the .cudawork copy made by sync_to_main.sh):
#   OUT=/some/dir bash bench/cuda/device_kv.sh [quick]
# quick: B = 1 benchmark rows only. validate: sm_90 only, the CUDA tests, no
# sanitizers or benchmarks (the shortest call that checks a change).
set -u
OUT=${OUT:-/tmp/vq_out}
MODE=${1:-full}
mkdir -p "$OUT" /tmp/vqlogs
L=/tmp/vqlogs  # only a few files may come back from $OUT: kv.log, build.log, the two tables
exec > >(tee "$OUT/kv.log") 2>&1
date -u; cat COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
DLP=/usr/include; [ -f $DLP/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r dlpack_include/dlpack $DLP/; }
ARCH=; [ "$MODE" = validate ] && ARCH=-DCMAKE_CUDA_ARCHITECTURES=90-real
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLPACK_INCLUDE_DIR="$DLP" $ARCH > "$L/cmake.log" 2>&1 || { tail -30 "$L/cmake.log"; exit 1; }
TESTS=$(cd tests && ls test_cuda_*.c | sed 's/\.c$//')
VQ=vq; [ "$MODE" = validate ] && VQ=
( time ninja -C build $VQ $TESTS ) > "$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
for t in $TESTS; do
  echo "== $t"; timeout 200 build/tests/$t > "$L/$t.log" 2>&1; rc=$?
  grep -E "FAIL|passed|failed|seed|worst" "$L/$t.log" | head -12; echo "rc=$rc"; [ $rc = 0 ] || tail -5 "$L/$t.log"
done
SAN_TESTS=$TESTS
if [ "$MODE" = validate ]; then date -u; exit 0; fi
for tool in memcheck racecheck initcheck; do
  for t in $SAN_TESTS; do
    [ $t = test_cuda_codecs ] && continue
    VQ_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/$t > "$L/san_${tool}_$t.log" 2>&1
    echo "$tool $t rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" "$L/san_${tool}_$t.log" | head -3; grep -m2 -A6 "^========= [A-Z]" "$L/san_${tool}_$t.log" | head -16
  done
done
B1=; [ "$MODE" = quick ] && B1=--b1
timeout 240 ./build/tools/vq bench attention --backend cuda $B1 | tee "$OUT/bench_decode.txt"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/cuda/torch_sdpa.py --decode | tee "$OUT/torch_sdpa.txt"
date -u
