// libft.so internal: the process-wide Runtime (created once by Init, never freed), the
// per-comm and per-op records the hooks and the poller share, and the ring push.
#ifndef FT_PRELOAD_RUNTIME_STATE_H_
#define FT_PRELOAD_RUNTIME_STATE_H_

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/hash.h"
#include "common/launcher_identity.h"
#include "common/seqlock.h"
#include "preload/record_queue.h"
#include "preload/runtime.h"
#include "preload/spin_lock.h"
#include "shm/comm_table.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace ft::preload {

namespace internal {

constexpr uint32_t kNoSlot = UINT32_MAX;
constexpr int kMaxDevices = 64;

inline uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  return Fnv1a64Bytes(data, n, h);
}

// Communicator ids: shm/records.h's MixId (never 0: 0 marks a free comm slot).
inline uint64_t Mix(uint64_t x) {
  return MixId(x);
}

}  // namespace internal

// Per (peer, direction) Send/Recv counters of one communicator: open addressing over cells
// made once (at its first p2p op, sized from the communicator), filled with compare-and-swap,
// so threads issuing p2p ops take no lock and allocate nothing as peers appear. A table that
// is full numbers the rest from one shared counter (never seen below 4 cells per peer).
class P2PCounters {
 public:
  explicit P2PCounters(int comm_size) {
    uint64_t want = std::max<uint64_t>(64, 4 * static_cast<uint64_t>(comm_size > 0 ? comm_size : 256));
    capacity_ = 64;
    while (capacity_ < want && capacity_ < (uint64_t{1} << 18)) capacity_ <<= 1;
    cells_ = std::make_unique<Cell[]>(capacity_);
  }

