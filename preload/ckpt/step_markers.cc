#include "preload/ckpt/step_markers.h"

namespace ft::preload::agent {

namespace {

// The app thread retires reached markers itself only past this many (it would otherwise
// query an event at every step): the agent thread's polls keep the queue short meanwhile.
constexpr size_t kRetireOnRecord = 256;

// cudaEventQuery in relaxed capture mode: from a thread in global mode it would invalidate a
// graph another thread is capturing (preload/poller_rules.h). The app thread's mode is put
// back at once.
cudaError_t QueryRelaxed(cudaEvent_t e) {
  auto query = FT_HOST_CUDA(cudaEventQuery);
  auto exchange = FT_HOST_CUDA(cudaThreadExchangeStreamCaptureMode);
  if (query == nullptr || exchange == nullptr) return cudaErrorNotReady;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (exchange(&mode) != cudaSuccess) return cudaErrorNotReady;
  cudaError_t q = query(e);
  (void)exchange(&mode);
  return q;
}

}  // namespace

void StepMarkers::DropLocked() {
  if (recording_) restarted_ = true;
  auto destroy = FT_HOST_CUDA(cudaEventDestroy);
  // A pending event may still be recorded on the stream: CUDA releases it once reached.
  for (const Marker& m : pending_) {
    if (destroy != nullptr) (void)destroy(m.event);
  }
  for (cudaEvent_t e : free_) {
    if (destroy != nullptr) (void)destroy(e);
  }
  pending_.clear();
  free_.clear();
  have_last_ = false;
  gap_ = false;
  query_failed_ = false;
}

void StepMarkers::Forget() {
  MutexLock lock(&mu_);
  if (!recording_) return;
  DropLocked();
  recording_ = false;
  stream_ = nullptr;
  device_ = -1;
}

void StepMarkers::Skip() {
  MutexLock lock(&mu_);
  if (recording_) gap_ = true;
}

void StepMarkers::Record(Kind kind, int64_t step, cudaStream_t stream, int device, host::AppCuda* cuda) {
  MutexLock lock(&mu_);
  if (!recording_ || stream != stream_ || device != device_) {
    // Markers on two streams say nothing about each other's order: start again.
    DropLocked();
    recording_ = true;
    stream_ = stream;
    device_ = device;
  }
  if (pending_.size() >= kRetireOnRecord) {
    while (!pending_.empty() && QueryRelaxed(pending_.front().event) == cudaSuccess) {
      last_ = pending_.front();
      have_last_ = true;
      ++reached_;
      free_.push_back(last_.event);
      pending_.pop_front();
    }
  }
  if (pending_.size() >= kMaxPending) {
    gap_ = true;
    return;
  }
  cudaEvent_t e = nullptr;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {
    auto create = FT_HOST_CUDA(cudaEventCreateWithFlags);
    if (create == nullptr || cuda->Check(create(&e, cudaEventDisableTiming)) != cudaSuccess) {
      gap_ = true;
      return;
    }
  }
  auto record = FT_HOST_CUDA(cudaEventRecord);
  if (record == nullptr || cuda->Check(record(e, stream)) != cudaSuccess) {
    free_.push_back(e);
    gap_ = true;
    return;
  }
  pending_.push_back({kind, step, e, gap_});
  gap_ = false;
}

StepMarkers::Position StepMarkers::Poll() {
  MutexLock lock(&mu_);
  query_failed_ = false;
  while (!pending_.empty()) {
    cudaError_t q = QueryRelaxed(pending_.front().event);
    if (q == cudaErrorNotReady) break;
    if (q != cudaSuccess) {
      query_failed_ = true;  // a broken device or context: where it stopped is not known
      break;
    }
    last_ = pending_.front();
    have_last_ = true;
    ++reached_;
    free_.push_back(last_.event);
    pending_.pop_front();
  }
  return PositionLocked();
}

StepMarkers::Position StepMarkers::PositionLocked() const {
  Position p;
  p.reached = reached_;
  p.pending = pending_.size();
  if (!recording_) return p;  // kNone
  p.state = Position::State::kUnknown;
  if (query_failed_) return p;
  // Skipped markers right after the last one reached: the device may be anywhere in them.
  const bool in_gap = pending_.empty() ? gap_ : pending_.front().gap_before;
  if (!have_last_) {
    // Before the first marker ever recorded (none skipped, no stream changed since).
    if (!restarted_ && !in_gap && !pending_.empty() && pending_.front().kind == Kind::kUpdateBegin) {
      p.state = Position::State::kBoundary;
      p.step = pending_.front().step;
    }
    return p;
  }
  if (in_gap) return p;
  if (last_.kind == Kind::kUpdateBegin) {
    p.state = Position::State::kInUpdate;
    return p;
  }
  p.state = Position::State::kBoundary;
  p.step = last_.step;
  return p;
}

}  // namespace ft::preload::agent
