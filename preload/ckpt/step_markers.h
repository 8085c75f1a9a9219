// libft.so internal: which step the registered device memory holds, read from the device
// itself. ft_step_done may return while the step's work is still queued (include/ft/ft.h), so
// the host's step number says nothing about what the device has written yet: a copy taken at
// ft_step_done(N) while optimizer N still runs mixes N-1 and N, and in a hang past
// ft_step_done(N) it holds N-1. So every ft_update_begin(stream) and ft_step_done records a
// marker (one event, disabled timing) on the app's stream, and a save asks which marker the
// device reached last:
//   - the end of step N, and not the next update's beginning: the device memory holds exactly
//     step N (forward and backward passes queued after it do not write the registered state);
//   - the beginning of an update: the optimizer may be writing it — no copy is whole now.
// Markers are kept, in order, until the device reaches them (then their events are reused);
// a marker that could not be recorded (too many in flight, a record failed) leaves a gap, and
// a device somewhere in a gap is at an unknown step. Thread-safe: app threads record, the
// agent thread polls.
#ifndef FT_PRELOAD_CKPT_STEP_MARKERS_H_
#define FT_PRELOAD_CKPT_STEP_MARKERS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "common/mutex.h"
#include "preload/ckpt/agent_host.h"

namespace ft::preload::agent {

class StepMarkers {
 public:
  enum class Kind : uint8_t { kUpdateBegin, kStepEnd };

  // Where the device is.
  struct Position {
    enum class State : uint8_t {
      kNone,      // no marker recorded since the last Forget: the app never named its stream
      kUnknown,   // no marker reached yet, or the device is in a gap
      kInUpdate,  // an update began on the device and its step has not ended there
      kBoundary,  // the device memory holds step `step`
    };
    // Before the first marker of the process is reached, the device holds the step the host
    // had completed (or restored) when it recorded that marker, an update's beginning: until
    // then nothing said otherwise (`step` as Record got it).
    State state = State::kNone;
    int64_t step = 0;      // kBoundary
    uint64_t reached = 0;  // markers reached so far: equal before and after a copy, nothing moved
    size_t pending = 0;    // markers recorded and not reached yet
  };

  // Beyond this many markers in flight a record is skipped (a gap): a host that runs this far
  // ahead of its device is blocked by CUDA's launch queue long before.
  static constexpr size_t kMaxPending = 4096;

  StepMarkers() = default;
  StepMarkers(const StepMarkers&) = delete;
  StepMarkers& operator=(const StepMarkers&) = delete;

  // App thread, on `stream` of the current device `device`: an update begins after step
  // `step` (the host's last completed or restored one), or step `step` ended. A new stream or device starts the markers afresh. Never fails the app:
  // a record that fails leaves a gap, and `cuda` keeps the app's error state as it was.
  void Record(Kind kind, int64_t step, cudaStream_t stream, int device, host::AppCuda* cuda);
  // A marker that cannot be recorded now (the stream is being captured into a graph, which runs
  // at a time the markers cannot place): a gap.
  void Skip();
  // No stream to record on (the app stopped naming it): the device's position is not known
  // any more, and saves go by the host's word again (Position kNone).
  void Forget();
  // Any thread: the markers reached since the last call are retired, then where the device is.
  Position Poll();

 private:
  struct Marker {
    Kind kind;
    int64_t step;
    cudaEvent_t event;
    bool gap_before;  // markers were skipped right before this one
  };
  Position PositionLocked() const REQUIRES(mu_);
  void DropLocked() REQUIRES(mu_);  // every marker and event, pending or not
  bool query_failed_ GUARDED_BY(mu_) = false;  // the last poll met an error (a broken device)
  bool restarted_ GUARDED_BY(mu_) = false;      // markers were dropped once (a new stream, Forget)

  mutable Mutex mu_;
  std::deque<Marker> pending_ GUARDED_BY(mu_);  // recorded, not reached, oldest first
  std::vector<cudaEvent_t> free_ GUARDED_BY(mu_);  // reached: ready for the next record
  cudaStream_t stream_ GUARDED_BY(mu_) = nullptr;
  int device_ GUARDED_BY(mu_) = -1;
  bool recording_ GUARDED_BY(mu_) = false;  // a stream is named (Forget clears it)
  bool gap_ GUARDED_BY(mu_) = false;        // the next marker follows skipped ones
  bool have_last_ GUARDED_BY(mu_) = false;  // last_ holds the newest marker reached
  Marker last_ GUARDED_BY(mu_) = {};
  uint64_t reached_ GUARDED_BY(mu_) = 0;
};

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_STEP_MARKERS_H_
