#!/bin/bash
# device_paged.sh — one device call for the paged CUDA cache (issue 8): the
# CUDA backend built for the H200 (90-real), every tests/test_cuda_*,
# compute-sanitizer memcheck on the cache test (quick mode), the registers of
# the decode kernels (cuobjdump), and `vq bench cache` on the paged path and,
# for comparison, the gathered one (VQ_CACHE_CUDA_GATHER=1). Logs under $OUT.
# Run from a copy of the tree that holds dlpack_include/ and COMMIT:
#   OUT=/some/dir bash bench/cuda/device_paged.sh [tests|extra]
# tests: build, tests and the 4K/32K tables; extra (a warm follow-up call: the
# build lives in /tmp/vqb, outside the carried tree): the 128K table and the
# Python package's CUDA tests. No argument: both. GATHER=0 skips the gathered
# comparison, PYTHON=0 the Python package (a second CUDA build, ~5 min),
# SANITIZE=1 adds racecheck and initcheck on test_cuda_attend and test_cuda_cache.
. "$(dirname "$0")/device_env.sh" paged

step configure
B=/tmp/vqb
[ -f $B/build.ninja ] || cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real -DDLPACK_INCLUDE_DIR="$DLP" > "$L/cmake.log" 2>&1 || { tail -30 "$L/cmake.log"; exit 1; }
TESTS=$(cd tests && ls test_cuda_*.c | sed 's/\.c$//')
step build
[ "${1:-all}" = extra ] && [ -x $B/tools/vq ] && echo "extra: the build of the last call" || \
( time ninja -C $B vq $TESTS ) > "$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for f in kv_sdpa_f16 kv_sdpa_turbo_enc attend_fast_kivi_b2 attend_merge; do
    o=$(find $B -name "$f.cu.o" | head -1)
    [ -n "$o" ] && echo "$f: $($CO --dump-resource-usage "$o" 2>/dev/null | grep -oE 'REG:[0-9]+ STACK:[0-9]+' | sort | uniq -c | tr '\n' ';')"
done

MODE=${1:-all}
summary=""
if [ "$MODE" != extra ]; then
for t in $TESTS; do
    step "$t"
    timeout 150 $B/tests/$t > "$L/$t.log" 2>&1
    rc=$?
    grep -E "FAIL|passed|failed" "$L/$t.log" | head -8
    [ $rc -ne 0 ] && cp "$L/$t.log" "$OUT/"
    summary="$summary$t rc=$rc: $(grep -E 'passed.*failed' "$L/$t.log" | tail -1)\n"
done
step "memcheck test_cuda_cache"
VQ_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_cache > "$L/san.log" 2>&1
rc=$?; grep -E "ERROR SUMMARY" "$L/san.log" | head -2; summary="${summary}memcheck test_cuda_cache rc=$rc\n"
# SANITIZE=1: racecheck and initcheck too (issue 13 asks for all three), on the
# decode entry points and the cache, quick mode
if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in racecheck initcheck; do
        for t in test_cuda_attend test_cuda_cache; do
            step "$tool $t"
            VQ_TEST_QUICK=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/$t > "$L/$tool.$t.log" 2>&1
            rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$L/$tool.$t.log" | head -2
            [ $rc -ne 0 ] && cp "$L/$tool.$t.log" "$OUT/"
            summary="${summary}$tool $t rc=$rc\n"
        done
    done
fi
printf "$summary"

step "bench cache (paged)"
timeout 150 $B/tools/vq bench cache --backend cuda --skv 4096,32768 --batch 1,8 \
    --methods f16,kivi2,kivi4,turbo2,turbo4,rvq22 --repeats 5 | tee "$OUT/bench_cache_paged.txt"
if [ "${GATHER:-1}" = 1 ]; then
    step "bench cache (gathered, for comparison)"
    VQ_CACHE_CUDA_GATHER=1 timeout 60 $B/tools/vq bench cache --backend cuda --skv 32768 --batch 1,8 \
        --methods f16,kivi2,turbo2 --repeats 5 | tee "$OUT/bench_cache_gathered.txt"
fi
fi
if [ "$MODE" != tests ]; then
    step "bench cache 128K (paged)"
    timeout 240 $B/tools/vq bench cache --backend cuda --skv 131072 --batch 1,8 \
        --methods f16,kivi2,turbo2 --repeats 5 | tee "$OUT/bench_cache_128k.txt"
    [ "${PYTHON:-1}" = 1 ] || { step done; printf "$summary"; exit 0; }
    step "python package (CUDA) and its CUDA tests"
    PY=/tmp/vq_py
    ( SKBUILD_CMAKE_DEFINE="VQ_CUDA=ON;CMAKE_CUDA_ARCHITECTURES=90-real;DLPACK_INCLUDE_DIR=$DLP" \
        timeout 300 python3 -m pip install --quiet --no-deps --no-build-isolation --target "$PY" . ) > "$L/pip.log" 2>&1
    echo "pip rc=$?"; tail -3 "$L/pip.log"
    ( cd /tmp && PYTHONPATH="$PY" timeout 120 python3 -m pytest -q "$OLDPWD/python/tests/test_cuda.py" ) > "$OUT/pytest_cuda.txt" 2>&1
    rc=$?; tail -5 "$OUT/pytest_cuda.txt"
    summary="${summary}pytest test_cuda.py rc=$rc: $(tail -1 "$OUT/pytest_cuda.txt")\n"
fi
step done
printf "$summary"
