// As foreign_user.cc, for NCCL: a library linked against NCCL under another soname (gpusim's,
// renamed libnccl-ftrenamed.so.2), loaded RTLD_LOCAL by foreign_runtime_test.cc.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <vector>

// 0 when a one-rank communicator's all-reduce returned the input, else the first failing
// ncclResult_t + 1000 (cudaError_t as is), or -1 for wrong data.
extern "C" __attribute__((visibility("default"))) int ft_foreign_nccl_run() {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclResult_t r;
  if ((r = ncclGetUniqueId(&id)) != ncclSuccess) return 1000 + r;
  if ((r = ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) return 1000 + r;
  constexpr size_t kN = 256;
  std::vector<float> in(kN), out(kN, 0.0f);
  for (size_t i = 0; i < kN; ++i) in[i] = static_cast<float>(i) + 0.25f;
  cudaStream_t s;
  cudaError_t e;
  if ((e = cudaStreamCreate(&s)) != cudaSuccess) return e;
  if ((r = ncclAllReduce(in.data(), out.data(), kN, ncclFloat32, ncclSum, comm, s)) != ncclSuccess) return 1000 + r;
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return e;
  if ((r = ncclCommDestroy(comm)) != ncclSuccess) return 1000 + r;
  if ((e = cudaStreamDestroy(s)) != cudaSuccess) return e;
  return in == out ? 0 : -1;
}
