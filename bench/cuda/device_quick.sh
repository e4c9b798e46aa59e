#!/bin/bash
# device_quick.sh — a short device run from binaries built on the dev machine
# (bench/cuda/prebuilt/: test_cuda_attend and bench_decode, carried with the
# tree), for when device time is short: the CUDA tests, memcheck, the B = 1
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
  gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I include -I src -I "$DLP" -I /usr/local/cuda/include bench/cuda/bench_decode.c \
    build/libveloxquant.a -L/usr/local/cuda/lib64 -lcudart_static -lpthread -ldl -lrt -lm -lstdc++ -o build/bench_decode
  P=build; cp build/tests/test_cuda_attend build/; build/test_cuda_attend
fi
VQ_TEST_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 9 $P/test_cuda_attend > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/san_memcheck.log"
$P/bench_decode --quick | tee "$OUT/bench_decode.txt"
VQ_TEST_QUICK=1 compute-sanitizer --tool racecheck --error-exitcode 9 $P/test_cuda_attend > "$OUT/san_racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -2 "$OUT/san_racecheck.log"
date -u
