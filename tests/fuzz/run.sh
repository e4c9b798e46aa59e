#!/bin/sh
# run.sh — builds the libFuzzer targets with clang and runs each for a bounded
# time over its committed seed corpus (tests/fuzz/corpus/<target>/, read only:
# new inputs go to a scratch directory). A crash, leak or sanitizer report
# fails the run (libFuzzer exits non-zero and leaves crash-* files in the
# build directory). JOBS targets run at a time (default: the cores), each
# for the whole time.
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS_PER_TARGET]   (defaults: build-fuzz 60)
# FUZZ_RUNS=N runs each target N executions instead of for a time (the offline
# runs recorded in bench/results/persist.md).
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
if [ -n "${FUZZ_RUNS:-}" ]; then
    limit="-runs=$FUZZ_RUNS"
else
    limit="-max_total_time=$secs"
fi
# one target: its log and exit status into the build directory
# (-rss_limit_mb / -malloc_limit_mb: an allocation the size checks should
# have refused is a failure, not a slow run)
fuzz_one() {
    work="$build/corpus-$1"
    mkdir -p "$work"
    rm -f "$build/$1.rc"
    if "$build/tests/fuzz/$1" $limit -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
        -artifact_prefix="$build/$1-" "$work" "$root/tests/fuzz/corpus/$1" >"$build/$1.log" 2>&1; then
        echo 0 >"$build/$1.rc"
    else
        echo $? >"$build/$1.rc"
    fi
}
# $jobs targets at a time (each a single process: one core apiece)
set -- $targets
while [ $# -gt 0 ]; do
    n=0
    while [ $# -gt 0 ] && [ $n -lt "$jobs" ]; do
        echo "== $1: started ($limit)"
        fuzz_one "$1" &
        n=$((n + 1))
        shift
    done
    wait
done
for t in $targets; do
    echo "== $t: done"
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done [0-9]+ runs" "$build/$t.log" || true
    rc=$(cat "$build/$t.rc")
    if [ "$rc" -ne 0 ]; then
        tail -n 60 "$build/$t.log"
        echo "fuzz: $t failed (exit $rc); the input is $build/$t-crash-* (or leak-/oom-/timeout-)"
        exit 1
    fi
done
echo "fuzz: all targets passed"
