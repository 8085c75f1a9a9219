#include "preload/timing.h"

#include <new>

namespace ft::preload::internal {

namespace {

// Per device, kept for reuse. Large enough for every event that can be in flight (two per
// pending op): a burst of ops must not create and destroy events in steady state (creating one
// costs far more than recording it).
static_assert(EventPool::kCells >= 2 * kMaxPending + 256);

// This app thread's free Pendings, taken from Runtime::free_pendings in one exchange, and its
// tag (poller.cc: ops of one thread on one stream complete in order). constinit: no TLS init
// wrapper (see t_group_depth).
constinit thread_local Pending* t_free_pendings = nullptr;
constinit thread_local uint32_t t_thread_tag = 0;
std::atomic<uint32_t> g_next_thread_tag{0};
// This thread's lanes (Lane); a thread feeding more (device, stream) pairs than this leaves
// its untimed ops on the others unknown.
constexpr uint32_t kLanesPerThread = 16;
constinit thread_local Lane* t_lanes[kLanesPerThread] = {};
constinit thread_local uint32_t t_lane_count = 0;
constinit thread_local Lane* t_last_lane = nullptr;

cudaError_t Check(AppCuda* cuda, cudaError_t e) { return cuda != nullptr ? cuda->Check(e) : e; }

// The device's pool, made at its first use (outside any lock; a thread that loses the race
// to publish its pool frees it). nullptr when none can be made.
EventPool* PoolOf(int device, EventKind kind) {
  std::atomic<EventPool*>& slot =
      kind == EventKind::kTiming ? g_rt->timing_pool[device] : g_rt->pool[device];
  EventPool* pool = slot.load(std::memory_order_acquire);
  if (pool != nullptr) return pool;
  auto* made = new (std::nothrow) EventPool;
  if (made == nullptr) return nullptr;
  if (slot.compare_exchange_strong(pool, made, std::memory_order_acq_rel)) return made;
  delete made;
  return pool;
}

}  // namespace

cudaEvent_t AcquireEvent(int device, AppCuda* cuda, EventKind kind) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  if (EventPool* pool = PoolOf(device, kind)) {
    if (cudaEvent_t e = pool->Take()) return e;
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
    EventPool* pool = PoolOf(device, kind);
    if (pool != nullptr && pool->Put(e)) return;
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

void ReturnUnsubmitted(Pending* p) {
  p->next = t_free_pendings;
  t_free_pendings = p;
}

Lane* LaneOf(int device, cudaStream_t stream) {
  if (t_last_lane != nullptr && t_last_lane->stream == stream && t_last_lane->device == device) {
    return t_last_lane;
  }
  for (uint32_t i = 0; i < t_lane_count; ++i) {
    Lane* lane = t_lanes[i];
    if (lane->stream == stream && lane->device == device) return t_last_lane = lane;
  }
  if (t_lane_count == kLanesPerThread) return nullptr;
  auto* lane = new Lane;
  lane->stream = stream;
  lane->device = device;
  Lane* head = g_rt->lanes.load(std::memory_order_relaxed);
  do {
    lane->all_next = head;
  } while (!g_rt->lanes.compare_exchange_weak(head, lane, std::memory_order_release,
                                              std::memory_order_relaxed));
  t_lanes[t_lane_count++] = lane;
  return t_last_lane = lane;
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
    ReturnUnsubmitted(p);
    return nullptr;
  }
  p->has_start = true;
  if (Lane* lane = LaneOf(device, stream)) {
    p->lane = lane;
    p->lane_timed = ++lane->timed;
    if (lane->gap_open) {
      // The untimed ops since the lane's previous timed op precede this start event.
      for (uint32_t i = 0; i < lane->gap_count; ++i) p->covered[i] = lane->gap[i];
      p->covered_count = lane->gap_count;
      // And the gap's first op, whose start the poller reports when the timed op before the
      // gap completes (this thread wrote these fields: relaxed loads see its own stores).
      p->gap_after = lane->gap_after.load(std::memory_order_relaxed);
      if (p->gap_after != 0) {
        p->gap_first.slot = lane->first_slot.load(std::memory_order_relaxed);
        p->gap_first.flags = static_cast<uint16_t>(lane->first_flags.load(std::memory_order_relaxed));
        p->gap_first.comm_id = lane->first_comm_id.load(std::memory_order_relaxed);
        p->gap_first.seq = lane->first_seq.load(std::memory_order_relaxed);
        p->gap_first.record_seq = lane->first_record_seq.load(std::memory_order_relaxed);
        p->gap_first.record_a = lane->first_record_a.load(std::memory_order_relaxed);
        p->gap_first.entered_ns = lane->first_entered_ns.load(std::memory_order_relaxed);
      }
      lane->gap_open = false;
      lane->gap_count = 0;
    }
  }
  return p;
}

Pending* BeginUntimed(cudaStream_t stream, bool vouch, AppCuda& cuda) {
  Pending* p = NewPending();
  p->stream = stream;
  if (vouch) {
    p->device = CurrentDevice(cuda);
    if (p->device >= 0) p->lane = LaneOf(p->device, stream);
  }
  return p;
}

namespace {

// Adds (slot, seq) to a per-slot table of the newest seq; false when it has no room.
template <typename SlotAt, typename SeqAt>
bool Newest(uint32_t* count, uint32_t slot, uint64_t seq, SlotAt slot_at, SeqAt seq_at) {
  for (uint32_t i = 0; i < *count; ++i) {
    if (slot_at(i) == slot) {
      if (seq > seq_at(i)) seq_at(i) = seq;
      return true;
    }
  }
  if (*count == kLaneSlots) return false;
  slot_at(*count) = slot;
  seq_at(*count) = seq;
  ++*count;
  return true;
}

}  // namespace

void NoteUntimed(Pending* p, AppCuda& cuda) {
  Lane* lane = p->lane;
  auto record = FT_REAL_CUDA(cudaEventRecord);
  if (lane == nullptr || record == nullptr || p->op_count == 0) {
    ReturnUnsubmitted(p);
    return;
  }
  cudaEvent_t tail = lane->tail.load(std::memory_order_relaxed);
  if (tail == nullptr) {
    // Its own event, not the pool's: it is re-recorded for as long as the lane lives.
    auto create = FT_REAL_CUDA(cudaEventCreateWithFlags);
    if (create == nullptr || cuda.Check(create(&tail, cudaEventDisableTiming)) != cudaSuccess) {
      ReturnUnsubmitted(p);
      return;
    }
    g_rt->events_created.fetch_add(1, std::memory_order_relaxed);
  }
  // Recorded before it is published: a poller that sees the new version queries this record
  // or a later one, and a later one completes only after this one (stream order).
  if (cuda.Check(record(tail, p->stream)) != cudaSuccess) {
    if (lane->tail.load(std::memory_order_relaxed) == nullptr) {
      if (auto destroy = FT_REAL_CUDA(cudaEventDestroy)) cuda.Check(destroy(tail));
    }
    ReturnUnsubmitted(p);  // unknown: nothing will vouch for these ops
    return;
  }
  lane->published.BeginWrite();
  Seqlock::Store(lane->tail, tail);
  uint32_t tail_count = lane->tail_count.load(std::memory_order_relaxed);
  for (const OpRef& op : p->ops()) {
    if (op.slot == kNoSlot) continue;
    bool fits = Newest(
        &tail_count, op.slot, op.seq,
        [&](uint32_t i) -> auto& { return lane->tail_slot[i]; },
        [&](uint32_t i) -> auto& { return lane->tail_seq[i]; });
    if (!fits) continue;  // a fifth slot on one lane: unknown
    if (!lane->gap_open) {
      lane->gap_open = true;
      if (lane->timed > 0) {
        Seqlock::Store(lane->first_slot, op.slot);
        Seqlock::Store(lane->first_flags, op.flags);
        Seqlock::Store(lane->first_comm_id, op.comm_id);
        Seqlock::Store(lane->first_seq, op.seq);
        Seqlock::Store(lane->first_record_seq, op.record_seq);
        Seqlock::Store(lane->first_record_a, op.record_a);
        Seqlock::Store(lane->first_entered_ns, op.entered_ns);
        Seqlock::Store(lane->gap_after, lane->timed);
      }
    }
    Newest(
        &lane->gap_count, op.slot, op.seq, [&](uint32_t i) -> auto& { return lane->gap[i].slot; },
        [&](uint32_t i) -> auto& { return lane->gap[i].seq; });
  }
  Seqlock::Store(lane->tail_count, tail_count);
  lane->published.EndWrite();
  ReturnUnsubmitted(p);
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