  // The next sequence number of `key` (peer << 1 | direction), from 1.
  uint64_t Next(uint64_t key) {
    uint64_t at = MixId(key);
    for (uint64_t i = 0; i < capacity_; ++i) {
      Cell& cell = cells_[(at + i) & (capacity_ - 1)];
      uint64_t seen = cell.key.load(std::memory_order_acquire);
      if (seen == kEmpty && cell.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) {
        seen = key;
      }
      if (seen == key) return cell.count.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    return overflow_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  struct Cell {
    std::atomic<uint64_t> key{kEmpty};
    std::atomic<uint64_t> count{0};
  };
  uint64_t capacity_ = 0;
  std::unique_ptr<Cell[]> cells_;
  std::atomic<uint64_t> overflow_{0};
};

struct CommInfo {
  uint64_t id = 0;
  int rank = -1;
  int size = 0;
  uint32_t slot = internal::kNoSlot;
  bool slot_claimed = false;  // app thread(s) issuing on this comm
  std::atomic<bool> ended{false};          // destroy/abort began (poller_rules.h)
  std::atomic<bool> poller_inside{false};  // the poller is in an NCCL call on it
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint32_t> ordinals{0};  // splits and shrinks taken on this comm
  // Send/Recv (comm_registry.h P2PSlot, nccl_hooks.cc): no lock, made at the first p2p op.
  std::atomic<int> p2p_state{0};  // the p2p table slot: 0 unclaimed, 1 being claimed, 2 claimed
  std::atomic<uint32_t> p2p_slot{internal::kNoSlot};
  std::atomic<uint64_t> p2p_ops{0};
  std::atomic<P2PCounters*> p2p_counters{nullptr};  // never freed (as the CommInfo)
  CommInfo* all_next = nullptr;  // Runtime::all_comms
};

// One op of a Pending: what the poller needs to write its progress and records.
struct OpRef {
  uint64_t comm_id = 0;
  uint64_t seq = 0;         // in the table: collectives per comm; p2p ops per comm (p2p slot)
  uint64_t entered_ns = 0;
  uint64_t record_seq = 0;  // in records: as kOpEnter (p2p: per peer and direction)
  uint64_t record_a = 0;    // kOpEnter's a (shm::OpArgsWord)
  uint32_t slot = internal::kNoSlot;
  uint16_t flags = 0;
};
static_assert(sizeof(OpRef) <= 64);

namespace internal {
struct Lane;
}  // namespace internal

// An op whose completion is vouched for by a later event of its lane (see Lane): only its
// table slot and sequence number, the in-flight table being what it advances.
struct CoveredRef {
  uint32_t slot = internal::kNoSlot;
  uint64_t seq = 0;
};
inline constexpr uint32_t kLaneSlots = 4;  // table slots one lane can vouch for

// One timed unit (an op, a group's ops on one stream, a graph launch) from its submission
// until the poller saw it complete. Recycled, never freed (NewPending / FreePending in
// timing.h): the hot path does not allocate, and the events of a Pending stay with it from
// use to use. Laid out so that an ungrouped op touches two cache lines, which travel between
// the app thread and the poller once each way.
struct alignas(64) Pending {
  // Line 0.
  Pending* next = nullptr;      // the incoming stack, or a free list
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;  // owned events, on event_device (kept across uses)
  cudaEvent_t end = nullptr;
  uint64_t started_ns = 0;
  int32_t device = -1;          // of the op
  int32_t event_device = -1;    // of `start` and `end`
  uint32_t thread_tag = 0;      // the submitting app thread (Submit)
  uint16_t op_count = 0;
  bool has_start = false;       // `start` recorded for this op
  bool has_end = false;         // `end` recorded for this op
  bool failed = false;
  bool late_end = false;        // `end` recorded by the poller (nonblocking comm), not at submission
  bool started = false;
  bool kernel_sample = false;   // a sampled kernel launch (kernel_launch.h), not an NCCL op
  // Line 1.
  OpRef first_op;
  // Cold: groups, nonblocking comms, bookkeeping.
  std::vector<OpRef> all_ops;           // when op_count > 1: every op, the first included
  std::vector<ncclComm_t> await_comms;  // nonblocking: record `end` once these leave ncclInProgress
  std::vector<CommInfo*> await_infos;
  Pending* all_next = nullptr;          // every Pending ever made (Runtime::all_pendings)
  // kernel_sample: the kernel, its launch time and its timing-enabled events (taken from and
  // returned to Runtime::timing_pool at each sample, unlike start/end).
  const void* kernel = nullptr;
  uint64_t launched_ns = 0;
  cudaEvent_t timed_start = nullptr;
  cudaEvent_t timed_end = nullptr;
  // Timed ops (BeginTiming): the lane they were issued on and their number there, and the
  // untimed ops issued on the lane since its previous timed op, which `start` vouches for.
  internal::Lane* lane = nullptr;
  uint64_t lane_timed = 0;
  uint32_t covered_count = 0;
  CoveredRef covered[kLaneSlots];
  // The gap this timed op closes: its first untimed op, which started once the lane's timed op
  // #gap_after completed (0: no such gap). The lane's own copy (Lane::first_*) belongs to its
  // newest gap and is overwritten by the next one, possibly before the poller saw this one's
  // start: in a deep queue the GPU may be stuck inside an older gap.
  uint64_t gap_after = 0;
  OpRef gap_first;

  OpRef* ops_begin() { return op_count > 1 ? all_ops.data() : &first_op; }
  OpRef* ops_end() { return ops_begin() + op_count; }
  struct Ops {
    Pending* p;
    OpRef* begin() { return p->ops_begin(); }
    OpRef* end() { return p->ops_end(); }
  };
  Ops ops() { return Ops{this}; }
  void AddOp(const OpRef& ref) {
    if (op_count == 0) {
      first_op = ref;
    } else {
      if (op_count == 1) {
        all_ops.clear();
        all_ops.push_back(first_op);
      }
      all_ops.push_back(ref);
    }
    ++op_count;
  }
  void FlagOps(uint16_t flags) {
    for (OpRef& op : ops()) op.flags |= flags;
  }

  // Back to a fresh op; keeps vector capacity and the owned events. Reads, but does not write,
  // the cold lines when they are already clear.
  void Reset() {
    next = nullptr;
    stream = nullptr;
    started_ns = 0;
    device = -1;
    op_count = 0;
    has_start = has_end = failed = late_end = started = kernel_sample = false;
    lane = nullptr;
    lane_timed = 0;
    covered_count = 0;
    gap_after = 0;
    if (!await_comms.empty()) await_comms.clear();
    if (!await_infos.empty()) await_infos.clear();
  }
};

static_assert(offsetof(Pending, first_op) == 64, "Pending's line 0 overflowed");

namespace internal {

// Idle events of one device and kind, for reuse: a bounded multi-producer multi-consumer queue
// (D. Vyukov's) in which no thread ever waits for another. Taking from it while a release is
// half done, or releasing into it when full, fails: the caller then creates (or destroys) an
// event instead.
class EventPool {
 public:
  static constexpr uint64_t kCells = 16384;  // at least every event that can be in flight

  EventPool() {
    for (uint64_t i = 0; i < kCells; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool Put(cudaEvent_t event) {
    uint64_t pos = put_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos % kCells];
      int64_t dif = static_cast<int64_t>(cell.seq.load(std::memory_order_acquire) - pos);
      if (dif < 0) return false;  // full
      if (dif > 0) {
        pos = put_.load(std::memory_order_relaxed);
      } else if (put_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cell.event = event;
        cell.seq.store(pos + 1, std::memory_order_release);
        return true;
      }
    }
  }

  cudaEvent_t Take() {
    uint64_t pos = take_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos % kCells];
      int64_t dif = static_cast<int64_t>(cell.seq.load(std::memory_order_acquire) - (pos + 1));
      if (dif < 0) return nullptr;  // empty, or its release is half done
      if (dif > 0) {
        pos = take_.load(std::memory_order_relaxed);
      } else if (take_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cudaEvent_t event = cell.event;
        cell.seq.store(pos + kCells, std::memory_order_release);
        return event;
      }
    }
  }

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};
    cudaEvent_t event = nullptr;
  };
  alignas(64) std::atomic<uint64_t> put_{0};
  alignas(64) std::atomic<uint64_t> take_{0};
  alignas(64) Cell cells_[kCells];
};

