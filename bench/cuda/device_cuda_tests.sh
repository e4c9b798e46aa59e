#!/bin/bash
# device_cuda_tests.sh — one device call for the CUDA side: build, the CUDA
# tests, compute-sanitizer memcheck + racecheck on their quick mode, the decode
# benchmark (staged and direct loads) and the prefill benchmark. Logs under
# $OUT. Run from the repository root:  OUT=/some/dir bash bench/cuda/device_cuda_tests.sh
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/tests.log") 2>&1
date -u; cat COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DLP=/usr/include; [ -f $DLP/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r .cudawork/dlpack/dlpack $DLP/; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=ON -DDLPACK_INCLUDE_DIR="$DLP" > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log; exit 1; }
( time ninja -C build vq test_cuda_attend test_cuda_sdpa test_cuda_prefill test_cuda_codecs ) > /tmp/build.log 2>&1 || { grep -B2 -A12 -m3 'error' /tmp/build.log; exit 1; }
tail -3 /tmp/build.log
for t in attend sdpa prefill codecs; do
  echo "== test_cuda_$t"; timeout 240 build/tests/test_cuda_$t > /tmp/t.log 2>&1; rc=$?
  grep -E "FAIL|passed|failed|seed|worst" /tmp/t.log | head -30; echo "rc=$rc"
done
for tool in memcheck racecheck; do
  for t in attend sdpa prefill; do
    VQ_TEST_QUICK=1 timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_$t > /tmp/san.log 2>&1
    echo "$tool test_cuda_$t rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" /tmp/san.log | head -4
  done
done
timeout 200 ./build/tools/vq bench attention --backend cuda | tee "$OUT/bench_decode.txt"
timeout 60 ./build/tools/vq bench prefill --backend cuda | tee "$OUT/bench_prefill.txt"
date -u
