# aarch64-linux-gnu.cmake — CMake toolchain file: cross-compiles veloxquant
# for 64-bit ARM Linux with Debian's cross compiler (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross), so the NEON kernels (src/cpu/neon) build and their
# tests run on an x86-64 machine under qemu-user (qemu-aarch64):
#   cmake -S . -B build-aarch64 -G Ninja -DVQ_CUDA=OFF \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build-aarch64 && (cd build-aarch64 && ctest)
# ctest runs each test program through CMAKE_CROSSCOMPILING_EMULATOR (qemu
# with the cross C library as its root); tests that are shell scripts running
# programs themselves (test_vq_cli, test_install) need binfmt_misc and are not
# meant for this build. VQ_AARCH64_TRIPLE / VQ_QEMU_AARCH64 override the names.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED VQ_AARCH64_TRIPLE)
  set(VQ_AARCH64_TRIPLE aarch64-linux-gnu)
endif()
set(CMAKE_C_COMPILER ${VQ_AARCH64_TRIPLE}-gcc)
# Debian installs the target's headers and libraries under /usr/<triple>.
set(CMAKE_FIND_ROOT_PATH /usr/${VQ_AARCH64_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# BOTH for headers: dlpack/dlpack.h is a header-only, architecture-independent
# package (libdlpack-dev) installed for the host in /usr/include.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)

if(NOT DEFINED VQ_QEMU_AARCH64)
  find_program(VQ_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
endif()
if(VQ_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${VQ_QEMU_AARCH64} -L /usr/${VQ_AARCH64_TRIPLE})
endif()
