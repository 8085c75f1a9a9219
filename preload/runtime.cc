#include "preload/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/environment.h"
#include "common/launcher_identity.h"
#include "common/log.h"
#include "shm/comm_table.h"
#include "shm/mailbox.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace ft::preload {

std::atomic<int> g_state{kUninit};
thread_local bool t_in_ft = false;

namespace {

constexpr uint32_t kNoSlot = UINT32_MAX;
constexpr int kMaxDevices = 64;
constexpr size_t kMaxPooledEvents = 256;     // per device, kept for reuse
constexpr uint64_t kMaxPending = 4096;       // beyond this, ops are entered but not timed
constexpr uint64_t kP2PSalt = 0x7032702d736c6f74ull;  // "p2p-slot"

// A lock held for a few instructions by app threads and the poller; never across a call
// into CUDA, NCCL or the kernel.
class SpinLock {
 public:
  void lock() noexcept {
    int spins = 0;
    while (flag_.test_and_set(std::memory_order_acquire)) {
      if (++spins > 64) sched_yield();
    }
  }
  void unlock() noexcept { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

class SpinGuard {
 public:
  explicit SpinGuard(SpinLock& lock) : lock_(lock) { lock_.lock(); }
  ~SpinGuard() { lock_.unlock(); }

 private:
  SpinLock& lock_;
};

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

uint64_t CoarseNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64's finalizer; never returns 0 (0 marks a free comm slot).
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

uint64_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;  // fp8 and anything newer
  }
}

}  // namespace

struct CommInfo {
  uint64_t id = 0;
  int rank = -1;
  int size = 0;
  uint32_t slot = kNoSlot;
  uint32_t p2p_slot = kNoSlot;
  bool slot_claimed = false;  // app thread(s) issuing on this comm
  bool p2p_claimed = false;
  std::atomic<bool> ended{false};
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint32_t> ordinals{0};  // splits and shrinks taken on this comm
  SpinLock p2p_lock;
  uint64_t p2p_ops = 0;                                 // GUARDED_BY(p2p_lock)
  std::unordered_map<int64_t, uint64_t> p2p_counters;   // GUARDED_BY(p2p_lock): peer*2+dir
};

