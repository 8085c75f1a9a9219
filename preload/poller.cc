#include "preload/poller.h"

#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "preload/real.h"
#include "preload/runtime_state.h"
#include "preload/timing.h"
#include "shm/mailbox.h"

namespace ft::preload::internal {

namespace {

struct PollerState {
  std::vector<Pending*> list;
  std::vector<Pending*> fresh;  // scratch, reused every round: no allocation while idle
  std::vector<Pending*> keep;   // scratch, reused every round
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

}  // namespace

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
    st.fresh.clear();
    for (; taken != nullptr; taken = taken->next) st.fresh.push_back(taken);
    st.list.insert(st.list.end(), st.fresh.rbegin(), st.fresh.rend());
    st.keep.clear();
    st.progressed = !st.fresh.empty();
    for (Pending* p : st.list) {
      if (!Step(st, p)) st.keep.push_back(p);
    }
    st.list.swap(st.keep);
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

}  // namespace ft::preload::internal