// A cell of Runtime::comms: key is the handle (0 empty, 1 ended, 2 being filled), published
// after info.
struct CommCell {
  std::atomic<uintptr_t> key{0};
  std::atomic<CommInfo*> info{nullptr};
};
inline constexpr size_t kCommCells = 4096;

// Live allocations made through the wrapped calls (pointer -> bytes), so that a free knows
// what it returns: open addressing over cells made once, claimed with compare-and-swap; no
// lock, no allocation per call. A pointer that finds no free cell nearby is not tracked (its
// bytes never count in allocated_bytes).
class AllocationTable {
 public:
  bool Insert(void* ptr, uint64_t bytes) {
    uintptr_t key = reinterpret_cast<uintptr_t>(ptr);
    for (uint64_t i = 0, at = MixId(key); i < kProbes; ++i, ++at) {
      Cell& cell = cells_[at % kCells];
      uintptr_t seen = cell.key.load(std::memory_order_acquire);
      if ((seen == kEmpty || seen == kFreed) &&
          cell.key.compare_exchange_strong(seen, kClaiming, std::memory_order_acq_rel)) {
        cell.bytes.store(bytes, std::memory_order_relaxed);
        cell.key.store(key, std::memory_order_release);
        return true;
      }
    }
    return false;
  }
  // The bytes of a tracked pointer, forgotten; false when it was not tracked.
  bool Remove(void* ptr, uint64_t* bytes) {
    uintptr_t key = reinterpret_cast<uintptr_t>(ptr);
    for (uint64_t i = 0, at = MixId(key); i < kProbes; ++i, ++at) {
      Cell& cell = cells_[at % kCells];
      uintptr_t seen = cell.key.load(std::memory_order_acquire);
      if (seen == key) {
        *bytes = cell.bytes.load(std::memory_order_relaxed);
        cell.key.store(kFreed, std::memory_order_release);
        return true;
      }
      if (seen == kEmpty) return false;
    }
    return false;
  }

 private:
  static constexpr uint64_t kCells = 1 << 16;  // 1 MiB
  static constexpr uint64_t kProbes = 512;
  static constexpr uintptr_t kEmpty = 0, kFreed = 1, kClaiming = 2;  // never device pointers
  struct Cell {
    std::atomic<uintptr_t> key{kEmpty};
    std::atomic<uint64_t> bytes{0};
  };
  Cell cells_[kCells];
};

