#!/bin/bash
# device_quick.sh — a short device run from binaries built on the dev machine
# (bench/cuda/prebuilt/: test_cuda_attend and the vq tool, carried with the
# tree, never committed), for when device time is short: the CUDA tests, memcheck, the B = 1
# decode table. Falls back to building there if the binaries do not start.
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/quick.log") 2>&1
date -u
cat COMMIT 2>/dev/null
P=bench/cuda/prebuilt
chmod +x $P/* 2>/dev/null
if ! $P/test_cuda_attend; then
  echo "prebuilt test failed or did not start (rc=$?); building here"
  DLP=/usr/include; [ -f /usr/include/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r bench/cuda/dlpack_include/dlpack $DLP/; }
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLPACK_INCLUDE_DIR="$DLP" > "$OUT/cmake.log" 2>&1
  ninja -C build > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  P=build; cp build/tests/test_cuda_attend build/tools/vq build/; build/test_cuda_attend
fi
VQ_TEST_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 9 $P/test_cuda_attend > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/san_memcheck.log"
$P/vq bench attention --backend cuda --b1 | tee "$OUT/bench_decode.txt"
VQ_TEST_QUICK=1 compute-sanitizer --tool racecheck --error-exitcode 9 $P/test_cuda_attend > "$OUT/san_racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -2 "$OUT/san_racecheck.log"
date -u
