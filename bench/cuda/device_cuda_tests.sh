#!/bin/bash
# device_cuda_tests.sh — build everything on the device, run the CUDA tests,
# compute-sanitizer memcheck + racecheck on their quick mode, then the decode
# benchmark. Logs under $OUT. Run from the repository root:
#   OUT=/some/dir bash bench/cuda/device_cuda_tests.sh [bench args...]
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/tests.log") 2>&1
date -u; cat COMMIT 2>/dev/null
DLP=/usr/include; [ -f $DLP/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r .cudawork/dlpack/dlpack $DLP/; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLPACK_INCLUDE_DIR="$DLP" > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log; exit 1; }
( time ninja -C build ) > /tmp/build.log 2>&1 || { grep -B2 -A12 -m3 'error' /tmp/build.log; exit 1; }
tail -3 /tmp/build.log
for t in build/tests/test_cuda_*; do echo "== $t"; timeout 300 $t 2>&1 | tail -15; echo "rc=${PIPESTATUS[0]}"; done
for tool in memcheck racecheck; do
  for t in build/tests/test_cuda_attend build/tests/test_cuda_sdpa build/tests/test_cuda_prefill; do
    [ -x $t ] || continue
    VQ_TEST_QUICK=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $t > /tmp/san.log 2>&1
    echo "$tool $t rc=$?"; tail -2 /tmp/san.log
  done
done
./build/tools/vq bench attention --backend cuda "$@" | tee "$OUT/bench_decode.txt"
date -u
