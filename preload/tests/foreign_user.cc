// A library linked against the CUDA runtime under another soname (gpusim's, renamed
// libcudart-ftrenamed.so.13), loaded by foreign_runtime_test.cc with RTLD_LOCAL: its runtime is
// then in no scope dlsym(RTLD_NEXT) searches, while its CUDA calls still reach libft.so's
// wrappers (LD_PRELOAD comes first in every lookup). As PyTorch's extension modules do.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

// 0 when every call succeeded and the data came back, else the first failing cudaError_t (or
// -1 for wrong data).
extern "C" __attribute__((visibility("default"))) int ft_foreign_run() {
  constexpr size_t kN = 1024;
  std::vector<int> host(kN), back(kN, 0);
  for (size_t i = 0; i < kN; ++i) host[i] = static_cast<int>(i * 7);
  void* dev = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t ev = nullptr;
  cudaError_t e;
  if ((e = cudaMalloc(&dev, kN * sizeof(int))) != cudaSuccess) return e;
  if ((e = cudaStreamCreate(&s)) != cudaSuccess) return e;
  if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess) return e;
  if ((e = cudaMemcpyAsync(dev, host.data(), kN * sizeof(int), cudaMemcpyHostToDevice, s)) != cudaSuccess) return e;
  if ((e = cudaEventRecord(ev, s)) != cudaSuccess) return e;
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return e;
  if ((e = cudaEventQuery(ev)) != cudaSuccess) return e;
  if ((e = cudaMemcpy(back.data(), dev, kN * sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess) return e;
  if ((e = cudaEventDestroy(ev)) != cudaSuccess) return e;
  if ((e = cudaStreamDestroy(s)) != cudaSuccess) return e;
  if ((e = cudaFree(dev)) != cudaSuccess) return e;
  return std::memcmp(host.data(), back.data(), kN * sizeof(int)) == 0 ? 0 : -1;
}
