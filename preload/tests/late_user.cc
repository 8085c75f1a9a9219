// Libraries a test program dlopen()s after start, as PyTorch loads libtorch_cuda (and with it
// libcudart and libnccl) long after LD_PRELOAD's libft.so: built twice, once linked to the
// runtime only (FT_LATE_NCCL=0), once to the runtime and NCCL.
#include <cuda_runtime_api.h>
#if FT_LATE_NCCL
#include <nccl.h>
#endif

extern "C" __attribute__((visibility("default"))) int ft_late_run() {
  void* p = nullptr;
  if (cudaMalloc(&p, 256) != cudaSuccess) return 1;
  if (cudaMemset(p, 1, 256) != cudaSuccess) return 2;
#if FT_LATE_NCCL
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 4;
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 5;
  for (int i = 0; i < 2; ++i) {
    if (ncclAllReduce(p, p, 64, ncclFloat32, ncclSum, comm, s) != ncclSuccess) return 6;
  }
  if (cudaStreamSynchronize(s) != cudaSuccess) return 7;
  if (ncclCommDestroy(comm) != ncclSuccess) return 8;
#endif
  if (cudaFree(p) != cudaSuccess) return 9;
  return 0;
}
