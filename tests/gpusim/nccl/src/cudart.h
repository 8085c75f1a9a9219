// The CUDA runtime as this library reaches it. Like the real libnccl (which links a static
// runtime), our own calls must not pass through an LD_PRELOAD wrapper of libcudart: the
// runtime is dlopen'ed and its functions taken with dlsym on that handle, which searches the
// library's own scope and bypasses interposers. libnccl.so.2 is not linked against libcudart.
#ifndef GPUSIM_NCCL_CUDART_H_
#define GPUSIM_NCCL_CUDART_H_

#include <cuda_runtime_api.h>

namespace gpusim::nccl {

struct CudaRt {
  decltype(&cudaLaunchHostFunc) LaunchHostFunc = nullptr;
  decltype(&cudaStreamIsCapturing) StreamIsCapturing = nullptr;  // optional
  decltype(&cudaGetDevice) GetDevice = nullptr;                  // optional
  decltype(&cudaGetErrorString) GetErrorString = nullptr;        // optional
};

// Loads libcudart.so.13 once (thread-safe). Null if it or cudaLaunchHostFunc is missing; then
// *why (if given) says what failed.
const CudaRt* GetCudaRt(const char** why = nullptr);

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_CUDART_H_
