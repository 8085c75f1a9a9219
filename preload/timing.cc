#include "preload/timing.h"

namespace ft::preload::internal {

namespace {

// Per device, kept for reuse. Large enough for every event that can be in flight (two per
// pending op): a burst of ops must not create and destroy events in steady state (creating one
// costs far more than recording it).
constexpr size_t kMaxPooledEvents = 2 * kMaxPending + 256;

// This app thread's free Pendings, taken from Runtime::free_pendings in one exchange, and its
// tag (poller.cc: ops of one thread on one stream complete in order). constinit: no TLS init
// wrapper (see t_group_depth).
constinit thread_local Pending* t_free_pendings = nullptr;
constinit thread_local uint32_t t_thread_tag = 0;
std::atomic<uint32_t> g_next_thread_tag{0};

cudaError_t Check(AppCuda* cuda, cudaError_t e) { return cuda != nullptr ? cuda->Check(e) : e; }

std::vector<cudaEvent_t>& PoolOf(int device, EventKind kind) {
  return kind == EventKind::kTiming ? g_rt->timing_pool[device] : g_rt->pool[device];
}

}  // namespace

cudaEvent_t AcquireEvent(int device, AppCuda* cuda, EventKind kind) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  {
    SpinGuard guard(g_rt->pool_lock);
    auto& pool = PoolOf(device, kind);
    if (!pool.empty()) {
      cudaEvent_t e = pool.back();
      pool.pop_back();
      return e;
    }
  }
  auto create = FT_REAL_CUDA(cudaEventCreateWithFlags);
  if (create == nullptr) return nullptr;
  cudaEvent_t e = nullptr;
  unsigned flags = kind == EventKind::kTiming ? cudaEventDefault : cudaEventDisableTiming;
  if (Check(cuda, create(&e, flags)) != cudaSuccess) return nullptr;
  g_rt->events_created.fetch_add(1, std::memory_order_relaxed);
  return e;
}

void ReleaseEvent(int device, cudaEvent_t e, AppCuda* cuda, EventKind kind) {
  if (e == nullptr) return;
  if (device >= 0 && device < kMaxDevices) {
    SpinGuard guard(g_rt->pool_lock);
    auto& pool = PoolOf(device, kind);
    if (pool.size() < kMaxPooledEvents) {
      pool.push_back(e);
      return;
    }
  }
  if (auto destroy = FT_REAL_CUDA(cudaEventDestroy)) Check(cuda, destroy(e));
}

bool EnsureEvent(Pending* p, bool end, AppCuda* cuda) {
  if (p->event_device != p->device) {
    // Events of another device cannot be recorded on this op's stream: back to their pool.
    ReleaseEvent(p->event_device, p->start, cuda);
    ReleaseEvent(p->event_device, p->end, cuda);
    p->start = p->end = nullptr;
    p->event_device = p->device;
  }
  cudaEvent_t& e = end ? p->end : p->start;
  if (e == nullptr) e = AcquireEvent(p->device, cuda);
  return e != nullptr;
}

Pending* NewPending() {
  Pending* p = t_free_pendings;
  if (p == nullptr) p = g_rt->free_pendings.exchange(nullptr, std::memory_order_acquire);
  if (p != nullptr) {
    Pending* next = p->next;
    t_free_pendings = next;
    if (next != nullptr) {
      // The poller wrote it last: start fetching the two lines the next op writes now, so
      // the transfer from the poller's core overlaps this op instead of stalling the next.
      __builtin_prefetch(next, 1);
      __builtin_prefetch(reinterpret_cast<const char*>(next) + 64, 1);
    }
    p->Reset();
    return p;
  }
  p = new Pending;
  Pending* head = g_rt->all_pendings.load(std::memory_order_relaxed);
  do {
    p->all_next = head;
  } while (!g_rt->all_pendings.compare_exchange_weak(head, p, std::memory_order_release,
                                                      std::memory_order_relaxed));
  return p;
}

void FreePending(Pending* p) {
  Pending* head = g_rt->free_pendings.load(std::memory_order_relaxed);
  do {
    p->next = head;
  } while (!g_rt->free_pendings.compare_exchange_weak(head, p, std::memory_order_release,
                                                       std::memory_order_relaxed));
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

Pending* BeginTiming(cudaStream_t stream, AppCuda& cuda) {
  // Both counters are read where they are written (the poller publishes `finished` once per
  // round), so this costs no cache-line transfer per op.
  if (g_rt->submitted.load(std::memory_order_relaxed) -
          g_rt->finished.load(std::memory_order_relaxed) >= kMaxPending) {
    return nullptr;
  }
  auto record = FT_REAL_CUDA(cudaEventRecord);
  if (record == nullptr) return nullptr;
  int device = CurrentDevice(cuda);
  if (device < 0 || device >= kMaxDevices) return nullptr;
  Pending* p = NewPending();
  p->device = device;
  p->stream = stream;
  if (!EnsureEvent(p, false, &cuda) || cuda.Check(record(p->start, stream)) != cudaSuccess) {
    // Nothing recorded: nothing can be pending on it; straight back to this thread's list.
    p->next = t_free_pendings;
    t_free_pendings = p;
    return nullptr;
  }
  p->has_start = true;
  return p;
}

void Submit(Pending* p, bool record_end, AppCuda& cuda) {
  if (record_end && !p->failed) {
    auto record = FT_REAL_CUDA(cudaEventRecord);
    p->has_end = record != nullptr && EnsureEvent(p, true, &cuda) &&
                 cuda.Check(record(p->end, p->stream)) == cudaSuccess;
    if (!p->has_end) p->FlagOps(kFlagUntimed);
  }
  if (t_thread_tag == 0) t_thread_tag = g_next_thread_tag.fetch_add(1, std::memory_order_relaxed) + 1;
  p->thread_tag = t_thread_tag;
  g_rt->submitted.fetch_add(1, std::memory_order_relaxed);
  Pending* head = g_rt->incoming.load(std::memory_order_relaxed);
  do {
    p->next = head;
  } while (!g_rt->incoming.compare_exchange_weak(head, p, std::memory_order_release,
                                                 std::memory_order_relaxed));
}

}  // namespace ft::preload::internal
