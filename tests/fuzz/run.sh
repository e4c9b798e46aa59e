#!/bin/sh
# run.sh — builds the libFuzzer targets with clang and runs each for a bounded
# time over its committed seed corpus (tests/fuzz/corpus/<target>/, read only:
# new inputs go to a scratch directory). A crash, leak or sanitizer report
# fails the run (libFuzzer exits non-zero and leaves crash-* files in the
# build directory).
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS_PER_TARGET]   (defaults: build-fuzz 60)
# FUZZ_RUNS=N runs each target N executions instead of for a time (the offline
# runs recorded in bench/results/fuzz.md).
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build-fuzz}
secs=${2:-60}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CC=${FUZZ_CC:-clang} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVQ_FUZZ=ON -DVQ_CUDA=OFF \
    -DVQ_BUILD_TESTS=OFF -DVQ_BUILD_TOOLS=OFF >/dev/null
targets="fuzz_calibration fuzz_cache fuzz_npy fuzz_gguf"
cmake --build "$build" -j "$jobs" --target $targets
root=$(pwd)
for t in $targets; do
    work="$build/corpus-$t"
    mkdir -p "$work"
    if [ -n "${FUZZ_RUNS:-}" ]; then
        limit="-runs=$FUZZ_RUNS"
    else
        limit="-max_total_time=$secs"
    fi
    echo "== $t ($limit)"
    log="$build/$t.log"
    # -rss_limit_mb / -malloc_limit_mb: an allocation the size checks should
    # have refused is a failure, not a slow run
    set +e
    "$build/tests/fuzz/$t" $limit -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
        -artifact_prefix="$build/$t-" "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done [0-9]+ runs" "$log" || true
    if [ "$rc" -ne 0 ]; then
        tail -n 60 "$log"
        echo "fuzz: $t failed (exit $rc); the input is $build/$t-crash-* (or leak-/oom-/timeout-)"
        exit 1
    fi
done
echo "fuzz: all targets passed"
