// libft.so internal: the process-wide Runtime (created once by Init, never freed), the
// per-comm and per-op records the hooks and the poller share, and the ring push.
#ifndef FT_PRELOAD_RUNTIME_STATE_H_
#define FT_PRELOAD_RUNTIME_STATE_H_

#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/launcher_identity.h"
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

inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64's finalizer; never returns 0 (0 marks a free comm slot).
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

}  // namespace internal

struct CommInfo {
  uint64_t id = 0;
  int rank = -1;
  int size = 0;
  uint32_t slot = internal::kNoSlot;
  uint32_t p2p_slot = internal::kNoSlot;
  bool slot_claimed = false;  // app thread(s) issuing on this comm
  bool p2p_claimed = false;
  std::atomic<bool> ended{false};
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint32_t> ordinals{0};  // splits and shrinks taken on this comm
  internal::SpinLock p2p_lock;
  uint64_t p2p_ops = 0;                                 // GUARDED_BY(p2p_lock)
  std::unordered_map<int64_t, uint64_t> p2p_counters;   // GUARDED_BY(p2p_lock): peer*2+dir
};

struct OpRef {
  uint64_t comm_id = 0;
  uint32_t slot = internal::kNoSlot;
  uint64_t seq = 0;       // in the table: collectives per comm; p2p ops per comm (p2p slot)
  OpKind op = OpKind::kNone;
  uint16_t flags = 0;
  uint64_t entered_ns = 0;
  uint64_t record_seq = 0;  // in records: as kOpEnter (p2p: per peer and direction)
  uint64_t record_a = 0;    // kOpEnter's a: op | dtype << 8 | peer << 32
};

struct Pending {
  Pending* next = nullptr;
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  bool failed = false;
  std::vector<ncclComm_t> await_comms;  // nonblocking: record `end` once these leave ncclInProgress
  std::vector<CommInfo*> await_infos;
  bool started = false;
  uint64_t started_ns = 0;
  std::vector<OpRef> ops;
};

namespace internal {

struct Runtime {
  Config config;
  LauncherIdentity identity;
  int owner_pid = 0;
  std::unique_ptr<shm::Segment> segment;
  std::unique_ptr<shm::RingWriter> ring;
  std::unique_ptr<shm::CommTableWriter> table;
  SpinLock ring_lock;
  SpinLock comms_lock;
  std::unordered_map<ncclComm_t, CommInfo*> comms;  // GUARDED_BY(comms_lock)
  // Every CommInfo ever made, live or ended: the poller may still refer to an ended one, so
  // they live as long as the runtime (a few hundred bytes per communicator).
  std::vector<std::unique_ptr<CommInfo>> comm_infos;  // GUARDED_BY(comms_lock)
  SpinLock alloc_lock;
  std::unordered_map<void*, uint64_t> allocations;  // GUARDED_BY(alloc_lock)
  std::atomic<uint64_t> allocated_bytes{0};
  SpinLock pool_lock;
  std::vector<cudaEvent_t> pool[kMaxDevices];  // GUARDED_BY(pool_lock)
  std::atomic<Pending*> incoming{nullptr};
  std::atomic<uint64_t> pending_count{0};
  std::atomic<uint64_t> events_created{0};
  std::atomic<uint64_t> ops_entered{0};
  std::atomic<uint64_t> graph_launches{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> poller_done{false};
  uint64_t poll_ns = 1000000;
};

// set once by Init, never freed (threads may outlive exit handlers)
extern Runtime* g_rt;

// NCCL group nesting on this app thread (ncclGroupStart/End); defined in nccl_hooks.cc, reset
// in a forked child. constinit: other files reach it directly, with no TLS init wrapper (whose
// weak reference would otherwise appear in libft.so's dynamic symbol table).
extern constinit thread_local int t_group_depth;

inline void Push(const shm::Record& record) {
  if (g_rt == nullptr || !g_rt->ring) return;
  SpinGuard guard(g_rt->ring_lock);
  g_rt->ring->Push(record);
}

inline shm::Record MakeRecord(RecordType type, uint16_t flags, uint32_t slot, uint64_t comm_id,
                              uint64_t seq, uint64_t time_ns) {
  shm::Record r{};
  r.type = static_cast<uint16_t>(type);
  r.flags = flags;
  r.comm_slot = slot;
  r.time_ns = time_ns;
  r.comm_id = comm_id;
  r.seq = seq;
  return r;
}

}  // namespace internal

}  // namespace ft::preload

#endif  // FT_PRELOAD_RUNTIME_STATE_H_
