#include "preload/timing.h"

namespace ft::preload::internal {

namespace {

constexpr size_t kMaxPooledEvents = 256;     // per device, kept for reuse
constexpr uint64_t kMaxPending = 4096;       // beyond this, ops are entered but not timed

}  // namespace

cudaEvent_t AcquireEvent(int device, AppCuda& cuda) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  {
    SpinGuard guard(g_rt->pool_lock);
    auto& pool = g_rt->pool[device];
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
  }
  auto create = FT_REAL_CUDA(cudaEventCreateWithFlags);
  if (create == nullptr) return nullptr;
  cudaEvent_t e = nullptr;
  if (cuda.Check(create(&e, cudaEventDisableTiming)) != cudaSuccess) return nullptr;
  g_rt->events_created.fetch_add(1, std::memory_order_relaxed);
  return e;
}

// Poller thread only.
void ReleaseEvent(int device, cudaEvent_t e) {
  if (e == nullptr) return;
  if (device >= 0 && device < kMaxDevices) {
    SpinGuard guard(g_rt->pool_lock);
    auto& pool = g_rt->pool[device];
    if (pool.size() < kMaxPooledEvents) {
      pool.push_back(e);
      return;
    }
  }
  if (auto destroy = FT_REAL_CUDA(cudaEventDestroy)) destroy(e);
}

// kUnknown (no runtime, or the query failed — e.g. the legacy stream while another stream
// captures): the op is numbered like any other but gets no events.
Capture StreamCapturing(cudaStream_t stream, AppCuda& cuda) {
  auto is_capturing = FT_REAL_CUDA(cudaStreamIsCapturing);
  if (is_capturing == nullptr) return Capture::kUnknown;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cuda.Check(is_capturing(stream, &status)) != cudaSuccess) return Capture::kUnknown;
  return status == cudaStreamCaptureStatusNone ? Capture::kNo : Capture::kYes;
}

int CurrentDevice(AppCuda& cuda) {
  int device = -1;
  auto get_device = FT_REAL_CUDA(cudaGetDevice);
  if (get_device == nullptr || cuda.Check(get_device(&device)) != cudaSuccess) return -1;
  return device;
}

// A new pending op with its start event recorded on `stream`; nullptr when it cannot be timed.
Pending* BeginTiming(cudaStream_t stream, AppCuda& cuda) {
  if (g_rt->pending_count.load(std::memory_order_relaxed) >= kMaxPending) return nullptr;
  auto get_device = FT_REAL_CUDA(cudaGetDevice);
  auto record = FT_REAL_CUDA(cudaEventRecord);
  if (get_device == nullptr || record == nullptr) return nullptr;
  int device = -1;
  if (cuda.Check(get_device(&device)) != cudaSuccess) return nullptr;
  cudaEvent_t start = AcquireEvent(device, cuda);
  if (start == nullptr) return nullptr;
  if (cuda.Check(record(start, stream)) != cudaSuccess) {
    // Never recorded: nothing can be pending on it, so it goes straight back.
    SpinGuard guard(g_rt->pool_lock);
    g_rt->pool[device].push_back(start);
    return nullptr;
  }
  auto* p = new Pending;
  p->device = device;
  p->stream = stream;
  p->start = start;
  return p;
}

// Records the end event (when `record_end`) and hands the op to the poller.
void Submit(Pending* p, bool record_end, AppCuda& cuda) {
  if (record_end && !p->failed) {
    p->end = AcquireEvent(p->device, cuda);
    auto record = FT_REAL_CUDA(cudaEventRecord);
    if (p->end != nullptr && (record == nullptr || cuda.Check(record(p->end, p->stream)) != cudaSuccess)) {
      SpinGuard guard(g_rt->pool_lock);
      g_rt->pool[p->device].push_back(p->end);
      p->end = nullptr;
    }
    if (p->end == nullptr) {
      for (auto& op : p->ops) op.flags |= kFlagUntimed;
    }
  }
  g_rt->pending_count.fetch_add(1, std::memory_order_relaxed);
  Pending* head = g_rt->incoming.load(std::memory_order_relaxed);
  do {
    p->next = head;
  } while (!g_rt->incoming.compare_exchange_weak(head, p, std::memory_order_release,
                                                 std::memory_order_relaxed));
}
}  // namespace ft::preload::internal
