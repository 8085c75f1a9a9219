#include "preload/poller_rules.h"

#include <sched.h>

#include "preload/real.h"

namespace ft::preload::internal {

bool RelaxCaptureMode() {
  auto exchange = FT_REAL_CUDA(cudaThreadExchangeStreamCaptureMode);
  if (exchange == nullptr) return false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  return exchange(&mode) == cudaSuccess;
}

// A Dekker handshake: each side publishes its own flag, then reads the other's (seq_cst), so
// either the poller sees `ended` and stays out, or the ending thread sees `poller_inside` and
// waits for one ncclCommGetAsyncError (a read of the comm's state) to return.
bool PollAsyncError(CommInfo* info, ncclComm_t handle, ncclResult_t* state) {
  if (info == nullptr) return false;
  auto get_error = FT_REAL_NCCL(ncclCommGetAsyncError);
  if (get_error == nullptr) return false;
  info->poller_inside.store(true, std::memory_order_seq_cst);
  bool called = false;
  if (!info->ended.load(std::memory_order_seq_cst)) {
    called = get_error(handle, state) == ncclSuccess;
  }
  info->poller_inside.store(false, std::memory_order_release);
  return called;
}

void EndAndWaitForPoller(CommInfo* info) {
  info->ended.store(true, std::memory_order_seq_cst);
  while (info->poller_inside.load(std::memory_order_seq_cst)) sched_yield();
}

bool MayRecordInto(cudaStream_t stream) {
  auto is_capturing = FT_REAL_CUDA(cudaStreamIsCapturing);
  if (is_capturing == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return is_capturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone;
}

}  // namespace ft::preload::internal
