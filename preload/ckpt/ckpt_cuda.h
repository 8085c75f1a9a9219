// libft.so internal: the CUDA side of the checkpoint agent thread — its device, relaxed
// capture mode, its own non-blocking stream and a window of disabled-timing events, all made
// lazily and kept for the life of the process. Agent thread only.
#ifndef FT_PRELOAD_CKPT_CUDA_H_
#define FT_PRELOAD_CKPT_CUDA_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "common/status.h"

namespace ft::preload::agent {

// A CUDA error as a Status (IoError: the device refused): "cudaMemcpyAsync: <the runtime's
// words> (CUDA error N)".
Status CudaStatus(cudaError_t error, const char* what);

// How many chunk copies the save keeps in flight (one event each).
inline constexpr size_t kEventWindow = 32;

class AgentCuda {
 public:
  // Makes `device` current on this thread (once), relaxes the thread's capture mode (a
  // global-mode capture on an app thread must not be invalidated by our calls), and creates
  // the stream (cudaStreamNonBlocking: it never waits for the legacy default stream, which a
  // hung app may hold) and the events. device < 0: only host buffers, nothing to do.
  Status Prepare(int device);
  cudaStream_t stream() const { return stream_; }
  cudaEvent_t event(size_t i) const { return events_[i % events_.size()]; }
  // Recorded after every copy of a periodic snapshot (ckpt_save.h, SaveJob::after): what the
  // app's next ft_update_begin makes the optimizer's stream wait for. Used by nothing else, so
  // a just-in-time save in between never re-records it.
  cudaEvent_t snapshot_event() const { return snapshot_event_; }

 private:
  int device_ = -1;
  bool relaxed_ = false;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  cudaEvent_t snapshot_event_ = nullptr;
};

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_CUDA_H_
