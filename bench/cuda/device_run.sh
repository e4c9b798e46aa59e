#!/bin/bash
# device_run.sh — everything the H200 run needs in one call: build (cmake +
# ninja, nvcc there), the whole ctest suite (CPU tests take the host's best ISA,
# AVX-512 there), the CUDA tests under compute-sanitizer memcheck and racecheck,
# the decode benchmark (vq bench attention --backend cuda) and the PyTorch
# baselines. Logs go to $OUT.
# Run from the repository root: OUT=/some/dir bash bench/cuda/device_run.sh [--no-torch]
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
date -u
git log -1 --format='commit %H' 2>/dev/null || cat COMMIT 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -1
echo "CPU: $(lscpu | grep 'Model name' | sed 's/ \+/ /g')"
echo "AVX-512 flags: $(grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"

DLP=/usr/include; [ -f /usr/include/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r bench/cuda/dlpack_include/dlpack $DLP/; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=ON -DDLPACK_INCLUDE_DIR="$DLP" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
( time ninja -C build ) > "$OUT/build.log" 2>&1 || { grep -B2 -A10 -m3 'error' "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
./build/tools/vq version

echo "== ctest without the CUDA tests (CPU kernels at the host's best ISA: AVX-512 there)"
ctest --test-dir build --output-on-failure -j 12 -E test_cuda 2>&1 | tail -25
echo "== CUDA tests"
for t in build/tests/test_cuda_*; do $t || echo "FAILED: $t"; done

for tool in memcheck racecheck; do
  for t in build/tests/test_cuda_*; do
    echo "== compute-sanitizer $tool $t"
    VQ_TEST_QUICK=1 compute-sanitizer --tool $tool --error-exitcode 9 $t > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$?"; tail -3 "$OUT/san_$tool.log"
  done
done


echo "== decode benchmark"
./build/tools/vq bench attention --backend cuda | tee "$OUT/bench_decode.txt"

if [ "${1:-}" != "--no-torch" ]; then
  echo "== PyTorch baselines"
  PYTHONUNBUFFERED=1 python3 bench/cuda/torch_sdpa.py | tee "$OUT/torch_sdpa.txt"
fi
date -u
