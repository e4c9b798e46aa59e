#!/bin/bash
# device_final.sh — a session's closing device call, everything in one run:
# the CUDA backend built for the H200 (90-real), every tests/test_cuda_*
# (full), compute-sanitizer memcheck on the cache tests (quick mode), the
# cache benchmark (vq bench cache --backend cuda), and last the Python
# package's CUDA tests (a second, CPU+CUDA build of the package). Logs and tables under $OUT; the table of results is printed last.
# Run from a copy of the tree that holds dlpack_include/ and COMMIT:
#   OUT=/some/dir bash bench/cuda/device_final.sh
. "$(dirname "$0")/device_env.sh" final

step configure
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DDLPACK_INCLUDE_DIR="$DLP" > "$L/cmake.log" 2>&1 || { tail -30 "$L/cmake.log"; exit 1; }
TESTS=$(cd tests && ls test_cuda_*.c | sed 's/\.c$//')
step build
( time ninja -C build vq $TESTS ) > "$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"

summary=""
for t in $TESTS; do
    step "$t"
    timeout 150 build/tests/$t > "$L/$t.log" 2>&1
    rc=$?
    grep -E "FAIL|passed|failed" "$L/$t.log" | head -8
    summary="$summary$t rc=$rc: $(grep -E 'passed.*failed' "$L/$t.log" | tail -1)\n"
done

for t in $TESTS; do
    case $t in test_cuda_cache*) ;; *) continue ;; esac
    step "memcheck $t"
    VQ_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/$t > "$L/san_$t.log" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY" "$L/san_$t.log" | head -2
    summary="${summary}memcheck $t rc=$rc\n"
done

step "bench cache"
# QJL keys and codebook values have no CUDA encoder yet (VQ_ERR_UNSUPPORTED): not in the list
timeout 200 ./build/tools/vq bench cache --backend cuda --methods f16,kivi2,kivi4,turbo2,turbo4,rvq22,rabitq-exact \
    --repeats 5 | tee "$OUT/bench_cache.txt"

step "python package (CUDA) and its CUDA tests"
if [ -f python/tests/test_cuda.py ] && python3 -c 'import scikit_build_core, pytest' 2>/dev/null; then
    PY=/tmp/vq_py
    ( SKBUILD_CMAKE_DEFINE="VQ_CUDA=ON;CMAKE_CUDA_ARCHITECTURES=90-real;DLPACK_INCLUDE_DIR=$DLP" \
        timeout 240 python3 -m pip install --quiet --no-deps --no-build-isolation --target "$PY" . ) > "$L/pip.log" 2>&1
    echo "pip rc=$?"; tail -3 "$L/pip.log"
    ( cd /tmp && PYTHONPATH="$PY" timeout 120 python3 -m pytest -q "$OLDPWD/python/tests/test_cuda.py" ) > "$OUT/pytest_cuda.txt" 2>&1
    rc=$?
    tail -5 "$OUT/pytest_cuda.txt"
    summary="${summary}pytest test_cuda.py rc=$rc: $(tail -1 "$OUT/pytest_cuda.txt")\n"
fi
step done
printf "$summary"
