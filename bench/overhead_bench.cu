// The hot paths libft.so adds to, timed from the application's side: a kernel launch through
// the call nvcc generates (<<<>>> → __cudaLaunchKernel) and an ncclAllReduce enqueue on a
// one-rank communicator. Prints one line, `launch_ns=<per call> nccl_ns=<per call>`; the
// runner (bench/overhead.sh) runs it with and without LD_PRELOAD=libft.so and compares.
// Built by nvcc against the real headers, so it runs unchanged on a GPU host.
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

__global__ void bench_noop(int* p) {
  if (p != nullptr && threadIdx.x == 0 && blockIdx.x == 0) p[0] = 1;
}

double NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define CHECK(call, ok)                                                         \
  do {                                                                          \
    if ((call) != ok) {                                                         \
      std::fprintf(stderr, "overhead_bench: %s failed at line %d\n", #call, __LINE__); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream), cudaSuccess);
  int* buffer = nullptr;
  CHECK(cudaMalloc(&buffer, 4096), cudaSuccess);

  // Launches are enqueued in batches and drained in between, so the queue stays short and
  // the figure is the per-call cost on the host, as the app sees it.
  constexpr int kBatch = 1000;
  double launch_ns = 0;
  for (int done = 0; done < iterations; done += kBatch) {
    double t0 = NowNs();
    for (int i = 0; i < kBatch; ++i) bench_noop<<<1, 32, 0, stream>>>(buffer);
    launch_ns += NowNs() - t0;
    CHECK(cudaStreamSynchronize(stream), cudaSuccess);
  }

  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  double nccl_ns = 0;
  for (int done = 0; done < iterations; done += kBatch) {
    double t0 = NowNs();
    for (int i = 0; i < kBatch; ++i) {
      CHECK(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    }
    nccl_ns += NowNs() - t0;
    CHECK(cudaStreamSynchronize(stream), cudaSuccess);
  }
  CHECK(ncclCommDestroy(comm), ncclSuccess);
  CHECK(cudaFree(buffer), cudaSuccess);
  int batches = (iterations + kBatch - 1) / kBatch;
  std::printf("launch_ns=%.0f nccl_ns=%.0f\n", launch_ns / (batches * kBatch),
              nccl_ns / (batches * kBatch));
  return 0;
}
