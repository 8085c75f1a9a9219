// Wrapper cost per call on gpusim: run it with and without LD_PRELOAD=libft.so and compare.
// Not a test (timings vary); prints ns per call for a pass-through-like CUDA call
// (cudaGetLastError is not wrapped, cudaMemsetAsync is: kind CALL), for an ncclAllReduce of
// 4 bytes on a one-rank communicator (hooks: id lookup, capture check, two events, poller),
// and for a grouped pair.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <time.h>

#include <cstdio>

namespace {

double NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

}  // namespace

int main() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  void* p = nullptr;
  cudaMalloc(&p, 4096);
  constexpr int kMemsets = 100000;
  double t0 = NowNs();
  for (int i = 0; i < kMemsets; ++i) cudaMemsetAsync(p, 0, 4, s);
  double t1 = NowNs();
  cudaStreamSynchronize(s);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  ncclCommInitRank(&comm, 1, id, 0);
  constexpr int kOps = 20000;
  double t2 = NowNs();
  for (int i = 0; i < kOps; ++i) ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, s);
  double t3 = NowNs();
  cudaStreamSynchronize(s);
  double t4 = NowNs();
  double t5 = NowNs();
  for (int i = 0; i < kOps / 2; ++i) {
    ncclGroupStart();
    ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, s);
    ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, s);
    ncclGroupEnd();
  }
  double t6 = NowNs();
  cudaStreamSynchronize(s);
  double t7 = NowNs();
  std::printf("cudaMemsetAsync enqueue: %.0f ns/call\n", (t1 - t0) / kMemsets);
  std::printf("ncclAllReduce enqueue: %.0f ns/call; enqueue+drain %.0f ns/op\n", (t3 - t2) / kOps,
              (t4 - t2) / kOps);
  std::printf("grouped pair enqueue: %.0f ns/pair; enqueue+drain %.0f ns/pair\n", (t6 - t5) / (kOps / 2),
              (t7 - t5) / (kOps / 2));
  ncclCommDestroy(comm);
  cudaFree(p);
  return 0;
}
