// Memory: the allocation table behind cudaPointerGetAttributes and bad-free detection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util.h"

namespace gpusim_test {
namespace {

TEST(Memory, TableAnswersPointerAttributesAndRefusesBadFrees) {
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 256, 0u);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, d + 999), cudaSuccess);  // interior pointer
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  int on_stack = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&a, &on_stack), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaFree(d + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(d), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);  // double free
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);

  void* h;
  ASSERT_EQ(cudaMallocHost(&h, 64), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&a, h), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  void* mapped = nullptr;
  EXPECT_EQ(cudaHostGetDevicePointer(&mapped, h, 0), cudaSuccess);
  EXPECT_EQ(mapped, h);
  EXPECT_EQ(cudaFree(h), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);

  void* m;
  ASSERT_EQ(cudaMallocManaged(&m, 64, cudaMemAttachGlobal), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&a, m), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  EXPECT_EQ(cudaFree(m), cudaSuccess);
  cudaGetLastError();
}

// HBM has no host page table in front of it: device allocations of 2 MiB or more sit on 2 MiB
// pages where the host offers them (transparent huge pages, "madvise" or "always"), so copies
// from device memory do not pay per-4-KiB-page costs a GPU never has (bench-ckpt's save).
TEST(Memory, LargeDeviceAllocationsSitOnHugePages) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (modes.find("[never]") != std::string::npos || modes.empty()) GTEST_SKIP() << "no transparent huge pages here";
  constexpr size_t kBytes = 64u << 20;
  char* d;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), kBytes), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % (2u << 20), 0u);
  ASSERT_EQ(cudaMemset(d, 1, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // The mapping holding d, from /proc/self/smaps: its AnonHugePages.
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(d);
  bool in_mapping = false;
  uint64_t huge_kb = 0;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      in_mapping = lo <= at && at < hi;
      continue;
    }
    if (in_mapping && line.rfind("AnonHugePages:", 0) == 0) huge_kb = std::strtoull(line.c_str() + 14, nullptr, 10);
  }
  EXPECT_GE(huge_kb, 2048u) << "64 MiB of device memory, touched, on no 2 MiB page";
  char* small;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&small), 4096), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 256, 0u);
  EXPECT_EQ(cudaFree(small), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(Memory, HostRegistration) {
  std::vector<char> buf(4096);
  ASSERT_EQ(cudaHostRegister(buf.data(), buf.size(), cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(buf.data() + 100, 10, 0), cudaErrorHostMemoryAlreadyRegistered);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, buf.data() + 10), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaErrorHostMemoryNotRegistered);
  cudaGetLastError();
}

TEST(Memory, MemGetInfoCountsDeviceAllocations) {
  size_t free0, total;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_EQ(total, 80ull << 30);
  void* p;
  ASSERT_EQ(cudaMalloc(&p, 64 << 20), cudaSuccess);
  size_t free1;
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, size_t{64} << 20);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
  EXPECT_EQ(cudaMalloc(&p, 81ull << 30), cudaErrorMemoryAllocation);
  cudaGetLastError();
}

TEST(Memory, StreamOrderedAllocation) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* p;
  ASSERT_EQ(cudaMallocAsync(reinterpret_cast<void**>(&p), 16 * sizeof(int), s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 0, 16 * sizeof(int), s), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST(Memory, FreeDoesNotBlockBehindAHungStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* p;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(int)), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(p, 0, sizeof(int), s), cudaSuccess);  // uses p after the gate
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(cudaFree(p), cudaSuccess);  // released once the stream is past its use
  EXPECT_LT(MsSince(t0), 500.0);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
}

TEST(Memory, CopyValidation) {
  int a = 1, b = 2;
  EXPECT_EQ(cudaMemcpy(&a, &b, sizeof a, static_cast<cudaMemcpyKind>(9)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(nullptr, &b, sizeof a, cudaMemcpyDefault), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(&a, &b, sizeof a, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(a, 2);
  char grid[4][8] = {}, src[4][4];
  std::memset(src, 'x', sizeof src);
  EXPECT_EQ(cudaMemcpy2D(grid, 8, src, 4, 4, 4, cudaMemcpyHostToHost), cudaSuccess);
  EXPECT_EQ(grid[3][3], 'x');
  EXPECT_EQ(grid[3][4], 0);
  EXPECT_EQ(cudaMemcpy2D(grid, 2, src, 4, 4, 4, cudaMemcpyHostToHost), cudaErrorInvalidPitchValue);
  cudaGetLastError();
}

// The runtime refuses a copy whose device side is in none of its allocations: a buffer the
// program already freed, or pageable memory named as device memory. A simulator that copied
// anyway would let a save read memory the app gave back (or another allocation now owns).
TEST(Memory, ACopyFromOrToMemoryCudaDoesNotKnowIsRefused) {
  std::vector<char> host(4096, 'h');
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, host.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), static_cast<char*>(dev) + 100, 10, cudaMemcpyDeviceToHost),
            cudaSuccess);  // inside the allocation: fine
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  std::fill(host.begin(), host.end(), 'x');
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), dev, host.size(), cudaMemcpyDeviceToHost, s),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(host.data(), 64, dev, 64, 64, 4, cudaMemcpyDeviceToHost, s),
            cudaErrorInvalidValue);
  std::vector<char> pageable(64, 'p');
  EXPECT_EQ(cudaMemcpy(host.data(), pageable.data(), 64, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(pageable.data(), host.data(), 64, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(host[0], 'x');  // nothing was copied
  // Host-to-host and cudaMemcpyDefault name no device side; pinned and registered host
  // memory is CUDA's.
  EXPECT_EQ(cudaMemcpy(host.data(), pageable.data(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), pageable.data(), 64, cudaMemcpyHostToHost), cudaSuccess);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), pinned, 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaHostRegister(pageable.data(), 64, cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), pageable.data(), 64, cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(pageable.data()), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

}  // namespace
}  // namespace gpusim_test
