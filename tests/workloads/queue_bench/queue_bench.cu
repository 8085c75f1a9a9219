// queue_bench: what a collective benchmark does (nccl-tests with many iterations, pipelined
// work with many small ops per step): each round enqueues --queue all-reduces on one stream of
// the world communicator before it synchronizes. Launched like trainsim (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT; trainsim's bootstrap hands out the ncclUniqueId).
// Built by nvcc against the real headers; on gpusim or a GPU, the same binary.
//
//   queue_bench [--queue N] [--rounds R] [--count C] [--verbose]
//
// Prints "queue_bench rank=<r> rounds=<R> ops=<total>" at the end.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap.h"

namespace {

[[noreturn]] void Die(const char* what, const char* detail) {
  std::fprintf(stderr, "queue_bench: error: %s: %s\n", what, detail);
  std::exit(1);
}

#define CUDA_CHECK(call)                                            \
  do {                                                              \
    cudaError_t e_ = (call);                                        \
    if (e_ != cudaSuccess) Die(#call, cudaGetErrorString(e_));      \
  } while (0)
#define NCCL_CHECK(call)                                            \
  do {                                                              \
    ncclResult_t r_ = (call);                                       \
    if (r_ != ncclSuccess) Die(#call, ncclGetErrorString(r_));      \
  } while (0)

int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) Die("bad environment value", name);
  return static_cast<int>(x);
}

long Flag(int argc, char** argv, int* i, const char* name) {
  if (*i + 1 >= argc) Die("missing value for", name);
  char* end = nullptr;
  long x = std::strtol(argv[++*i], &end, 10);
  if (*end != '\0' || x <= 0) Die("bad value for", name);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  long queue = 10000, rounds = 1, count = 64;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--queue") == 0) {
      queue = Flag(argc, argv, &i, "--queue");
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = Flag(argc, argv, &i, "--rounds");
    } else if (std::strcmp(argv[i], "--count") == 0) {
      count = Flag(argc, argv, &i, "--count");
    } else if (std::strcmp(argv[i], "--verbose") == 0) {
      verbose = true;
    } else {
      std::fprintf(stderr, "usage: queue_bench [--queue N] [--rounds R] [--count C] [--verbose]\n");
      return 2;
    }
  }
  const int rank = EnvInt("RANK", 0), world = EnvInt("WORLD_SIZE", 1), local = EnvInt("LOCAL_RANK", 0);
  const char* addr = std::getenv("MASTER_ADDR");
  const int port = EnvInt("MASTER_PORT", 0);
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 1) Die("cudaGetDeviceCount", "no CUDA device");
  CUDA_CHECK(cudaSetDevice(local % devices));
  ncclUniqueId id{};
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  std::string error;
  if (world > 1 && !trainsim::ExchangeBlob(addr != nullptr && *addr != '\0' ? addr : "127.0.0.1", port,
                                           rank, world, &id, sizeof(id), &error)) {
    Die("bootstrap", error.c_str());
  }
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* buf = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), count * sizeof(float)));
  CUDA_CHECK(cudaMemset(buf, 0, count * sizeof(float)));
  long ops = 0;
  for (long r = 0; r < rounds; ++r) {
    for (long i = 0; i < queue; ++i, ++ops) {
      NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (verbose) std::printf("queue_bench rank=%d round=%ld ops=%ld\n", rank, r + 1, ops), std::fflush(stdout);
  }
  std::printf("queue_bench rank=%d rounds=%ld ops=%ld\n", rank, rounds, ops);
  CUDA_CHECK(cudaFree(buf));
  CUDA_CHECK(cudaStreamDestroy(stream));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}
