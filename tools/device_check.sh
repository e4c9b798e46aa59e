#!/bin/bash
# device_check.sh — everything the CUDA backend needs checked on a machine with
# an NVIDIA GPU, in one run: build (CUDA backend, sm_90 unless CUDA_ARCH says
# otherwise), every CUDA test, compute-sanitizer memcheck + racecheck +
# initcheck on the tests' quick modes, the registers and spills of every
# kernel, then the benchmarks next to PyTorch's f16 SDPA timed in the same run
# (tools/torch_sdpa.py). Logs and tables go under $OUT (default /tmp/vq_out);
# a summary is printed last.
#
#   OUT=/some/dir bash tools/device_check.sh [STEPS]
#
# STEPS, comma-separated (default all = tests,sanitize,bench,cache,e2e):
#   tests     build, every test_cuda_*, the register report, the tests that reach
#             the tensor-core skeleton again with it on (VQ_CUDA_MMA=1)
#   sanitize  memcheck, racecheck and initcheck on each CUDA test (quick mode)
#   bench     vq bench attention --backend cuda, then PyTorch f16 SDPA
#   cache     vq bench cache --backend cuda: every preset that needs no tables, 4K and 32K
#   e2e       the Python extension (CUDA), its CUDA tests (python/tests/test_cuda.py)
#             when pytest is there, and tools/hf_decode_bench.py: a Llama-3.1-8B-shaped
#             model in transformers decoding with veloxquant.hf.Cache presets against
#             DynamicCache (E2E_ARGS adds arguments, e.g. --contexts 8192;
#             E2E_PYTEST=0 leaves the pytest out)
#   quick     the B = 1 benchmark rows only (with bench)
# Environment: B (build dir, default /tmp/vqb, reused when present), CUDA_ARCH
# (default 90-real), OUT, SKIP (an extended regex of CUDA tests to leave out).
#
# For a checkout that the GPU machine receives as a copy without git or
# system DLPack headers, `bash tools/device_check.sh --pack DIR` copies the
# tracked and untracked (not ignored) files, the DLPack headers and a COMMIT
# line into DIR first; run the script from DIR there.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = --pack ]; then
    dst=${2:?--pack needs a directory}
    cd "$here"
    rm -rf "$dst" && mkdir -p "$dst"
    git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dst/"
    dl=$(dirname "$(find /usr/include /usr/local/include -name dlpack.h -path '*dlpack/*' 2>/dev/null | head -1)")
    [ -d "$dl" ] && mkdir -p "$dst/dlpack_include" && cp -r "$dl" "$dst/dlpack_include/"
    git log -1 --format="commit %H %cd$(git diff --quiet HEAD || echo ' plus uncommitted changes')" > "$dst/COMMIT"
    du -sh "$dst"
    exit 0
fi

cd "$here"
OUT=${OUT:-/tmp/vq_out}
STEPS=,${1:-all},
[ "$STEPS" = ,all, ] && STEPS=,tests,sanitize,bench,cache,e2e,
has() { case $STEPS in *,$1,*) return 0 ;; esac; return 1; }
B=${B:-/tmp/vqb}
L=/tmp/vq_logs # the many per-test logs; only a few files may come back from $OUT
mkdir -p "$OUT" "$L"
exec > >(tee "$OUT/device_check.log") 2>&1
step() { echo "== $(date -u +%T) $*"; }
summary=""
note() { summary="$summary$*\n"; }

step start
git log -1 --format='commit %H %cd' 2>/dev/null || cat COMMIT 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv,noheader
nvcc --version | tail -1

DLP=
for d in /usr/include /usr/local/include "$here/dlpack_include"; do
    [ -f "$d/dlpack/dlpack.h" ] && { DLP=$d; break; }
done
[ -n "$DLP" ] || { echo "no dlpack/dlpack.h (install dlpack, or --pack from a machine that has it)"; exit 1; }
# CMake refuses an exported include folder inside the source tree
[ "$DLP" = "$here/dlpack_include" ] && { [ -d /tmp/vq_dlpack/dlpack ] || { mkdir -p /tmp/vq_dlpack && cp -r "$DLP/dlpack" /tmp/vq_dlpack/; }; DLP=/tmp/vq_dlpack; }

# A machine kept warm between calls keeps $B, but receives the tree as a fresh
# copy: every file is newer than its object, and ninja would rebuild all of it
# (minutes). Files whose content is the same as at the last build get a time
# older than any object (2000-01-01), so only what changed is rebuilt.
sums=$B/.vq_sources.sha256
sources() { find . \( -path ./.git -o -path "./${B#"$here"/}" -o -path './build*' -o -name __pycache__ \) -prune -o -type f -print; }
if [ -f "$sums" ]; then
    kept=$(sha256sum -c "$sums" 2>/dev/null | sed -n 's/: OK$//p')
    [ -n "$kept" ] && printf '%s\n' "$kept" | xargs -d '\n' touch -c -d @946684800
    echo "$(printf '%s' "$kept" | grep -c .) files unchanged since the last build on this machine"
fi

