// The exported CUDA runtime wrappers, one per FT_CUDA line of cudart.def. Plain unversioned
// definitions: they interpose on references bound to symbol@libcudart.so.13 (FACTS.md).
#include <cuda_runtime_api.h>

#include "preload/kernel_launch.h"
#include "preload/real.h"
#include "preload/runtime.h"

#define FT_EXPORT __attribute__((visibility("default")))

#define FT_CUDA_HOOK_CALL(category)                                            \
  NoteCall();                                                                  \
  constexpr auto kCategory = CallCategory::category;                           \
  cudaError_t result;                                                          \
  if constexpr (kCategory == CallCategory::kSync ||                            \
                kCategory == CallCategory::kBlockingCopy) {                    \
    BlockedScope blocked;                                                      \
    result = call();                                                           \
  } else {                                                                     \
    result = call();                                                           \
  }                                                                            \
  if (result != cudaSuccess) CudaApiError(kSym, result);                       \
  return result;

#define FT_CUDA_HOOK_GRAPH(stream)                 \
  Pending* pending = CudaGraphPre(stream);         \
  cudaError_t result = call();                     \
  CudaGraphPost(pending, stream, result);          \
  return result;

#define FT_CUDA_HOOK_ALLOC(ptr, bytes)                          \
  cudaError_t result = call();                                  \
  if (result != cudaSuccess) CudaApiError(kSym, result);        \
  CudaAllocPost(ptr, bytes, result);                            \
  return result;

#define FT_CUDA_HOOK_FREE(ptr)                                  \
  cudaError_t result = call();                                  \
  if (result != cudaSuccess) CudaApiError(kSym, result);        \
  CudaFreePost(ptr, result);                                    \
  return result;

#define FT_CUDA_HOOK_REGFN(host_fun, device_name)   \
  call();                                           \
  CudaRegisterFunctionPost(host_fun, device_name);  \
  return;

#define FT_CUDA_HOOK_LAUNCH(kernel, stream, per_thread)                                  \
  NoteCall();                                                                            \
  const cudaStream_t launch_stream = internal::LaunchStream(stream, per_thread);         \
  Pending* sample = internal::KernelLaunchPre(kernel, launch_stream);                    \
  cudaError_t result = call();                                                           \
  if (result != cudaSuccess) CudaApiError(kSym, result);                                 \
  internal::KernelLaunchPost(sample, result);                                            \
  return result;

#define FT_CUDA_HOOK_KERNEL_HANDLE(handle_out, host_stub)       \
  cudaError_t result = call();                                  \
  if (result != cudaSuccess) CudaApiError(kSym, result);        \
  CudaKernelHandlePost(handle_out, host_stub, result);          \
  return result;

#define FT_CUDA(ret, name, params, args, kind)                                        \
  extern "C" FT_EXPORT ret name params {                                              \
    using namespace ::ft::preload;                                                    \
    constexpr CudaSym kSym = CudaSym::k_##name;                                       \
    using Fn = ret(*) params;                                                         \
    Fn real = reinterpret_cast<Fn>(RealCuda(kSym));                                   \
    if (real == nullptr) return MissingReal<ret>();                                   \
    auto call = [&]() -> ret { return real args; };                                   \
    if (!Intercepting()) return call();                                               \
    ReentryGuard guard;                                                               \
    FT_CUDA_HOOK_##kind                                                               \
  }
#include "shm/cudart.def"
#undef FT_CUDA