// One app thread's ops on one (device, stream): the unit in which completion is known in
// order. Why thread as well as stream: an event vouches for the work enqueued on its stream
// before it was recorded; "before" is certain only in one thread's program order (an op's call
// returned before the same thread recorded a later event). Two threads feeding one stream are
// ordered by when their calls reached the runtime, which nothing here observes (a thread may
// be preempted between its record and its submission). And cudaStreamPerThread and the
// legacy stream 0 name a different stream on every thread and device.
//
// An op issued when no events can be had (too many in flight) is untimed: never reported
// complete on its own. The lane vouches for it instead: (a) the thread's next timed op on the
// lane carries it as covered (its start event follows it in the stream); (b) the lane's tail
// event, re-recorded after every untimed op, covers every untimed op so far once it completes
// (for a burst that ends without a later timed op); (c) the first untimed op after the lane's
// timed op #n has started when #n completed. Made by its thread (LaneOf), never freed.
struct alignas(64) Lane {
  // Set before the lane is published on Runtime::lanes; never changed.
  cudaStream_t stream = nullptr;
  int32_t device = -1;
  Lane* all_next = nullptr;
  // The owning thread only.
  uint64_t timed = 0;  // timed ops begun on this lane (Pending::lane_timed of the newest)
  bool gap_open = false;  // untimed ops since the newest timed op
  uint32_t gap_count = 0;
  CoveredRef gap[kLaneSlots];  // per table slot, the newest untimed op since the timed op
  // Published by the owning thread behind `published` (common/seqlock.h: stored with
  // Seqlock::Store between its BeginWrite and EndWrite, or by the atomics' seq_cst assignment,
  // which is a release store too), read by the poller. Every untimed op vouched for moves
  // its version.
  alignas(64) Seqlock published;
  std::atomic<cudaEvent_t> tail{nullptr};  // recorded after the newest untimed op
  std::atomic<uint32_t> tail_count{0};
  std::atomic<uint32_t> tail_slot[kLaneSlots] = {};
  std::atomic<uint64_t> tail_seq[kLaneSlots] = {};  // the newest untimed op per slot, ever
  std::atomic<uint64_t> gap_after{0};  // the timed op the newest gap follows; 0 none
  std::atomic<uint32_t> first_slot{kNoSlot};  // the first op of that gap (its kOpStart)
  std::atomic<uint32_t> first_flags{0};
  std::atomic<uint64_t> first_comm_id{0};
  std::atomic<uint64_t> first_seq{0};
  std::atomic<uint64_t> first_record_seq{0};
  std::atomic<uint64_t> first_record_a{0};
  std::atomic<uint64_t> first_entered_ns{0};
  // The poller only.
  alignas(64) uint64_t done_timed = 0;  // newest timed op of the lane seen complete
  uint64_t started_after = 0;           // gap_after whose first op was reported started
  uint32_t confirmed_version = 0;       // version whose tail was seen complete
};

// Kernel launches on one stream, counted by app threads (one relaxed add per launch) and
// reported by the poller. A slot is claimed by its first launch (key = stream handle + 1, so
// the legacy stream 0 has a key too) and never freed: a process has few long-lived streams;
// the last slot takes every stream beyond the others. One cache line each: streams are
// usually fed by different threads.
inline constexpr size_t kStreamSlots = 64;
struct alignas(64) StreamLaunchCount {
  std::atomic<uintptr_t> key{0};
  std::atomic<uint64_t> launches{0};
  uint64_t reported = 0;  // poller only: the total in the last kKernelCount
};