struct OpRef {
  uint64_t comm_id = 0;
  uint32_t slot = kNoSlot;
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

namespace {

struct GroupOp {
  OpRef ref;
  ncclComm_t comm;
  CommInfo* info;
  cudaStream_t stream;
  int device;
  bool timed;
};

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

Runtime* g_rt = nullptr;  // set once by Init, never freed (threads may outlive exit handlers)

thread_local int t_group_depth = 0;
thread_local std::vector<GroupOp>* t_group_ops = nullptr;

void Push(const shm::Record& record) {
  if (g_rt == nullptr || !g_rt->ring) return;
  SpinGuard guard(g_rt->ring_lock);
  g_rt->ring->Push(record);
}

shm::Record MakeRecord(RecordType type, uint16_t flags, uint32_t slot, uint64_t comm_id,
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

// CUDA calls libft.so makes on an app thread must not change what the app's
// cudaGetLastError() returns: an error of ours is cleared when the app had none pending.
class AppCuda {
 public:
  cudaError_t Check(cudaError_t e) {
    if (e != cudaSuccess && !had_prior_) {
      if (auto get = FT_REAL_CUDA(cudaGetLastError)) get();
    }
    return e;
  }
  AppCuda() {
    auto peek = FT_REAL_CUDA(cudaPeekAtLastError);
    had_prior_ = peek != nullptr && peek() != cudaSuccess;
  }

 private:
  bool had_prior_ = false;
};

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

enum class Capture { kNo, kYes, kUnknown };

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

CommInfo* Register(ncclComm_t handle, uint64_t id, int rank, int size, CommOrigin origin,
                   uint64_t parent_id, uint32_t ordinal, int color) {
  auto* info = new CommInfo;
  info->id = id;
  info->rank = rank;
  info->size = size;
  {
    SpinGuard guard(g_rt->comms_lock);
    // A nonblocking split/shrink does not know its rank yet: its slot is claimed at its first
    // op, when it does (the slot's identity fields are written once).
    if (rank >= 0) {
      auto claimed = g_rt->table->Claim(id, rank, size, g_rt->identity.rank);
      info->slot = claimed ? *claimed : kNoSlot;
      info->slot_claimed = true;
    }
    g_rt->comms[handle] = info;  // a reused handle replaces a destroyed comm
  }
  auto r = MakeRecord(RecordType::kCommInit, static_cast<uint16_t>(origin), info->slot, id, 0, NowNs());
  r.a = static_cast<uint32_t>(rank) | (static_cast<uint64_t>(static_cast<uint32_t>(size)) << 32);
  r.b = static_cast<uint64_t>(static_cast<int64_t>(g_rt->identity.rank));
  r.c = parent_id;
  r.d = (static_cast<uint64_t>(ordinal) << 32) | static_cast<uint32_t>(color);
  Push(r);
  FT_LOG(Debug, Preload, "comm {:016x} rank {}/{} (origin {})", id, rank, size,
         static_cast<int>(origin));
  return info;
}

CommInfo* Lookup(ncclComm_t handle) {
  {
    SpinGuard guard(g_rt->comms_lock);
    auto it = g_rt->comms.find(handle);
    if (it != g_rt->comms.end()) return it->second;
  }
  // Created before we saw it: members cannot agree on an id, so it is this process's own.
  int rank = -1, size = 0;
  if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(handle, &rank);
  if (auto f = FT_REAL_NCCL(ncclCommCount)) f(handle, &size);
  uint64_t key[2] = {static_cast<uint64_t>(getpid()), reinterpret_cast<uintptr_t>(handle)};
  return Register(handle, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kUnknown, 0, 0, -1);
}

// A comm whose rank was unknown at creation (nonblocking split/shrink still initializing): its
// table slot is claimed at its first op that can learn the rank.
void FillIdentity(ncclComm_t handle, CommInfo* info) {
  if (info->slot_claimed) return;
  if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(handle, &info->rank);
  if (auto f = FT_REAL_NCCL(ncclCommCount)) f(handle, &info->size);
  if (info->rank < 0) return;  // still initializing: try again at the next op
  SpinGuard guard(g_rt->comms_lock);
  auto claimed = g_rt->table->Claim(info->id, info->rank, info->size, g_rt->identity.rank);
  info->slot = claimed ? *claimed : kNoSlot;
  info->slot_claimed = true;
}

uint32_t P2PSlot(CommInfo* info) {
  // Caller holds info->p2p_lock.
  if (!info->p2p_claimed) {
    info->p2p_claimed = true;
    SpinGuard guard(g_rt->comms_lock);
    auto claimed = g_rt->table->Claim(Mix(info->id ^ kP2PSalt), info->rank, info->size,
                                      g_rt->identity.rank);
    info->p2p_slot = claimed ? *claimed : kNoSlot;
  }
  return info->p2p_slot;
}

// ---------------------------------------------------------------- poller

struct PollerState {
  std::vector<Pending*> list;
  std::vector<uint64_t> last_started;    // per comm slot
  std::vector<uint64_t> last_completed;  // per comm slot
  int device = -1;
  bool progressed = false;  // this round saw a start or a completion
  int idle_rounds = 0;      // rounds in a row without progress, for the back-off
};

void ProgressStarted(PollerState& st, const OpRef& op, uint64_t now) {
  st.progressed = true;
  if (op.slot != kNoSlot && op.slot < st.last_started.size() && op.seq > st.last_started[op.slot]) {
    st.last_started[op.slot] = op.seq;
    g_rt->table->Started(op.slot, op.seq, now);
  }
  auto r = MakeRecord(RecordType::kOpStart, op.flags, op.slot, op.comm_id, op.record_seq, now);
  r.a = op.record_a;
  Push(r);
}

void ProgressCompleted(PollerState& st, const OpRef& op, uint64_t now, uint64_t duration,
                       uint16_t extra_flags) {
  st.progressed = true;
  if (op.slot != kNoSlot && op.slot < st.last_completed.size() &&
      op.seq > st.last_completed[op.slot]) {
    st.last_completed[op.slot] = op.seq;
    if (op.seq > st.last_started[op.slot]) {
      st.last_started[op.slot] = op.seq;
      g_rt->table->Started(op.slot, op.seq, now - duration);
    }
    g_rt->table->Completed(op.slot, op.seq, now, duration);
  }
  auto r = MakeRecord(RecordType::kOpEnd, op.flags | extra_flags, op.slot, op.comm_id,
                      op.record_seq, now);
  r.a = op.record_a;
  r.b = duration;
  r.c = op.entered_ns;
  Push(r);
}

void SetPollerDevice(PollerState& st, int device) {
  if (device < 0 || device == st.device) return;
  if (auto set = FT_REAL_CUDA(cudaSetDevice)) {
    if (set(device) == cudaSuccess) st.device = device;
  }
}

// True when the pending op is finished with (and freed).
bool Step(PollerState& st, Pending* p) {
  uint64_t now = NowNs();
  auto finish = [&](uint16_t flags) {
    if (!p->started) {
      for (auto& op : p->ops) ProgressStarted(st, op, now);
      p->started_ns = now;
    }
    for (auto& op : p->ops) ProgressCompleted(st, op, now, now - p->started_ns, flags);
    ReleaseEvent(p->device, p->start);
    ReleaseEvent(p->device, p->end);
    delete p;
    g_rt->pending_count.fetch_sub(1, std::memory_order_relaxed);
    return true;
  };
  if (p->failed) return finish(kFlagError);
  if (!p->await_comms.empty()) {
    // Nonblocking communicator: the work is issued in the background; the end event can only
    // be recorded once NCCL says it is no longer in progress.
    auto get_error = FT_REAL_NCCL(ncclCommGetAsyncError);
    for (size_t i = 0; i < p->await_comms.size();) {
      ncclResult_t state = ncclSuccess;
      if (p->await_infos[i] != nullptr && !p->await_infos[i]->ended.load() && get_error != nullptr &&
          get_error(p->await_comms[i], &state) == ncclSuccess && state == ncclInProgress) {
        return false;
      }
      if (state != ncclSuccess && state != ncclInProgress) p->failed = true;
      p->await_comms.erase(p->await_comms.begin() + i);
      p->await_infos.erase(p->await_infos.begin() + i);
    }
    if (p->failed) return finish(kFlagError);
    if (p->device < 0 || p->device >= kMaxDevices) return finish(kFlagUntimed);
    SetPollerDevice(st, p->device);
    p->end = nullptr;
    {
      SpinGuard guard(g_rt->pool_lock);
      auto& pool = g_rt->pool[p->device];
      if (!pool.empty()) {
        p->end = pool.back();
        pool.pop_back();
      }
    }
    if (p->end == nullptr) {
      auto create = FT_REAL_CUDA(cudaEventCreateWithFlags);
      if (create == nullptr || create(&p->end, cudaEventDisableTiming) != cudaSuccess) p->end = nullptr;
    }
    auto record = FT_REAL_CUDA(cudaEventRecord);
    if (p->end == nullptr || record == nullptr || record(p->end, p->stream) != cudaSuccess) {
      return finish(kFlagUntimed);
    }
  }
  auto query = FT_REAL_CUDA(cudaEventQuery);
  if (p->end == nullptr || query == nullptr) return finish(0);  // untimed: flagged at submit
  if (!p->started && p->start != nullptr) {
    cudaError_t q = query(p->start);
    if (q == cudaSuccess) {
      p->started = true;
      p->started_ns = now;
      for (auto& op : p->ops) ProgressStarted(st, op, now);
    } else if (q != cudaErrorNotReady) {
      return finish(kFlagError);
    } else {
      return false;
    }
  }
  cudaError_t q = query(p->end);
  if (q == cudaSuccess) return finish(0);
  if (q != cudaErrorNotReady) return finish(kFlagError);
  return false;
}

void HandleMailbox() {
  while (auto command = shm::TakeCommand(*g_rt->segment)) {
    std::string message = "command type " + std::to_string(command->type) +
                          " not supported by this libft.so";
    shm::AckCommand(*g_rt->segment, command->seq, static_cast<int32_t>(StatusCode::kUnsupported),
                    message);
  }
}

void PollerMain() {
  t_in_ft = true;
  PollerState st;
  uint32_t slots = g_rt->segment->header()->comm_slot_count;
  st.last_started.assign(slots, 0);
  st.last_completed.assign(slots, 0);
  shm::SegmentHeader* header = g_rt->segment->header();
  while (!g_rt->stop.load(std::memory_order_acquire)) {
    header->heartbeat_ns.store(NowNs(), std::memory_order_relaxed);
    header->heartbeat_count.fetch_add(1, std::memory_order_relaxed);
    // Newest first on the stack: reverse into submission order.
    Pending* taken = g_rt->incoming.exchange(nullptr, std::memory_order_acquire);
    std::vector<Pending*> fresh;
    for (; taken != nullptr; taken = taken->next) fresh.push_back(taken);
    st.list.insert(st.list.end(), fresh.rbegin(), fresh.rend());
    std::vector<Pending*> keep;
    keep.reserve(st.list.size());
    st.progressed = !fresh.empty();
    for (Pending* p : st.list) {
      if (!Step(st, p)) keep.push_back(p);
    }
    st.list.swap(keep);
    HandleMailbox();
    // Ops in flight: poll at FT_POLL_INTERVAL while they progress; after 100 rounds in which
    // nothing moved (a hang, a long kernel) poll at 16x, so a stuck job costs the poller almost
    // nothing; the first progress restores the interval.
    st.idle_rounds = st.progressed ? 0 : std::min(st.idle_rounds + 1, 100);
    uint64_t sleep_ns = st.list.empty()        ? std::max<uint64_t>(g_rt->poll_ns, 5000000)
                        : st.idle_rounds < 100 ? g_rt->poll_ns
                                               : g_rt->poll_ns * 16;
    struct timespec ts{static_cast<time_t>(sleep_ns / 1000000000ull),
                       static_cast<long>(sleep_ns % 1000000000ull)};
    nanosleep(&ts, nullptr);
  }
  g_rt->poller_done.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------- lifecycle

void OnExit() {
  Runtime* rt = g_rt;
  if (rt == nullptr || getpid() != rt->owner_pid) return;
  int expected = kActive;
  if (!g_state.compare_exchange_strong(expected, kPassThrough)) return;
  rt->stop.store(true, std::memory_order_release);
  // The poller finishes its round; a poller stuck in a driver call is not waited for.
  for (int i = 0; i < 300 && !rt->poller_done.load(std::memory_order_acquire); ++i) {
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  rt->segment->header()->state.store(static_cast<uint32_t>(shm::ProcessState::kExited),
                                     std::memory_order_release);
  Status removed = rt->segment->Remove();
  if (!removed.ok()) FT_LOG(Warn, Preload, "removing segment at exit: {}", removed.ToString());
}

void OnForkChild() {
  // The child shares the parent's segment mapping and has no poller: it must not write.
  // It runs on, unmonitored.
  g_state.store(kPassThrough, std::memory_order_release);
  t_group_depth = 0;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void DoInit() {
  Environment env = Environment::FromProcess();
  Config config;
  std::vector<std::string> warnings;
  Status loaded = Config::Load(env, &config, &warnings);
  if (!loaded.ok()) {
    FT_LOG(Warn, Preload, "libft.so disabled: {}; fix the setting to enable monitoring",
           loaded.ToString());
    g_state.store(kPassThrough);
    return;
  }
  if (!config.enable) {
    g_state.store(kPassThrough);
    return;
  }
  (void)log::Configure(config.log_level, config.log_subsystems);
  for (const auto& w : warnings) FT_LOG(Warn, Preload, "{}", w);
  auto rt = std::make_unique<Runtime>();
  rt->config = config;
  rt->identity = ResolveLauncherIdentity(config, env, HostName());
  log::SetRank(rt->identity.rank);
  rt->owner_pid = getpid();
  rt->poll_ns = std::max<uint64_t>(static_cast<uint64_t>(config.poll_interval.count()), 100000);
  shm::Identity identity;
  identity.job = rt->identity.job;
  identity.node = rt->identity.node;
  identity.host = rt->identity.host;
  identity.global_rank = rt->identity.rank;
  identity.local_rank = rt->identity.local_rank;
  identity.world_size = rt->identity.world_size;
  shm::SegmentOptions options;
  if (config.ring_records <= 0 || config.ring_records > (int64_t{1} << 26) ||
      config.comm_slots <= 0 || config.comm_slots > 4096) {
    FT_LOG(Warn, Preload,
           "libft.so disabled: FT_RING_RECORDS={} / FT_COMM_SLOTS={} out of range; the job runs "
           "unmonitored", config.ring_records, config.comm_slots);
    g_state.store(kPassThrough);
    return;
  }
  options.ring_capacity = static_cast<uint32_t>(config.ring_records);
  options.comm_slots = static_cast<uint32_t>(config.comm_slots);
  std::string name = shm::SegmentName(identity.job, identity.global_rank, rt->owner_pid);
  Status created = shm::Segment::Create(name, identity, rt->owner_pid, options, &rt->segment);
  if (!created.ok()) {
    FT_LOG(Warn, Preload,
           "libft.so disabled: cannot create segment {}: {}; the job runs unmonitored (check "
           "/dev/shm space and FT_RING_RECORDS)", name, created.ToString());
    g_state.store(kPassThrough);
    return;
  }
  rt->ring = std::make_unique<shm::RingWriter>(*rt->segment);
  rt->table = std::make_unique<shm::CommTableWriter>(*rt->segment);
  g_rt = rt.release();
  try {
    std::thread(PollerMain).detach();
  } catch (...) {
    FT_LOG(Warn, Preload, "libft.so disabled: cannot start its poller thread");
    g_rt->segment->header()->state.store(static_cast<uint32_t>(shm::ProcessState::kDisabled));
    (void)g_rt->segment->Remove();
    g_state.store(kPassThrough);
    return;
  }
  static bool registered = false;
  if (!registered) {
    registered = true;
    atexit(OnExit);
    pthread_atfork(nullptr, nullptr, OnForkChild);
  }
  FT_LOG(Debug, Preload, "libft.so active: segment {}", name);
  g_state.store(kActive, std::memory_order_release);
}

std::once_flag g_init_once;

}  // namespace

bool InitSlow() noexcept {
  bool was = t_in_ft;
  t_in_ft = true;
  try {
    std::call_once(g_init_once, [] {
      try {
        DoInit();
      } catch (...) {
        g_state.store(kPassThrough);
      }
    });
  } catch (...) {
    g_state.store(kPassThrough);
  }
  t_in_ft = was;
  return g_state.load(std::memory_order_acquire) == kActive;
}

void NoteCall() noexcept {
  if (g_rt == nullptr) return;
  shm::SegmentHeader* h = g_rt->segment->header();
  h->last_call_ns.store(CoarseNs(), std::memory_order_relaxed);
  h->call_count.fetch_add(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- NCCL hooks

void NcclPreOp(OpCall* call, OpKind op, bool p2p, size_t count, ncclDataType_t dtype, int peer,
               ncclComm_t comm, cudaStream_t stream) noexcept {
  try {
    NoteCall();
    CommInfo* info = Lookup(comm);
    FillIdentity(comm, info);
    call->comm = info;
    call->handle = comm;
    uint64_t now = NowNs();
    AppCuda cuda;
    Capture capture = StreamCapturing(stream, cuda);
    bool captured = capture == Capture::kYes;
    uint16_t flags = p2p ? kFlagP2P : 0;
    if (t_group_depth > 0) flags |= kFlagGrouped;
    uint64_t bytes = count * TypeSize(dtype);
    uint64_t seq = 0;
    uint32_t slot = info->slot;
    uint64_t slot_seq = 0;
    if (captured) {
      flags |= kFlagCaptured;
    } else if (p2p) {
      SpinGuard guard(info->p2p_lock);
      seq = ++info->p2p_counters[static_cast<int64_t>(peer) * 2 + (op == OpKind::kRecv ? 1 : 0)];
      slot = P2PSlot(info);
      slot_seq = ++info->p2p_ops;
    } else {
      seq = info->coll_seq.fetch_add(1, std::memory_order_relaxed) + 1;
      slot_seq = seq;
    }
    call->seq = seq;
    call->flags = flags;
    g_rt->ops_entered.fetch_add(1, std::memory_order_relaxed);
    if (!captured && slot != kNoSlot) {
      g_rt->table->EnterOp(slot, slot_seq, static_cast<uint32_t>(op), bytes, peer, now);
    }
    auto r = MakeRecord(RecordType::kOpEnter, flags, slot, info->id, seq, now);
    r.a = static_cast<uint64_t>(op) | (static_cast<uint64_t>(dtype & 0xff) << 8) |
          (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32);
    r.b = bytes;
    r.c = reinterpret_cast<uintptr_t>(stream);
    r.d = count;
    Push(r);
    if (captured) return;
    OpRef ref{info->id, slot, slot_seq, op, flags, now, seq, r.a};
    if (t_group_depth > 0) {
      if (t_group_ops == nullptr) t_group_ops = new std::vector<GroupOp>;
      t_group_ops->push_back(GroupOp{ref, comm, info, stream, CurrentDevice(cuda),
                                     capture == Capture::kNo});
      call->grouped = true;
      return;
    }
    call->pending = capture == Capture::kNo ? BeginTiming(stream, cuda) : nullptr;
    if (call->pending != nullptr) {
      call->pending->ops.push_back(ref);
    } else {
      // Untimed: completes at submit (post-hook).
      call->pending = new Pending;
      call->pending->ops.push_back(ref);
      call->pending->ops.back().flags |= kFlagUntimed;
      call->pending->device = -1;
    }
  } catch (...) {
    call->pending = nullptr;
  }
}

void NcclPostOp(OpCall* call, NcclSym sym, ncclResult_t result) noexcept {
  try {
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(sym, result, nullptr);
    }
    Pending* p = call->pending;
    if (p == nullptr) return;
    AppCuda cuda;
    if (result == ncclSuccess) {
      Submit(p, p->start != nullptr, cuda);
    } else if (result == ncclInProgress) {
      p->await_comms.push_back(call->handle);
      p->await_infos.push_back(call->comm);
      for (auto& op : p->ops) op.flags |= kFlagInProgress;
      Submit(p, false, cuda);
    } else {
      p->failed = true;
      Submit(p, false, cuda);
    }
  } catch (...) {
  }
}

void NcclGroupStartPost(ncclResult_t result) noexcept {
  NoteCall();
  if (result == ncclSuccess) ++t_group_depth;
}

struct GroupEndToken {
  std::vector<GroupOp> ops;
  std::vector<Pending*> pendings;  // one per stream
};

void* NcclGroupEndPre() noexcept {
  NoteCall();
  if (t_group_depth != 1) return nullptr;
  try {
    auto* token = new GroupEndToken;
    if (t_group_ops != nullptr) token->ops.swap(*t_group_ops);
    AppCuda cuda;
    // One start event per stream, recorded before the outermost end issues the group's work.
    for (const GroupOp& op : token->ops) {
      Pending* found = nullptr;
      for (Pending* p : token->pendings) {
        if (p->stream == op.stream) found = p;
      }
      if (found == nullptr) {
        if (op.timed) {
          DeviceScope scope(op.device, cuda);
          found = BeginTiming(op.stream, cuda);
        }
        if (found == nullptr) {
          found = new Pending;
          found->stream = op.stream;
        }
        token->pendings.push_back(found);
      }
      found->ops.push_back(op.ref);
      bool known = false;
      for (CommInfo* c : found->await_infos) known |= c == op.info;
      if (!known) {
        found->await_infos.push_back(op.info);
        found->await_comms.push_back(op.comm);
      }
    }
    return token;
  } catch (...) {
    return nullptr;
  }
}

void NcclGroupEndPost(void* opaque, ncclResult_t result) noexcept {
  if (t_group_depth > 0) --t_group_depth;  // NCCL closes the group even when it fails
  auto* token = static_cast<GroupEndToken*>(opaque);
  if (token == nullptr) {
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(NcclSym::k_ncclGroupEnd, result, nullptr);
    }
    return;
  }
  try {
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(NcclSym::k_ncclGroupEnd, result, nullptr);
    }
    AppCuda cuda;
    for (Pending* p : token->pendings) {
      if (result == ncclSuccess) {
        p->await_comms.clear();
        p->await_infos.clear();
        if (p->start == nullptr) {
          for (auto& op : p->ops) op.flags |= kFlagUntimed;
        }
        DeviceScope scope(p->device, cuda);
        Submit(p, p->start != nullptr, cuda);
      } else if (result == ncclInProgress) {
        for (auto& op : p->ops) op.flags |= kFlagInProgress;
        if (p->start == nullptr) {
          p->await_comms.clear();
          p->await_infos.clear();
          for (auto& op : p->ops) op.flags |= kFlagUntimed;
        }
        Submit(p, false, cuda);
      } else {
        p->failed = true;
        Submit(p, false, cuda);
      }
    }
  } catch (...) {
  }
  delete token;
}

void NcclInitPost(NcclSym sym, ncclResult_t result, ncclComm_t* out, int nranks, int rank,
                  const ncclUniqueId* ids, int nids) noexcept {
  NoteCall();
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(sym, result, nullptr);
    return;
  }
  if (out == nullptr || *out == nullptr || ids == nullptr || nids <= 0) return;
  try {
    uint64_t h = Fnv1a(ids, sizeof(ncclUniqueId) * static_cast<size_t>(nids));
    Register(*out, Mix(h), rank, nranks, CommOrigin::kInit, 0, 0, -1);
  } catch (...) {
  }
}

void NcclInitAllPost(ncclResult_t result, ncclComm_t* out, int ndev) noexcept {
  NoteCall();
  if (result != ncclSuccess || out == nullptr || ndev <= 0) {
    if (result != ncclSuccess) NcclApiError(NcclSym::k_ncclCommInitAll, result, nullptr);
    return;
  }
  try {
    static std::atomic<uint64_t> counter{0};
    uint64_t key[2] = {static_cast<uint64_t>(getpid()), counter.fetch_add(1)};
    uint64_t id = Mix(Fnv1a(key, sizeof(key)));
    // All members live in this process and share the id; the in-flight table has one slot per
    // id, so only member 0 writes it (the others are tracked by ring records).
    for (int i = 0; i < ndev; ++i) {
      if (out[i] == nullptr) continue;
      CommInfo* info = Register(out[i], id, i, ndev, CommOrigin::kInitAll, 0, 0, -1);
      if (i > 0) info->slot = kNoSlot;
    }
  } catch (...) {
  }
}

uint32_t NcclNextOrdinal(ncclComm_t parent) noexcept {
  NoteCall();
  try {
    return Lookup(parent)->ordinals.fetch_add(1) + 1;
  } catch (...) {
    return 0;
  }
}

void NcclSplitPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, int color,
                   ncclComm_t* out) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(NcclSym::k_ncclCommSplit, result, parent);
    return;
  }
  if (out == nullptr || *out == nullptr) return;  // NCCL_SPLIT_NOCOLOR
  try {
    CommInfo* p = Lookup(parent);
    uint64_t key[3] = {p->id, ordinal, static_cast<uint64_t>(static_cast<int64_t>(color))};
    int rank = -1, size = 0;
    if (result == ncclSuccess) {
      if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(*out, &rank);
      if (auto f = FT_REAL_NCCL(ncclCommCount)) f(*out, &size);
    }
    Register(*out, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kSplit, p->id, ordinal,
             color);
  } catch (...) {
  }
}

void NcclShrinkPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, const int* excluded,
                    int nexcluded, ncclComm_t* out) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(NcclSym::k_ncclCommShrink, result, parent);
    return;
  }
  if (out == nullptr || *out == nullptr) return;
  try {
    CommInfo* p = Lookup(parent);
    // Color of a shrink: a hash of the excluded set, which every member passes identically.
    uint64_t color = excluded != nullptr && nexcluded > 0
                         ? Fnv1a(excluded, sizeof(int) * static_cast<size_t>(nexcluded))
                         : 0;
    uint64_t key[4] = {p->id, ordinal, color, 0x736872696e6bull /* "shrink" */};
    int rank = -1, size = 0;
    if (result == ncclSuccess) {
      if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(*out, &rank);
      if (auto f = FT_REAL_NCCL(ncclCommCount)) f(*out, &size);
    }
    Register(*out, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kShrink, p->id, ordinal,
             -1);
  } catch (...) {
  }
}

void NcclEndComm(NcclSym sym, ncclComm_t comm, ncclResult_t result) noexcept {
  NoteCall();
  if (result != ncclSuccess && result != ncclInProgress) NcclApiError(sym, result, comm);
  try {
    CommInfo* info = nullptr;
    {
      SpinGuard guard(g_rt->comms_lock);
      auto it = g_rt->comms.find(comm);
      if (it == g_rt->comms.end()) return;
      info = it->second;
      g_rt->comms.erase(it);
    }
    info->ended.store(true);  // the info itself stays: the poller may still refer to it
    auto r = MakeRecord(RecordType::kCommEnd, 0, info->slot, info->id, 0, NowNs());
    r.a = sym == NcclSym::k_ncclCommAbort ? 2 : 1;
    Push(r);
  } catch (...) {
  }
}

