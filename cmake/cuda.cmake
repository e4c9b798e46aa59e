# CUDA backend: kernels in src/cuda/*.cu, host glue in src/cuda/*.c (plain C
# calling the runtime API). The target architectures are chosen in
# CMakeLists.txt, before enable_language(CUDA).
set(CMAKE_CUDA_STANDARD 17)
file(GLOB VQ_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.cu)
file(GLOB VQ_CUDA_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.c)
list(APPEND VQ_PORTABLE_SOURCES ${VQ_CUDA_HOST_SOURCES})
if(VQ_CUDA_KERNEL_SOURCES)
  add_library(vq_cuda_objects OBJECT ${VQ_CUDA_KERNEL_SOURCES})
  target_include_directories(vq_cuda_objects PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include
    ${CMAKE_CURRENT_SOURCE_DIR}/src ${DLPACK_INCLUDE_DIR})
  # Keep the host side of the .cu files to the plain part of the C++ runtime
  # (C programs link libveloxquant.a with a C linker plus -lstdc++): no
  # thread-safe statics (__cxa_guard_*) and no exceptions in the launch code
  # nvcc generates.
  target_compile_options(vq_cuda_objects PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr
    -Xcompiler=-fno-threadsafe-statics -Xcompiler=-fno-exceptions>)
  set_target_properties(vq_cuda_objects PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_VISIBILITY_PRESET hidden)
  set(VQ_CUDA_OBJECTS $<TARGET_OBJECTS:vq_cuda_objects>)
endif()
