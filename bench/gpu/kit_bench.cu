// kit_bench: the small measurements of the GPU kit (bench/gpu/run.sh) that no other ft program
// makes. Host code built by nvcc against the real CUDA and NCCL headers, linked to the real
// sonames (libcudart.so.13, libnccl.so.2): gpusim's under the dry run, the device's on a GPU.
//
//   kit_bench info
//       runtime, driver and NCCL versions, the device's name and memory: one line.
//   kit_bench allreduce [--sizes B,B,...] [--iters N]
//       all-reduces on a one-rank communicator in a tight loop, per size: `sync_us`, one
//       all-reduce then cudaStreamSynchronize, per op (what a small op costs end to end), and
//       `queued_us`, N all-reduces enqueued then one synchronize, per op (the host's enqueue
//       rate). Run with and without LD_PRELOAD=libft.so; the difference is what ft adds.
//   kit_bench copy [--bytes N] [--runs R]
//       what a checkpoint's copies cost on this device: cudaHostAlloc of N bytes (pinning, per
//       GiB), cudaHostRegister of N malloc'd and touched bytes (per GiB), cudaMemcpyAsync
//       device-to-host into the pinned buffer and host-to-device back (GB/s, medians of R).
//
// Output: key=value lines. Exit 1 on a CUDA/NCCL failure (printed), 2 on bad arguments.
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double NowS() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

[[noreturn]] void Die(const char* what, const char* detail) {
  std::fprintf(stderr, "kit_bench: %s: %s\n", what, detail);
  std::fflush(stdout);
  std::exit(1);
}

#define CUDA_CHECK(call)                                       \
  do {                                                         \
    cudaError_t e_ = (call);                                   \
    if (e_ != cudaSuccess) Die(#call, cudaGetErrorString(e_)); \
  } while (0)
#define NCCL_CHECK(call)                                        \
  do {                                                          \
    ncclResult_t r_ = (call);                                   \
    if (r_ != ncclSuccess) Die(#call, ncclGetErrorString(r_));  \
  } while (0)

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// --flag value pairs.
std::string Arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return def;
}

int Info() {
  int runtime = 0, driver = 0, nccl = 0, devices = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  NCCL_CHECK(ncclGetVersion(&nccl));
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  cudaDeviceProp prop{};
  if (devices > 0) CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("info cuda_runtime=%d cuda_driver=%d nccl=%d devices=%d device=\"%s\" memory_gib=%.1f sm=%d.%d\n",
              runtime, driver, nccl, devices, devices > 0 ? prop.name : "none",
              devices > 0 ? prop.totalGlobalMem / double(1ull << 30) : 0.0, prop.major, prop.minor);
  return 0;
}

int AllReduce(int argc, char** argv) {
  std::vector<size_t> sizes;
  const std::string list = Arg(argc, argv, "--sizes", "8,64,512,4096,32768,262144,1048576");
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const size_t b = std::strtoull(list.substr(pos, end - pos).c_str(), nullptr, 10);
    if (b < 4 || b % 4 != 0) Die("--sizes", "each size a multiple of 4 bytes (float32)");
    sizes.push_back(b);
    pos = end + 1;
  }
  const int iters = std::atoi(Arg(argc, argv, "--iters", "2000").c_str());
  if (iters < 10) Die("--iters", "at least 10");
  CUDA_CHECK(cudaSetDevice(0));
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, 1, id, 0));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  float* buf = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), max_bytes));
  CUDA_CHECK(cudaMemset(buf, 0, max_bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (size_t bytes : sizes) {
    const size_t count = bytes / 4;
    for (int i = 0; i < 50; ++i) {  // warm-up: NCCL's first calls of a size set up its plan
      NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    // Synchronized: chunks of 100 ops, the median chunk (a preempted chunk does not count).
    std::vector<double> chunks;
    for (int done = 0; done < iters; done += 100) {
      const double t0 = NowS();
      for (int i = 0; i < 100; ++i) {
        NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }
      chunks.push_back((NowS() - t0) / 100 * 1e6);
    }
    const double sync_us = Median(chunks);
    // Queued: batches of 500 ops, one synchronize per batch.
    chunks.clear();
    for (int done = 0; done < iters; done += 500) {
      const double t0 = NowS();
      for (int i = 0; i < 500; ++i) {
        NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
      }
      CUDA_CHECK(cudaStreamSynchronize(stream));
      chunks.push_back((NowS() - t0) / 500 * 1e6);
    }
    std::printf("allreduce bytes=%zu sync_us=%.3f queued_us=%.3f\n", bytes, sync_us, Median(chunks));
    std::fflush(stdout);
  }
  CUDA_CHECK(cudaFree(buf));
  CUDA_CHECK(cudaStreamDestroy(stream));
  NCCL_CHECK(ncclCommDestroy(comm));
  return 0;
}

int Copy(int argc, char** argv) {
  const size_t bytes = std::strtoull(Arg(argc, argv, "--bytes", "1073741824").c_str(), nullptr, 10);
  const int runs = std::max(1, std::atoi(Arg(argc, argv, "--runs", "5").c_str()));
  if (bytes < 4096) Die("--bytes", "at least 4096");
  const double gib = bytes / double(1ull << 30);
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaFree(nullptr));  // the context exists before anything is timed
  void* dev = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, bytes));
  CUDA_CHECK(cudaMemset(dev, 0x5a, bytes));
  CUDA_CHECK(cudaDeviceSynchronize());

  double t0 = NowS();
  void* pinned = nullptr;
  CUDA_CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
  const double host_alloc_s = NowS() - t0;

  // cudaHostRegister of memory the process already touched: what pinning an arena costs.
  std::vector<char> plain(bytes, 1);
  t0 = NowS();
  CUDA_CHECK(cudaHostRegister(plain.data(), bytes, cudaHostRegisterDefault));
  const double register_s = NowS() - t0;

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<double> d2h, h2d, d2h_reg;
  for (int r = 0; r < runs + 1; ++r) {  // run 0 untimed: first-touch costs of the mappings
    t0 = NowS();
    CUDA_CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double a = NowS() - t0;
    t0 = NowS();
    CUDA_CHECK(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double b = NowS() - t0;
    t0 = NowS();
    CUDA_CHECK(cudaMemcpyAsync(plain.data(), dev, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const double c = NowS() - t0;
    if (r == 0) continue;
    d2h.push_back(a);
    h2d.push_back(b);
    d2h_reg.push_back(c);
  }
  if (static_cast<unsigned char>(static_cast<char*>(pinned)[bytes - 1]) != 0x5a) Die("copy", "wrong bytes");
  const double gb = bytes / 1e9;
  std::printf("copy bytes=%zu runs=%d d2h_gbps=%.2f h2d_gbps=%.2f d2h_registered_gbps=%.2f d2h_s=%.4f "
              "h2d_s=%.4f host_alloc_s_per_gib=%.4f host_register_s_per_gib=%.4f\n",
              bytes, runs, gb / Median(d2h), gb / Median(h2d), gb / Median(d2h_reg), Median(d2h), Median(h2d),
              host_alloc_s / gib, register_s / gib);
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaHostUnregister(plain.data()));
  CUDA_CHECK(cudaFreeHost(pinned));
  CUDA_CHECK(cudaFree(dev));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "info") return Info();
  if (mode == "allreduce") return AllReduce(argc, argv);
  if (mode == "copy") return Copy(argc, argv);
  std::fprintf(stderr, "usage: kit_bench info | allreduce [--sizes B,...] [--iters N] | copy [--bytes N] [--runs R]\n");
  return 2;
}