void NcclApiError(NcclSym sym, ncclResult_t result, ncclComm_t comm) noexcept {
  if (g_rt == nullptr) return;
  uint64_t comm_id = 0;
  if (comm != nullptr) {
    SpinGuard guard(g_rt->comms_lock);
    auto it = g_rt->comms.find(comm);
    if (it != g_rt->comms.end()) comm_id = it->second->id;
  }
  auto r = MakeRecord(RecordType::kApiError, kFlagError, kNoSlot, comm_id, 0, NowNs());
  r.a = static_cast<uint64_t>(ApiLibrary::kNccl);
  r.b = static_cast<uint64_t>(sym);
  r.c = static_cast<uint64_t>(result);
  Push(r);
}

// ---------------------------------------------------------------- CUDA hooks

void CudaApiError(CudaSym sym, cudaError_t result) noexcept {
  if (g_rt == nullptr) return;
  auto r = MakeRecord(RecordType::kApiError, kFlagError, kNoSlot, 0, 0, NowNs());
  r.a = static_cast<uint64_t>(ApiLibrary::kCudart);
  r.b = static_cast<uint64_t>(sym);
  r.c = static_cast<uint64_t>(result);
  Push(r);
}

Pending* CudaGraphPre(cudaStream_t stream) noexcept {
  NoteCall();
  try {
    AppCuda cuda;
    if (StreamCapturing(stream, cuda) != Capture::kNo) return nullptr;
    Pending* p = BeginTiming(stream, cuda);
    if (p == nullptr) return nullptr;
    uint64_t n = g_rt->graph_launches.fetch_add(1) + 1;
    OpRef ref{0, kNoSlot, n, OpKind::kGraphLaunch, 0, NowNs(), n,
              static_cast<uint64_t>(OpKind::kGraphLaunch) | (uint64_t{0xffffffff} << 32)};
    p->ops.push_back(ref);
    return p;
  } catch (...) {
    return nullptr;
  }
}

