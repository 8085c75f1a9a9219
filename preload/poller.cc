#include "preload/poller.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "preload/ckpt/ckpt_agent.h"
#include "preload/kernel_launch.h"
#include "preload/poll_pacing.h"
#include "preload/poller_rules.h"
#include "preload/real.h"
#include "preload/runtime_state.h"
#include "preload/timing.h"
#include "shm/mailbox.h"

namespace ft::preload::internal {

namespace {

constexpr uint64_t kLaunchCountPeriodNs = 1000000000;

struct PollerState {
  std::vector<Pending*> list;
  std::vector<Pending*> fresh;  // scratch, reused every round: no allocation while idle
  std::vector<Pending*> keep;   // scratch, reused every round
  std::vector<uint64_t> last_started;    // per comm slot
  std::vector<uint64_t> last_completed;  // per comm slot
  // Per comm slot, the ops this poller knows are pending, oldest first, as (seq, entered ns):
  // the timed ops it was handed and the first op of each lane gap (untimed ops in between are
  // not known one by one). Its front is the table's pending_seq / pending_ns.
  std::vector<std::deque<std::pair<uint64_t, uint64_t>>> known_pending;
  std::vector<uint64_t> pending_written;  // per comm slot: the pending_seq last written
  std::vector<uint32_t> pending_dirty;    // slots whose known_pending or completion moved
  // Lanes (runtime_state.h: one thread's ops on one device's stream) with an op not finished
  // this round: the thread's later ops there were recorded after it, so they cannot be
  // finished either and are not looked at (a round costs O(finished ops + lanes), not O(ops
  // in flight)). Not the stream alone: two threads' records on one stream are ordered by when
  // their calls reached the runtime, not by their order on the incoming stack; and
  // cudaStreamPerThread and stream 0 are another stream on every thread and device.
  struct LaneKey {
    cudaStream_t stream;
    uint32_t thread_tag;
    int32_t device;
    bool operator==(const LaneKey&) const = default;
  };
  std::vector<LaneKey> blocked;
  // Closed gaps whose first op has not been reported started: it starts when the lane's timed
  // op #after completes (Pending::gap_after). Oldest first; at most one per timed op in flight.
  struct GapStart {
    Lane* lane;
    uint64_t after;
    OpRef first;
  };
  std::deque<GapStart> gap_starts;
  int device = -1;
  std::vector<shm::Record> records;  // this round's, pushed at its end
  uint64_t finished = 0;             // Pendings handed back (published to Runtime::finished)
  uint64_t next_count_report_ns = 0;  // kKernelCount records: once a second
  bool relaxed = false;     // in relaxed capture mode (poller_rules.h)
  bool progressed = false;  // this round saw a start or a completion
  uint64_t progress_ns = 0;  // when a round last saw progress, for the back-off (poll_pacing.h)
  uint64_t mailbox_taken = 0;  // the last mailbox command taken (acked or handed over)
};

// The ring records of a round, pushed at its end in chunks (PushAll): the ring lock and head
// then move between this core and the app threads' once per chunk, not once per record.
void Emit(PollerState& st, const shm::Record& r) { st.records.push_back(r); }

constexpr size_t kMaxKnownPending = 1 << 16;  // per slot: 1 MiB at most

void MarkPendingDirty(PollerState& st, uint32_t slot) {
  if (slot >= st.known_pending.size()) return;
  if (std::find(st.pending_dirty.begin(), st.pending_dirty.end(), slot) == st.pending_dirty.end()) {
    st.pending_dirty.push_back(slot);
  }
}

// An op the poller learned was entered and is not known complete.
void KnowPending(PollerState& st, uint32_t slot, uint64_t seq, uint64_t entered_ns) {
  if (slot >= st.known_pending.size() || seq <= st.last_completed[slot]) return;
  auto& known = st.known_pending[slot];
  if (known.size() >= kMaxKnownPending) return;
  // Usually the newest; a gap's first op can arrive after timed ops entered later.
  auto at = known.end();
  while (at != known.begin() && std::prev(at)->first > seq) --at;
  if (at != known.begin() && std::prev(at)->first == seq) return;
  known.insert(at, {seq, entered_ns});
  MarkPendingDirty(st, slot);
}

// Writes the oldest known pending op of each slot that moved this round.
void WriteOldestPending(PollerState& st) {
  for (uint32_t slot : st.pending_dirty) {
    auto& known = st.known_pending[slot];
    while (!known.empty() && known.front().first <= st.last_completed[slot]) known.pop_front();
    uint64_t seq = known.empty() ? 0 : known.front().first;
    if (seq == st.pending_written[slot]) continue;
    st.pending_written[slot] = seq;
    g_rt->table->OldestPending(slot, seq, known.empty() ? 0 : known.front().second);
  }
  st.pending_dirty.clear();
}

void ProgressStarted(PollerState& st, const OpRef& op, uint64_t when) {
  st.progressed = true;
  if (op.slot != kNoSlot && op.slot < st.last_started.size() && op.seq > st.last_started[op.slot]) {
    st.last_started[op.slot] = op.seq;
    g_rt->table->Started(op.slot, op.seq, when);
  }
  auto r = MakeRecord(RecordType::kOpStart, op.flags, op.slot, op.comm_id, op.record_seq, when);
  r.a = op.record_a;
  Emit(st, r);
}

void ProgressCompleted(PollerState& st, const OpRef& op, uint64_t now, uint64_t duration,
                       uint16_t extra_flags) {
  st.progressed = true;
  if (op.slot != kNoSlot && op.slot < st.last_completed.size() &&
      op.seq > st.last_completed[op.slot]) {
    st.last_completed[op.slot] = op.seq;
    MarkPendingDirty(st, op.slot);
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
  Emit(st, r);
}

// An untimed op vouched for by a later event of its lane: the table moves, no record (its
// duration was not measured, and the lane keeps only the newest op per slot).
void ProgressCovered(PollerState& st, const CoveredRef& op, uint64_t now) {
  if (op.slot == kNoSlot || op.slot >= st.last_completed.size() || op.seq <= st.last_completed[op.slot]) {
    return;
  }
  st.progressed = true;
  st.last_completed[op.slot] = op.seq;
  MarkPendingDirty(st, op.slot);
  if (op.seq > st.last_started[op.slot]) {
    st.last_started[op.slot] = op.seq;
    g_rt->table->Started(op.slot, op.seq, now);
  }
  g_rt->table->Completed(op.slot, op.seq, now, 0);
}

// A timed op's start event completed: the lane's untimed ops before it are complete.
void CompleteCovered(PollerState& st, Pending* p, uint64_t now) {
  for (uint32_t i = 0; i < p->covered_count; ++i) ProgressCovered(st, p->covered[i], now);
  p->covered_count = 0;
}

// What a lane published (Lane), read consistently; false while its thread writes it.
struct LaneView {
  uint32_t version = 0;
  cudaEvent_t tail = nullptr;
  uint32_t tail_count = 0;
  CoveredRef tail_ops[kLaneSlots];
  uint64_t gap_after = 0;
  OpRef first;
};

bool ReadLane(const Lane& lane, LaneView* v) {
  return lane.published.Read(4, [&] {
    v->tail = Seqlock::Load(lane.tail);
    v->tail_count = std::min(Seqlock::Load(lane.tail_count), kLaneSlots);
    for (uint32_t i = 0; i < v->tail_count; ++i) {
      v->tail_ops[i].slot = Seqlock::Load(lane.tail_slot[i]);
      v->tail_ops[i].seq = Seqlock::Load(lane.tail_seq[i]);
    }
    v->gap_after = Seqlock::Load(lane.gap_after);
    v->first.slot = Seqlock::Load(lane.first_slot);
    v->first.flags = static_cast<uint16_t>(Seqlock::Load(lane.first_flags));
    v->first.comm_id = Seqlock::Load(lane.first_comm_id);
    v->first.seq = Seqlock::Load(lane.first_seq);
    v->first.record_seq = Seqlock::Load(lane.first_record_seq);
    v->first.record_a = Seqlock::Load(lane.first_record_a);
    v->first.entered_ns = Seqlock::Load(lane.first_entered_ns);
  }, &v->version);
}

// The first ops of closed gaps (Pending::gap_after): started once the timed op before each
// completed. Before PollLanes, which reports the newest gap's: a lane's older gaps start first.
void StartClosedGaps(PollerState& st, uint64_t now) {
  for (size_t i = 0; i < st.gap_starts.size();) {
    PollerState::GapStart& g = st.gap_starts[i];
    const OpRef& op = g.first;
    if (op.slot >= st.last_completed.size() || op.seq <= st.last_completed[op.slot]) {
      st.gap_starts.erase(st.gap_starts.begin() + static_cast<std::ptrdiff_t>(i));  // done already
      continue;
    }
    if (g.after > g.lane->done_timed) {
      ++i;
      continue;
    }
    if (op.seq > st.last_started[op.slot]) ProgressStarted(st, op, now);
    g.lane->started_after = std::max(g.lane->started_after, g.after);
    st.gap_starts.erase(st.gap_starts.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// The lanes' untimed ops (Lane): the first of a gap started once the timed op before it
// completed; all of them completed once the tail event recorded after the newest did.
void PollLanes(PollerState& st, uint64_t now) {
  auto query = FT_REAL_CUDA(cudaEventQuery);
  for (Lane* lane = g_rt->lanes.load(std::memory_order_acquire); lane != nullptr;
       lane = lane->all_next) {
    if (lane->published.version() == lane->confirmed_version) continue;
    LaneView v;
    if (!ReadLane(*lane, &v)) continue;
    if (v.gap_after != 0 && v.first.slot != kNoSlot) {
      KnowPending(st, v.first.slot, v.first.seq, v.first.entered_ns);
    }
    if (v.gap_after != 0 && v.gap_after <= lane->done_timed && lane->started_after < v.gap_after) {
      lane->started_after = v.gap_after;
      if (v.first.slot < st.last_completed.size() && v.first.seq > st.last_completed[v.first.slot]) {
        ProgressStarted(st, v.first, now);
      }
    }
    if (v.tail != nullptr && query != nullptr && query(v.tail) == cudaSuccess) {
      for (uint32_t i = 0; i < v.tail_count; ++i) ProgressCovered(st, v.tail_ops[i], now);
      lane->confirmed_version = v.version;
    }
  }
}

// The rank's GPU as the worker's hardware signals name it (shm/layout.h gpu_bus_id): the
// device of the first op the poller times, written once.
void RecordGpuBusId(int device) {
  shm::SegmentHeader* header = g_rt->segment->header();
  if (header->gpu_bus_id_ready.load(std::memory_order_relaxed) != 0) return;
  auto get_bus_id = FT_REAL_CUDA(cudaDeviceGetPCIBusId);
  char id[sizeof(header->gpu_bus_id)] = {};
  if (get_bus_id == nullptr || get_bus_id(id, sizeof(id) - 1, device) != cudaSuccess) return;
  std::memcpy(header->gpu_bus_id, id, sizeof(id));
  header->gpu_bus_id_ready.store(1, std::memory_order_release);
}

void SetPollerDevice(PollerState& st, int device) {
  if (device < 0 || device == st.device) return;
  if (auto set = FT_REAL_CUDA(cudaSetDevice)) {
    if (set(device) == cudaSuccess) {
      st.device = device;
      RecordGpuBusId(device);
    }
  }
}

// True when the pending op is finished with (and handed back). `now`: this round's
// observation time.
bool Step(PollerState& st, Pending* p, uint64_t now) {
  if (p->kernel_sample) {
    if (!StepKernelSample(p, now, &st.records)) return false;
    ++st.finished;
    return true;
  }
  // Its events say the ops completed (or failed).
  auto finish = [&](uint16_t flags) {
    if (!p->started) {
      for (const OpRef& op : p->ops()) ProgressStarted(st, op, now);
      p->started_ns = now;
    }
    for (const OpRef& op : p->ops()) ProgressCompleted(st, op, now, now - p->started_ns, flags);
    if (flags == 0) {
      CompleteCovered(st, p, now);
      // A late end (nonblocking comm) was recorded after work the thread issued later.
      if (p->lane != nullptr && !p->late_end && p->lane_timed > p->lane->done_timed) {
        p->lane->done_timed = p->lane_timed;
      }
    }
    FreePending(p);
    ++st.finished;
    return true;
  };
  // Nothing can tell when its ops complete: they stay unknown (entered, never completed here;
  // a later event of their lane may still vouch for them).
  auto forget = [&]() {
    FreePending(p);
    ++st.finished;
    return true;
  };
  if (p->failed) return finish(kFlagError);
  if (!p->await_comms.empty()) {
    // Nonblocking communicator: the work is issued in the background; the end event can only
    // be recorded once NCCL says it is no longer in progress.
    for (size_t i = 0; i < p->await_comms.size();) {
      ncclResult_t state = ncclSuccess;
      if (PollAsyncError(p->await_infos[i], p->await_comms[i], &state) &&
          state == ncclInProgress) {
        return false;
      }
      if (state != ncclSuccess && state != ncclInProgress) p->failed = true;
      p->await_comms.erase(p->await_comms.begin() + i);
      p->await_infos.erase(p->await_infos.begin() + i);
    }
    if (p->failed) return finish(kFlagError);
    if (p->device < 0 || p->device >= kMaxDevices) return forget();
    p->late_end = true;  // has_end still false: the end is the poller's to record
  }
  if (p->late_end && !p->has_end) {
    SetPollerDevice(st, p->device);
    // Not into a stream being captured (it would become a node of the app's graph): the op's
    // work was enqueued before the capture began, so a record after the capture still follows it.
    if (!MayRecordInto(p->stream)) return false;
    auto record = FT_REAL_CUDA(cudaEventRecord);
    if (record == nullptr || !EnsureEvent(p, true, nullptr) || record(p->end, p->stream) != cudaSuccess) {
      return forget();
    }
    p->has_end = true;
  }
  auto query = FT_REAL_CUDA(cudaEventQuery);
  if (query == nullptr) return forget();
  if (!p->has_end) {
    // Its end could not be recorded (flagged untimed at submit): its start still vouches for
    // the untimed ops it covers.
    if (p->covered_count == 0 || !p->has_start) return forget();
    cudaError_t q = query(p->start);
    if (q == cudaErrorNotReady) return false;
    if (q == cudaSuccess) CompleteCovered(st, p, now);
    return forget();
  }
  // The end first: once it is reached, so is the start (stream order), and most ops are
  // finished by the time the poller first looks at them.
  cudaError_t q = query(p->end);
  if (q == cudaSuccess) return finish(0);
  if (q != cudaErrorNotReady) return finish(kFlagError);
  if (!p->started && p->has_start) {
    q = query(p->start);
    if (q == cudaSuccess) {
      p->started = true;
      p->started_ns = now;
      for (const OpRef& op : p->ops()) ProgressStarted(st, op, now);
      CompleteCovered(st, p, now);
    } else if (q != cudaErrorNotReady) {
      return finish(kFlagError);
    }
  }
  return false;
}

// Save commands go to the checkpoint agent, which acknowledges them when their save ends:
// until then they stay unacknowledged in the mailbox, so the poller takes only commands after
// the last one it took. Every other type is answered at once.
void HandleMailbox(PollerState& st) {
  while (auto command = shm::TakeCommandAfter(*g_rt->segment, st.mailbox_taken)) {
    st.mailbox_taken = command->seq;
    if (command->type == static_cast<uint32_t>(shm::CommandType::kSave) ||
        command->type == static_cast<uint32_t>(shm::CommandType::kSaveAtStep)) {
      agent::HandOverSaveCommand(*command);
      continue;
    }
    std::string message = "command type " + std::to_string(command->type) +
                          " not supported by this libft.so";
    shm::AckCommand(*g_rt->segment, command->seq, static_cast<int32_t>(StatusCode::kUnsupported),
                    message);
  }
}

// Moves what the app threads submitted since the last round onto the poller's list.
void TakeIncoming(PollerState& st) {
  // Newest first on the stack: reverse into submission order.
  Pending* taken = g_rt->incoming.exchange(nullptr, std::memory_order_acquire);
  st.fresh.clear();
  for (; taken != nullptr; taken = taken->next) st.fresh.push_back(taken);
  st.list.insert(st.list.end(), st.fresh.rbegin(), st.fresh.rend());
  for (auto it = st.fresh.rbegin(); it != st.fresh.rend(); ++it) {
    Pending* p = *it;
    if (p->kernel_sample) continue;
    if (p->lane != nullptr && p->gap_after != 0 && p->gap_first.slot != kNoSlot) {
      KnowPending(st, p->gap_first.slot, p->gap_first.seq, p->gap_first.entered_ns);
      if (st.gap_starts.size() >= kMaxPending) st.gap_starts.pop_front();  // bounded; never seen
      st.gap_starts.push_back(PollerState::GapStart{p->lane, p->gap_after, p->gap_first});
    }
    for (const OpRef& op : p->ops()) KnowPending(st, op.slot, op.seq, op.entered_ns);
  }
}

// At exit: the app usually synchronized just before, so its last ops are complete but may
// not have been observed yet (the previous round is up to one interval old). Writes the ops
// whose end event the runtime confirms; anything else is left unreported rather than judged,
// since the runtime may already be tearing down (a query error here means nothing).
void FinalRound(PollerState& st) {
  TakeIncoming(st);
  st.records.clear();
  auto query = FT_REAL_CUDA(cudaEventQuery);
  uint64_t now = NowNs();
  for (Pending* p : st.list) {
    bool complete = p->has_end && p->await_comms.empty() && !p->failed && query != nullptr &&
                    query(p->end) == cudaSuccess;
    if (complete) (void)Step(st, p, now);
  }
  StartClosedGaps(st, now);
  PollLanes(st, now);
  ReportLaunchCounts(now, &st.records);
  PushAll(st.records.data(), st.records.size());
}

}  // namespace

void PollerMain() {
  t_in_ft = true;
  // Named, so a person (top -H, a debugger) and the tests can tell it from the app's threads.
  pthread_setname_np(pthread_self(), "ft-poller");
  PollerState st;
  uint32_t slots = g_rt->segment->header()->comm_slot_count;
  st.last_started.assign(slots, 0);
  st.last_completed.assign(slots, 0);
  st.known_pending.resize(slots);
  st.pending_written.assign(slots, 0);
  shm::SegmentHeader* header = g_rt->segment->header();
  while (!g_rt->stop.load(std::memory_order_acquire)) {
    header->heartbeat_ns.store(NowNs(), std::memory_order_relaxed);
    header->heartbeat_count.fetch_add(1, std::memory_order_relaxed);
    TakeIncoming(st);
    if (!st.relaxed && !st.list.empty()) {
      // Before the first CUDA call, on a device the app uses (poller_rules.h).
      SetPollerDevice(st, st.list.front()->device);
      st.relaxed = RelaxCaptureMode();
    }
    st.records.clear();
    st.keep.clear();
    st.blocked.clear();
    st.progressed = !st.fresh.empty();
    uint64_t now = NowNs();
    for (Pending* p : st.list) {
      // Both events recorded by the app thread before it submitted: in stream order with the
      // thread's other ops on that stream.
      bool in_order = p->has_end && !p->late_end && p->await_comms.empty() && !p->failed;
      PollerState::LaneKey key{p->stream, p->thread_tag, p->device};
      if (in_order && std::find(st.blocked.begin(), st.blocked.end(), key) != st.blocked.end()) {
        st.keep.push_back(p);
        continue;
      }
      if (!Step(st, p, now)) {
        st.keep.push_back(p);
        if (in_order) st.blocked.push_back(key);
      }
    }
    st.list.swap(st.keep);
    // After the list: a gap's first op starts when the timed op before it was seen complete.
    StartClosedGaps(st, now);
    PollLanes(st, now);
    WriteOldestPending(st);
    if (now >= st.next_count_report_ns) {
      ReportLaunchCounts(now, &st.records);
      st.next_count_report_ns = now + kLaunchCountPeriodNs;
    }
    PushAll(st.records.data(), st.records.size());
    g_rt->finished.store(st.finished, std::memory_order_relaxed);
    // The bell before the mailbox: a command posted after this read rings past it, and the
    // wait below returns at once.
    const uint32_t bell = shm::CommandBell(*g_rt->segment);
    HandleMailbox(st);
    if (st.progressed || st.progress_ns == 0) st.progress_ns = now;
    const uint64_t sleep_ns = PollPauseNs(!st.list.empty(), now - st.progress_ns, g_rt->poll_ns);
    shm::WaitForCommand(*g_rt->segment, bell, sleep_ns);
  }
  FinalRound(st);
  g_rt->poller_done.store(true, std::memory_order_release);
}

}  // namespace ft::preload::internal
