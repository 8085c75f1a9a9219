# Locates the CUDA runtime headers (CUDAToolkit) and the NCCL headers (NCCL_ROOT, or next to
# the toolkit), and nvcc for the test workloads. Only headers are used by ft itself.
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # sm_80 (A100) and sm_90 (H100): the code trainsim runs on a real GPU.
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "NCCL install prefix (headers in include/)")
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
  REQUIRED)
file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_major REGEX "^#define NCCL_MAJOR")
file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_minor REGEX "^#define NCCL_MINOR")
message(STATUS "NCCL headers: ${NCCL_INCLUDE_DIR} (${_nccl_major} ${_nccl_minor})")

# Header-only interface targets: compile against the real ABI without linking it.
add_library(ft_cuda_headers INTERFACE)
target_include_directories(ft_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
add_library(ft_nccl_headers INTERFACE)
target_include_directories(ft_nccl_headers SYSTEM INTERFACE ${NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
