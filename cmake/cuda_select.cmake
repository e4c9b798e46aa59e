# cuda_select.cmake — decides whether to build the CUDA backend (VQ_WITH_CUDA)
# and for which architectures, from VQ_CUDA (AUTO/ON/OFF, see CMakeLists.txt).
# Included before the library targets; enables the CUDA language when used.
#
# Architectures, unless the caller chose (-DCMAKE_CUDA_ARCHITECTURES or the
# CUDAARCHS environment variable):
#   a visible GPU: its own (SASS only, e.g. "90-real" on an H100/H200): one
#     compilation per .cu file;
#   no GPU (ON, e.g. CI or a build for another machine): SASS for Hopper plus
#     compute_80 PTX that the driver compiles for other cards (Ampere and
#     newer; the prefill kernel's mma.sync shapes need sm_80).
# Must run before enable_language(CUDA), which otherwise fills in nvcc's own
# default (sm_75 for nvcc 13).

string(TOUPPER "${VQ_CUDA}" vq_cuda_mode)
if(vq_cuda_mode MATCHES "^(1|TRUE|YES|Y)$")
  set(vq_cuda_mode ON)
elseif(vq_cuda_mode MATCHES "^(0|FALSE|NO|N)$")
  set(vq_cuda_mode OFF)
endif()
if(NOT vq_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "veloxquant: VQ_CUDA is '${VQ_CUDA}', expected AUTO, ON or OFF")
endif()

# The compute capabilities of the visible GPUs ("90;80"), empty when none.
set(vq_gpu_archs "")
if(NOT vq_cuda_mode STREQUAL "OFF")
  find_program(VQ_NVIDIA_SMI nvidia-smi)
  if(VQ_NVIDIA_SMI)
    execute_process(COMMAND ${VQ_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
      OUTPUT_VARIABLE vq_caps RESULT_VARIABLE vq_smi_rc ERROR_QUIET TIMEOUT 20)
    if(vq_smi_rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" vq_caps "${vq_caps}")
      foreach(cap IN LISTS vq_caps)
        string(REPLACE "." "" cap "${cap}")
        list(APPEND vq_gpu_archs "${cap}")
      endforeach()
      list(REMOVE_DUPLICATES vq_gpu_archs)
    endif()
  endif()
endif()

# The Makefile passes the nvcc it found as CMAKE_CUDA_COMPILER; reading it here
# keeps a CPU-only AUTO configure from warning that it went unused.
set(vq_cuda_compiler_given "${CMAKE_CUDA_COMPILER}")

set(VQ_WITH_CUDA OFF)
set(vq_cuda_hint "make CUDA=1, or cmake -DVQ_CUDA=ON")
if(vq_cuda_mode STREQUAL "AUTO" AND NOT vq_gpu_archs)
  message(STATUS "veloxquant: no usable GPU found: building CPU-only (CUDA backend: ${vq_cuda_hint})")
elseif(NOT vq_cuda_mode STREQUAL "OFF")
  # The Makefile's rule, for builds that do not come through it (pip install):
  # nvcc on the PATH, else the usual toolkit location.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(VQ_NVCC nvcc)
    if(NOT VQ_NVCC)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    if(vq_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "veloxquant: VQ_CUDA=ON but no CUDA compiler was found (put nvcc on the PATH or "
        "pass -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)")
    endif()
    message(STATUS "veloxquant: a GPU is visible but no CUDA compiler was found: building CPU-only "
      "(install the CUDA toolkit, then ${vq_cuda_hint})")
  else()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      if(vq_gpu_archs)
        list(TRANSFORM vq_gpu_archs APPEND "-real" OUTPUT_VARIABLE CMAKE_CUDA_ARCHITECTURES)
      else()
        set(CMAKE_CUDA_ARCHITECTURES "90-real;80-virtual")
      endif()
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(VQ_WITH_CUDA ON)
    message(STATUS "veloxquant: building the CUDA backend for ${CMAKE_CUDA_ARCHITECTURES}")
  endif()
endif()
if(NOT VQ_WITH_CUDA AND vq_cuda_mode STREQUAL "OFF")
  message(STATUS "veloxquant: building CPU-only (VQ_CUDA=OFF)")
endif()
# For the Makefile's closing line.
set(VQ_WITH_CUDA_BUILT ${VQ_WITH_CUDA} CACHE INTERNAL "whether this build compiles the CUDA backend")
