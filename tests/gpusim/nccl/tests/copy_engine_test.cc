// What a just-in-time checkpoint relies on (DESIGN.md, jitckpt): a GPU's copy engines serve a
// non-blocking stream while another stream of the process is stuck — in a collective whose peer
// never arrives, or in a kernel that never finishes — so the agent's device-to-host copy of the
// state completes during a hang. gpusim must behave the same, or a save test would pass on it
// and hang on a GPU (or the reverse).
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "harness.h"

namespace gpusim_test {
namespace {

class CopyEngines : public NcclTest {};

constexpr size_t kStateBytes = 8 << 20;

// Copies `dev` to pinned host memory on a fresh non-blocking stream; true when the copy
// completed within 5 s with the right bytes while `stuck` stayed stuck.
void CopyWhileStuck(const uint8_t* dev, cudaStream_t stuck) {
  CHILD_CHECK(cudaStreamQuery(stuck) == cudaErrorNotReady, "the stream is not stuck");
  cudaStream_t side;
  CHILD_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  uint8_t* host = nullptr;
  CHILD_CUDA(cudaMallocHost(reinterpret_cast<void**>(&host), kStateBytes));
  std::memset(host, 0, kStateBytes);
  cudaEvent_t landed;
  CHILD_CUDA(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming));
  double t0 = NowS();
  CHILD_CUDA(cudaMemcpyAsync(host, dev, kStateBytes, cudaMemcpyDeviceToHost, side));
  CHILD_CUDA(cudaEventRecord(landed, side));
  // Polled, not synchronized: a copy that waits for the stuck stream fails here, in 5 s.
  while (cudaEventQuery(landed) == cudaErrorNotReady && NowS() - t0 < 5.0) usleep(1000);
  CHILD_CHECK(cudaEventQuery(landed) == cudaSuccess, "the copy did not complete in %.1f s",
              NowS() - t0);
  for (size_t i = 0; i < kStateBytes; i += 4093) {
    CHILD_CHECK(host[i] == static_cast<uint8_t>(i * 31 + 7), "byte %zu differs", i);
  }
  CHILD_CHECK(cudaStreamQuery(stuck) == cudaErrorNotReady, "the stuck stream moved");
  CHILD_CUDA(cudaEventDestroy(landed));
  CHILD_CUDA(cudaFreeHost(host));
  CHILD_CUDA(cudaStreamDestroy(side));
}

uint8_t* DeviceState() {
  std::vector<uint8_t> pattern(kStateBytes);
  for (size_t i = 0; i < kStateBytes; ++i) pattern[i] = static_cast<uint8_t>(i * 31 + 7);
  uint8_t* dev = nullptr;
  CHILD_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev), kStateBytes));
  CHILD_CUDA(cudaMemcpy(dev, pattern.data(), kStateBytes, cudaMemcpyHostToDevice));
  return dev;
}

TEST_F(CopyEngines, DeviceToHostCopyCompletesWhileAStreamWaitsForAMissingPeer) {
  ncclUniqueId id = NewId();
  auto out = RunRanks(2, 60, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 2, id, me));
    if (me == 1) {
      // The missing peer: never joins the collective; rank 0 aborts when done.
      ncclResult_t st = ncclSuccess;
      double t0 = NowS();
      do {
        CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
        usleep(5000);
      } while ((st == ncclSuccess || st == ncclInProgress) && NowS() - t0 < 30);
      CHILD_NCCL(ncclCommDestroy(comm));
      return;
    }
    uint8_t* dev = DeviceState();
    cudaStream_t app;  // an ordinary (blocking) stream, as the training loop's
    CHILD_CUDA(cudaStreamCreate(&app));
    std::vector<float> send(1 << 16, 1.0f), recv(1 << 16, 0.0f);
    CHILD_NCCL(ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum, comm, app));
    usleep(100 * 1000);
    CopyWhileStuck(dev, app);
    CHILD_NCCL(ncclCommAbort(comm));
    CHILD_CUDA(cudaStreamSynchronize(app));
    CHILD_CUDA(cudaFree(dev));
  });
  ExpectAllOk(out);
}

TEST_F(CopyEngines, DeviceToHostCopyCompletesWhileAKernelNeverFinishes) {
  auto out = RunRanks(1, 60, [&](int) {
    uint8_t* dev = DeviceState();
    cudaStream_t app;
    CHILD_CUDA(cudaStreamCreate(&app));
    // Occupies the stream as a kernel spinning for ever does, until released.
    static std::atomic<bool> release{false};
    CHILD_CUDA(cudaLaunchHostFunc(
        app, [](void*) { while (!release.load()) usleep(1000); }, nullptr));
    usleep(50 * 1000);
    CopyWhileStuck(dev, app);
    release.store(true);
    CHILD_CUDA(cudaStreamSynchronize(app));
    CHILD_CUDA(cudaFree(dev));
  });
  ExpectAllOk(out);
}

}  // namespace
}  // namespace gpusim_test