void CudaGraphPost(Pending* p, cudaStream_t, cudaError_t result) noexcept {
  if (result != cudaSuccess) CudaApiError(CudaSym::k_cudaGraphLaunch, result);
  if (p == nullptr) return;
  try {
    AppCuda cuda;
    p->failed = result != cudaSuccess;
    Submit(p, !p->failed, cuda);
  } catch (...) {
  }
}

void CudaAllocPost(void** ptr, size_t bytes, cudaError_t result) noexcept {
  NoteCall();
  if (result != cudaSuccess || ptr == nullptr) return;
  try {
    uint64_t total = g_rt->allocated_bytes.fetch_add(bytes) + bytes;
    {
      SpinGuard guard(g_rt->alloc_lock);
      g_rt->allocations[*ptr] = bytes;
    }
    auto r = MakeRecord(RecordType::kAlloc, 0, kNoSlot, 0, 0, NowNs());
    r.a = bytes;
    r.b = reinterpret_cast<uintptr_t>(*ptr);
    r.c = total;
    Push(r);
  } catch (...) {
  }
}

void CudaFreePost(void* ptr, cudaError_t result) noexcept {
  NoteCall();
  if (result != cudaSuccess || ptr == nullptr) return;
  try {
    uint64_t bytes = 0;
    {
      SpinGuard guard(g_rt->alloc_lock);
      auto it = g_rt->allocations.find(ptr);
      if (it == g_rt->allocations.end()) return;
      bytes = it->second;
      g_rt->allocations.erase(it);
    }
    uint64_t total = g_rt->allocated_bytes.fetch_sub(bytes) - bytes;
    auto r = MakeRecord(RecordType::kAlloc, 1, kNoSlot, 0, 0, NowNs());
    r.b = reinterpret_cast<uintptr_t>(ptr);
    r.c = total;
    Push(r);
  } catch (...) {
  }
}

