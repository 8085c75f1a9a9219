// libft.so internal: events and pending ops. App threads begin and submit timed ops (their
// CUDA calls never change the app's cudaGetLastError()); the poller observes them and hands
// them back for reuse.
#ifndef FT_PRELOAD_TIMING_H_
#define FT_PRELOAD_TIMING_H_

#include <cuda_runtime_api.h>

#include "preload/real.h"
#include "preload/runtime_state.h"

namespace ft::preload::internal {

// CUDA calls libft.so makes on an app thread must not change what the app's
// cudaGetLastError() returns: an error of ours is cleared when the app had none pending.
class AppCuda {
 public:
  cudaError_t Check(cudaError_t e) { return ClearOurs(e, had_prior_); }
  AppCuda() : had_prior_(AppErrorPending()) {}

  // The rule, for the checkpoint agent's AppCuda too (preload/agent_host.cc): whether the app
  // has an error pending, and `e` (ours) cleared when it had none.
  static bool AppErrorPending() {
    auto peek = FT_REAL_CUDA(cudaPeekAtLastError);
    return peek != nullptr && peek() != cudaSuccess;
  }
  static cudaError_t ClearOurs(cudaError_t e, bool had_prior) {
    if (e != cudaSuccess && !had_prior) {
      if (auto get = FT_REAL_CUDA(cudaGetLastError)) get();
    }
    return e;
  }

 private:
  bool had_prior_ = false;
};

// Beyond this many timed units in flight, ops are entered but untimed: their completion is
// then known only through their lane (runtime_state.h, Lane), never claimed at submission.
inline constexpr uint64_t kMaxPending = 4096;

// Events come from a per-device pool, one for each kind: disabled timing (progress, the
// cheap kind) and timing-enabled (sampled kernel durations only: ~10x the cost, FACTS.md).
// `cuda` is the app thread's error guard (nullptr on the poller).
enum class EventKind { kProgress, kTiming };
cudaEvent_t AcquireEvent(int device, AppCuda* cuda, EventKind kind = EventKind::kProgress);
void ReleaseEvent(int device, cudaEvent_t e, AppCuda* cuda, EventKind kind = EventKind::kProgress);
// p->start (or p->end) as an event of p->device: the one p kept from its last use when it is
// of that device, else one from the pool. False when there is none.
bool EnsureEvent(Pending* p, bool end, AppCuda* cuda);

// A reset Pending from this thread's free list (refilled from the poller's in one exchange),
// or a new one: no allocation in steady state.
Pending* NewPending();
// Back to the free stack (any thread; the poller once an op is finished with). Its events stay
// with it.
void FreePending(Pending* p);

enum class Capture { kNo, kYes, kUnknown };

Capture StreamCapturing(cudaStream_t stream, AppCuda& cuda);
int CurrentDevice(AppCuda& cuda);

// Makes `device` current on this app thread for its lifetime and restores the app's device
// after: a group can span communicators (and streams) of several devices in one process, and
// an event must be created and recorded on its stream's device.
class DeviceScope {
 public:
  DeviceScope(int device, AppCuda& cuda) : cuda_(cuda) {
    if (device < 0) return;
    previous_ = CurrentDevice(cuda);
    auto set_device = FT_REAL_CUDA(cudaSetDevice);
    if (previous_ >= 0 && previous_ != device && set_device != nullptr &&
        cuda.Check(set_device(device)) == cudaSuccess) {
      switched_ = true;
    }
  }
  ~DeviceScope() {
    auto set_device = FT_REAL_CUDA(cudaSetDevice);
    if (switched_ && set_device != nullptr) cuda_.Check(set_device(previous_));
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  AppCuda& cuda_;
  int previous_ = -1;
  bool switched_ = false;
};

// This thread's lane for (current device, stream), made at first use; nullptr when the thread
// has too many lanes already (its untimed ops there stay unknown).
Lane* LaneOf(int device, cudaStream_t stream);

// A new pending op with its start event recorded on `stream`; nullptr when it cannot be timed
// (too many in flight, no runtime, no event). It covers the lane's untimed ops before it.
Pending* BeginTiming(cudaStream_t stream, AppCuda& cuda);
// A carrier for ops that get no events (never submitted): its device and lane, for
// NoteUntimed after the call. `vouch`: the lane may record its tail on `stream` (false when
// the stream may be capturing a graph).
Pending* BeginUntimed(cudaStream_t stream, bool vouch, AppCuda& cuda);
// After the untimed ops of `p` were issued successfully: their lane records its tail after
// them and publishes them (Lane); then `p` goes back to this thread's free list.
void NoteUntimed(Pending* p, AppCuda& cuda);
// Back to this thread's free list, unsubmitted.
void ReturnUnsubmitted(Pending* p);
// Records the end event (when `record_end`) and hands the op to the poller.
void Submit(Pending* p, bool record_end, AppCuda& cuda);

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_TIMING_H_
