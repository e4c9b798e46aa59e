#!/bin/bash
# device_profile.sh — Nsight Compute profiles of the decode kernels at one
# shape each (B = 1, Skv = 128K), for bench/NOTES.md: speed of light, warp
# stall reasons, instruction mix, occupancy, and the source lines that stall.
# Builds only the vq tool. Run from the repository root on the device:
#   OUT=/some/dir bash bench/cuda/device_profile.sh [format:hkv ...]
# (default: kivi:32 kivi:8 hamming:32 exact:8). VQ_CUDA_DECODE_STAGED=0|1
# picks the fast kernels' load path (the benchmark then times only that one).
# DLPack headers: the system's, else .cudawork/dlpack (carried by the caller).
set -u
OUT=${OUT:-/tmp/vq_out}
mkdir -p "$OUT"
DLP=/usr/include; [ -f $DLP/dlpack/dlpack.h ] || { DLP=/tmp/vq_dlpack; mkdir -p $DLP && cp -r .cudawork/dlpack/dlpack $DLP/; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLPACK_INCLUDE_DIR="$DLP" > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log; exit 1; }
( time ninja -C build vq ) > /tmp/build.log 2>&1 || { grep -B2 -A10 -m3 'error' /tmp/build.log; exit 1; }
tail -3 /tmp/build.log
shapes=${*:-kivi:32 kivi:8 hamming:32 exact:8}
for s in $shapes; do
  f=${s%%:*}; h=${s##*:}
  ./build/tools/vq bench attention --backend cuda --b1 --format "$f" --skv 131072 --hkv "$h"
  ncu --set full --import-source yes -k regex:"decode_kernel|fast_kernel" --launch-skip 8 --launch-count 1 \
      -o "/tmp/prof_${f}_$h" ./build/tools/vq bench attention --backend cuda --b1 --format "$f" \
      --skv 131072 --hkv "$h" > "/tmp/ncu_${f}_$h.log" 2>&1
  ncu --import "/tmp/prof_${f}_$h.ncu-rep" --page details --section SpeedOfLight --section WarpStateStats \
      --section InstructionStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      > "$OUT/details_${f}_$h.txt" 2>&1
  ncu --import "/tmp/prof_${f}_$h.ncu-rep" --page source --csv --print-source sass \
      > "$OUT/sass_${f}_$h.csv" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Executed Instructions  " "$OUT/details_${f}_$h.txt"
done