void CudaRegisterFunctionPost(const char* host_fun, const char* device_name) noexcept {
  NoteCall();
  if (device_name == nullptr) return;
  size_t n = strnlen(device_name, 4096);
  auto r = MakeRecord(RecordType::kKernelName, 0, kNoSlot, 0, 0, NowNs());
  r.a = reinterpret_cast<uintptr_t>(host_fun);
  r.b = Fnv1a(device_name, n);
  char head[16] = {};
  std::memcpy(head, device_name, std::min<size_t>(n, sizeof(head)));
  std::memcpy(&r.c, head, 8);
  std::memcpy(&r.d, head + 8, 8);
  Push(r);
}

RuntimeStats GetRuntimeStats() noexcept {
  RuntimeStats s;
  if (g_rt == nullptr) return s;
  s.pending = g_rt->pending_count.load();
  s.events_created = g_rt->events_created.load();
  s.ops_entered = g_rt->ops_entered.load();
  return s;
}

const char* OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kNone: return "none";
    case OpKind::kAllReduce: return "AllReduce";
    case OpKind::kAllGather: return "AllGather";
    case OpKind::kReduceScatter: return "ReduceScatter";
    case OpKind::kBroadcast: return "Broadcast";
    case OpKind::kBcast: return "Bcast";
    case OpKind::kReduce: return "Reduce";
    case OpKind::kAlltoAll: return "AlltoAll";
    case OpKind::kGather: return "Gather";
    case OpKind::kScatter: return "Scatter";
    case OpKind::kSend: return "Send";
    case OpKind::kRecv: return "Recv";
    case OpKind::kGraphLaunch: return "GraphLaunch";
  }
  return "?";
}

}  // namespace ft::preload
