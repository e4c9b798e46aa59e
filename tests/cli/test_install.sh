#!/bin/sh
# test_install.sh — installs a veloxquant build into a temporary prefix and
# builds examples/api_tour.c (tests/install_consumer/) against the installed copy, three
# ways, running each program:
#   1. find_package(veloxquant), shared library   (CMake package config)
#   2. find_package(veloxquant), static library
#   3. pkg-config: shared, then `--static` with libveloxquant.a
# Usage: test_install.sh <build dir> [cmake]. Exit 0 pass, 1 fail, 77 skip
# (no cmake; ctest reports SKIP_RETURN_CODE 77 as skipped).
set -eu

build=${1:?usage: test_install.sh <build dir> [cmake]}
cmake=${2:-cmake}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}

if ! command -v "$cmake" >/dev/null 2>&1; then
    echo "SKIP: cmake not found"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

step() { echo "== $*"; }

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }

# The lib dir is whatever GNUInstallDirs chose (lib, lib64, lib/<triplet>).
pc=$(find "$prefix" -name veloxquant.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no veloxquant.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in "$prefix/include/veloxquant.h" "$prefix/include/veloxquant_kernels.h" "$libdir/libveloxquant.a" "$libdir/libveloxquant.so" \
         "$libdir/cmake/veloxquant/veloxquantConfig.cmake" \
         "$libdir/cmake/veloxquant/veloxquantConfigVersion.cmake" \
         "$libdir/cmake/veloxquant/veloxquantTargets.cmake"; do
    [ -e "$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done

# The shared library exports the public API and nothing else: every defined
# function symbol starts with vq_ and is declared in the installed header.
if command -v nm >/dev/null 2>&1; then
    step "exported symbols of libveloxquant.so"
    nm -D --defined-only "$libdir/libveloxquant.so" | awk '$2 == "T" { print $3 }' >"$tmp/exports"
    [ -s "$tmp/exports" ] || { echo "FAIL: libveloxquant.so exports no functions"; exit 1; }
    while read -r sym; do
        cat "$prefix/include/veloxquant.h" "$prefix/include/veloxquant_kernels.h" | grep -q "VQ_API .*\b$sym(" ||
            { echo "FAIL: libveloxquant.so exports $sym, which the header does not declare"; exit 1; }
    done <"$tmp/exports"
fi

step "find_package(veloxquant): configure and build the consumer"
generator=""
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086  # $generator is empty or two words on purpose
"$cmake" -S "$here/install_consumer" -B "$tmp/consumer" $generator -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
step "run the find_package consumers"
"$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "note: pkg-config not found, the pkg-config build is not tested"
    exit 0
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"
step "pkg-config: $(pkg-config --modversion veloxquant), shared"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
"$cc" -std=c11 -o "$tmp/consumer_pc" "$here/../../examples/api_tour.c" \
    $(pkg-config --cflags veloxquant) $(pkg-config --libs veloxquant) -lm -Wl,-rpath,"$libdir"
"$tmp/consumer_pc"
step "pkg-config --static, libveloxquant.a"
# -l:libveloxquant.a makes the linker take the archive though the .so sits next to it.
# shellcheck disable=SC2046
"$cc" -std=c11 -o "$tmp/consumer_pc_static" "$here/../../examples/api_tour.c" \
    $(pkg-config --cflags veloxquant) \
    $(pkg-config --static --libs veloxquant | sed 's/-lveloxquant\b/-l:libveloxquant.a/')
# Fails to start if it were linked to the shared library (no rpath, no LD_LIBRARY_PATH).
"$tmp/consumer_pc_static"
echo "install test passed"