step configure
# with the Python extension where this Python has its development headers
configure() {
    cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" \
        -DDLPACK_INCLUDE_DIR="$DLP" -DPython_EXECUTABLE="$(command -v python3)" "$@" > "$L/cmake.log" 2>&1
}
[ -f "$B/build.ninja" ] || configure -DVQ_PYTHON=ON || { rm -rf "$B"; configure; } ||
    { tail -30 "$L/cmake.log"; exit 1; }
TESTS=$(ninja -C "$B" -t targets all | grep -oE '^test_cuda_[a-z_0-9]+:' | tr -d : | sort -u |
    grep -vE "^(${SKIP:-^})$" | tr '\n' ' ')
step "build vq $TESTS"
( time ninja -C "$B" vq $TESTS ) > "$OUT/build.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
sources | xargs -d '\n' sha256sum > "$sums"
tbin() { find "$B" -name "$1" -type f -perm -u+x | head -1; }

if has tests; then
    step "registers (REG, STACK = spill/stack bytes) of the decode kernels"
    bash tools/cuda_regs.sh "$B" | tee "$OUT/registers.txt" | tail -25
    note "registers: $(grep -c . "$OUT/registers.txt") kernels"
    for t in $TESTS; do
        step "$t"
        timeout 240 "$(tbin $t)" > "$L/$t.log" 2>&1
        rc=$?
        grep -E "FAIL|passed|failed|worst" "$L/$t.log" | head -12
        [ $rc -ne 0 ] && { tail -20 "$L/$t.log"; cp "$L/$t.log" "$OUT/"; }
        note "$t rc=$rc: $(grep -E 'passed' "$L/$t.log" | tail -1)"
    done
    # the opt-in tensor-core skeleton (VQ_CUDA_MMA=1: f16 and KIVI policies) on the tests that reach it
    for t in $TESTS; do
        case $t in test_cuda_attend | test_cuda_cache | test_cuda_sdpa | test_cuda_nonfinite) ;; *) continue ;; esac
        step "VQ_CUDA_MMA=1 $t"
        VQ_CUDA_MMA=1 timeout 240 "$(tbin $t)" > "$L/mma_$t.log" 2>&1
        rc=$?
        grep -E "FAIL|passed" "$L/mma_$t.log" | head -8
        note "VQ_CUDA_MMA=1 $t rc=$rc: $(grep -E 'passed' "$L/mma_$t.log" | tail -1)"
    done
fi

if has sanitize; then
    for tool in memcheck racecheck initcheck; do
        for t in $TESTS; do
            step "$tool $t"
            VQ_TEST_QUICK=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$(tbin $t)" > "$L/san.log" 2>&1
            rc=$?
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$L/san.log" | tail -1
            [ $rc -ne 0 ] && { grep -m3 -A8 '^========= [A-Z]' "$L/san.log" | head -30; cp "$L/san.log" "$OUT/san_${tool}_$t.log"; }
            note "$tool $t rc=$rc"
        done
    done
fi

B1=
has quick && B1=--b1
if has bench; then
    step "vq bench attention --backend cuda $B1"
    timeout 300 "$B/tools/vq" bench attention --backend cuda $B1 > "$OUT/bench_attention.txt" 2>&1
    note "bench attention rc=$?"
    cat "$OUT/bench_attention.txt"
    step "PyTorch f16 SDPA"
    PYTHONUNBUFFERED=1 timeout 200 python3 tools/torch_sdpa.py --decode $B1 > "$OUT/torch_sdpa.txt" 2>&1
    note "torch sdpa rc=$?"
    cat "$OUT/torch_sdpa.txt"
fi
if has cache; then
    step "vq bench cache --backend cuda --methods all"
    timeout 420 "$B/tools/vq" bench cache --backend cuda --methods all --skv 4K,32K --repeats 5 > "$OUT/bench_cache.txt" 2>&1
    note "bench cache rc=$?"
    cat "$OUT/bench_cache.txt"
fi
if has e2e; then
    step "Python extension (CUDA)"
    if ninja -C "$B" -t targets all | grep -q '^_vq:'; then
        ninja -C "$B" _vq > "$L/pyext.log" 2>&1 || tail -20 "$L/pyext.log"
        cp "$(find "$B" -name '_vq*.so' | head -1)" python/veloxquant/ && export PYTHONPATH="$here/python"
        if [ "${E2E_PYTEST:-1}" = 1 ] && python3 -c 'import pytest' 2>/dev/null; then
            step "pytest python/tests/test_cuda.py"
            timeout 300 python3 -m pytest -q -p no:cacheprovider python/tests/test_cuda.py > "$OUT/pytest_cuda.txt" 2>&1
            note "pytest test_cuda rc=$?: $(tail -1 "$OUT/pytest_cuda.txt")"
            tail -5 "$OUT/pytest_cuda.txt"
        fi
        step "transformers decode, Llama-3.1-8B shape (tools/hf_decode_bench.py)"
        PYTHONUNBUFFERED=1 timeout 420 python3 tools/hf_decode_bench.py --json "$OUT/hf_decode.json" ${E2E_ARGS:-} \
            > "$OUT/hf_decode.txt" 2>&1
        note "hf decode bench rc=$?"
        cat "$OUT/hf_decode.txt" | tail -30
    else
        echo "no Python development headers: the Python extension was not configured"; note "e2e: no Python headers"
    fi
fi
step done
printf "$summary"