struct Runtime {
  Config config;
  LauncherIdentity identity;
  int owner_pid = 0;
  std::unique_ptr<shm::Segment> segment;
  std::unique_ptr<shm::RingWriter> ring;
  std::unique_ptr<shm::CommTableWriter> table;
  // Claims of in-flight table slots (app threads only, a few instructions, no allocation).
  alignas(64) SpinLock comms_lock;
  // Live communicators, handle -> CommInfo (comm_registry.cc): open addressing, no lock.
  CommCell comms[kCommCells];
  // Every CommInfo ever made, live or ended: the poller may still refer to an ended one, so
  // they live as long as the runtime (a few hundred bytes per communicator).
  std::atomic<CommInfo*> all_comms{nullptr};
  std::atomic<AllocationTable*> allocations{nullptr};  // TrackAllocation: made at first use
  std::atomic<uint64_t> allocated_bytes{0};
  // Per device, made at its first use (timing.cc): disabled timing (progress) and
  // timing-enabled events, shared by app threads and the poller without a lock.
  std::atomic<EventPool*> pool[kMaxDevices] = {};
  std::atomic<EventPool*> timing_pool[kMaxDevices] = {};
  std::atomic<uint64_t> events_created{0};
  std::atomic<uint64_t> graph_launches{0};
  std::atomic<Pending*> all_pendings{nullptr};  // never freed: reachable for leak checkers
  std::atomic<Lane*> lanes{nullptr};            // every Lane ever made (never freed)
  uint64_t poll_ns = 1000000;
  uint64_t kernel_sample = 0;  // FT_KERNEL_SAMPLE: time every Nth launch of a thread; 0 none
  StreamLaunchCount stream_launches[kStreamSlots];  // kernel_launch.h
  // The hot atomics, one cache line per writer: a line written by both the app threads and
  // the poller at every op would travel between their cores at every op.
  // Written by app threads at every op (the poller takes `incoming` once per round).
  alignas(64) std::atomic<Pending*> incoming{nullptr};
  std::atomic<uint64_t> submitted{0};   // Pendings ever submitted
  std::atomic<uint64_t> ops_entered{0};
  // Written by the poller (app threads take `free_pendings` whole, rarely; read `finished`,
  // which the poller publishes once per round).
  alignas(64) std::atomic<Pending*> free_pendings{nullptr};
  std::atomic<uint64_t> finished{0};    // Pendings finished with; in flight = submitted - finished
  // Rarely written.
  alignas(64) std::atomic<uint64_t> comms_epoch{0};  // moves at every comm registration and end
  std::atomic<bool> stop{false};
  std::atomic<bool> poller_done{false};
};

// set once by Init, never freed (threads may outlive exit handlers)
extern Runtime* g_rt;

// App threads (cudaMalloc/cudaFree hooks): AllocationTable, made at its first use.
bool TrackAllocation(void* ptr, uint64_t bytes);
bool UntrackAllocation(void* ptr, uint64_t* bytes);

// NCCL group nesting on this app thread (ncclGroupStart/End); defined in nccl_hooks.cc, reset
// in a forked child. constinit: other files reach it directly, with no TLS init wrapper (whose
// weak reference would otherwise appear in libft.so's dynamic symbol table).
extern constinit thread_local int t_group_depth;

// App threads: into the thread's own queue (record_queue.h), which the poller moves into the
// ring; never a lock, never a wait.
inline void Push(const shm::Record& record) {
  if (g_rt == nullptr || !g_rt->ring) return;
  EnqueueRecord(record);
}

// The poller, the ring's only producer: the app threads' queued records first (an op's
// kOpEnter was queued before the op was submitted, so it precedes its kOpStart/kOpEnd), then
// the round's own.
inline void PushAll(const shm::Record* records, size_t n) {
  if (g_rt == nullptr || !g_rt->ring) return;
  DrainRecordQueues(*g_rt->ring);
  for (size_t i = 0; i < n; ++i) g_rt->ring->Push(records[i]);
}

inline shm::Record MakeRecord(RecordType type, uint16_t flags, uint32_t slot, uint64_t comm_id,
                              uint64_t seq, uint64_t time_ns) {
  return shm::Record{.type = static_cast<uint16_t>(type), .flags = flags, .comm_slot = slot, .time_ns = time_ns,
                     .comm_id = comm_id, .seq = seq, .a = 0, .b = 0, .c = 0, .d = 0};
}

}  // namespace internal

}  // namespace ft::preload

#endif  // FT_PRELOAD_RUNTIME_STATE_H_
