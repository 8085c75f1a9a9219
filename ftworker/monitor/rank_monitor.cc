#include "ftworker/monitor/rank_monitor.h"

#include <unistd.h>

#include <algorithm>

#include "common/log.h"
#include "ftworker/monitor/exit_event.h"
#include "ftworker/monitor/op_names.h"
#include "shm/records.h"

namespace ft::worker {
namespace {

using shm::RecordType;

constexpr size_t kBatchRecords = 512;
constexpr size_t kMaxRecordsPerTick = size_t{1} << 16;  // bounds one tick; the rest waits
constexpr size_t kMaxComms = 4096;                      // foreign bytes must not grow us unbounded
constexpr size_t kMaxWindowSteps = 4096;
constexpr int64_t kErrorRepeatMs = 10'000;              // one event per error kind per 10 s

double AgeMs(uint64_t now_ns, uint64_t then_ns) {
  return now_ns > then_ns ? static_cast<double>(now_ns - then_ns) / 1e6 : 0.0;
}

}  // namespace

RankMonitor::RankMonitor(std::unique_ptr<shm::Segment> segment, uint64_t inode, std::string node,
                         const MonitorSettings& settings, ProcessProbe* probe,
                         VerifiedProcess process, std::string unverified)
    : segment_(std::move(segment)),
      inode_(inode),
      node_(std::move(node)),
      settings_(settings),
      probe_(probe),
      reader_(*segment_),
      batch_(kBatchRecords),
      process_(std::move(process)),
      unverified_(std::move(unverified)),
      process_watch_(probe, segment_->info().global_rank, segment_->info().pid, segment_->info().incarnation,
                     segment_->name()),
      slowdown_(settings) {
  // Identity from the copy validated at attach time: the live header may say anything since.
  const shm::HeaderCopy& h = segment_->info();
  rank_ = h.global_rank;
  local_rank_ = h.local_rank;
  world_size_ = h.world_size;
  pid_ = h.pid;
  incarnation_ = h.incarnation;
  record_version_ = h.record_version;
  host_ = h.host;
  if (node_.empty()) node_ = h.node;
  int previous = segment_->control()->reader_pid.exchange(getpid(), std::memory_order_relaxed);
  if (previous != 0 && previous != getpid() && probe_->PidExists(previous)) {
    FT_LOG(Warn, Worker,
           "segment {} was being read by pid {}, which is still running: two ftworkers for one "
           "node split its records between them; run one ftworker per node (FT_NODE_ID)",
           name(), previous);
  }
}

Status RankMonitor::Signal(int signal) {
  if (!process_.valid()) {
    return Status::InvalidArgument(fmt::format(
        "rank {}: its process (pid {}) was not verified when its segment was found ({}), so "
        "this worker does not signal it; stop it through its launcher",
        rank_, pid_, unverified_.empty() ? "no reason recorded" : unverified_));
  }
  return probe_->Signal(process_, signal);
}

void RankMonitor::Tick(uint64_t now_ns, int64_t now_unix_ms, const TimeoutPolicy& timeouts,
                       std::vector<proto::Event>* events) {
  if (finished()) {
    // Nothing more to read; only whether the pid is gone (an exited segment is reclaimed then).
    if (!pid_gone_) pid_gone_ = process_watch_.PidGone();
    return;
  }
  const size_t first_event = events->size();
  DrainRing(now_unix_ms, events);
  ReadSlots();
  // Order matters: the pid is checked before the state, so a process that sets kExited and
  // exits between the two reads is seen as the clean exit it is.
  bool gone = process_watch_.CheckGone(now_ns, *segment_->header());
  auto state = static_cast<shm::ProcessState>(segment_->header()->state.load(std::memory_order_acquire));
  if (state == shm::ProcessState::kExited) {
    pid_gone_ = gone;
    exited_itself_ = true;
    // Only status 0 is a finish: a rank ending by an uncaught exception exits 1 through the
    // same path, and its job has failed.
    const bool failed = segment_->header()->exit_status.load(std::memory_order_acquire) != 0;
    Finish(!failed ? Life::kExited : stop_signalled_ ? Life::kStopped : Life::kDead, now_ns, now_unix_ms,
           events);
  } else if (gone) {
    pid_gone_ = true;
    Finish(stop_signalled_ ? Life::kStopped : Life::kDead, now_ns, now_unix_ms, events);
  } else {
    life_ = state == shm::ProcessState::kDisabled ? Life::kDisabled : Life::kRunning;
    if (!process_watch_.foreign_pending()) {
      seen_alive_ = true;
      alive_unix_ms_ = now_unix_ms;
    }
    BuildProgress(now_ns, now_unix_ms);
    CheckFrozen(now_ns, now_unix_ms, events);
  }
  OnSteps(now_unix_ms, events);
  // A disabled libft.so stopped updating its table: what it shows in flight is stale.
  if (life_ == Life::kRunning && !process_watch_.foreign_pending()) {
    timeouts_.Check(InFlight(now_ns), timeouts, progress_, now_unix_ms, events);
  }
  for (size_t i = first_event; i < events->size(); ++i) (*events)[i].progress = progress_;
  hook_failures_ = shm::SnapshotHookFailures(segment_->header());
  // What ft_restore did (the step first, acquire: the plan version was written before it).
  const int64_t restored_plus2 = segment_->header()->restored_step_plus2.load(std::memory_order_acquire);
  if (restored_plus2 > 0 && restored_plus2 - 2 != restored_step_) {
    restored_step_ = restored_plus2 - 2;
    restore_plan_ = segment_->header()->restore_plan_version.load(std::memory_order_relaxed);
    membership_changed_ = true;
  }
  if (progress_.state != last_state_) {
    last_state_ = progress_.state;
    membership_changed_ = true;
  }
}

void RankMonitor::DrainRing(int64_t now_unix_ms, std::vector<proto::Event>* events) {
  uint64_t dropped = segment_->header()->ring_dropped.load(std::memory_order_relaxed);
  if (dropped != last_dropped_) {
    if (dropped > last_dropped_) window_dropped_ += dropped - last_dropped_;
    last_dropped_ = dropped;
    steps_.OnGap();
  }
  size_t total = 0;
  while (total < kMaxRecordsPerTick) {
    size_t got = 0;
    Status s = reader_.Poll(batch_.data(), batch_.size(), &got);
    if (!s.ok()) {
      if (!warned_ring_) {
        FT_LOG(Warn, Worker,
               "rank {} segment {}: {}; records were lost and this is not libft.so's normal "
               "behaviour: check that only one ftworker reads this node",
               rank_, name(), s.ToString());
        warned_ring_ = true;
      }
      steps_.OnGap();
    }
    for (size_t i = 0; i < got; ++i) OnRecord(batch_[i], now_unix_ms, events);
    total += got;
    window_records_ += got;
    if (got < batch_.size()) break;
  }
  steps_.Flush();
}

void RankMonitor::LearnComm(uint64_t comm_id) {
  if (comm_id == 0 || salted_to_real_.size() >= 2 * kMaxComms) return;
  salted_to_real_.emplace(shm::P2PSlotId(comm_id), comm_id);
}

void RankMonitor::OnRecord(const shm::Record& r, int64_t now_unix_ms, std::vector<proto::Event>* events) {
  if (kernels_.OnRecord(r)) return;
  switch (static_cast<RecordType>(r.type)) {
    case RecordType::kCommInit: {
      if (r.comm_id == 0) break;
      LearnComm(r.comm_id);
      ended_.erase(r.comm_id);
      proto::CommMember m;
      m.comm_id = r.comm_id;
      const shm::CommRank placed = shm::ReadCommRank(r.a);
      m.comm_rank = placed.comm_rank;
      m.comm_size = placed.comm_size;
      auto it = members_.find(r.comm_id);
      if (it == members_.end()) {
        if (members_.size() >= kMaxComms) break;
        members_.emplace(r.comm_id, m);
        membership_changed_ = true;
      } else if (it->second.comm_rank != m.comm_rank || it->second.comm_size != m.comm_size) {
        m.p2p = it->second.p2p;
        it->second = m;
        membership_changed_ = true;
      }
      break;
    }
    case RecordType::kCommEnd:
      if (members_.erase(r.comm_id) > 0) membership_changed_ = true;
      if (ended_.size() < kMaxComms) ended_.insert(r.comm_id);
      break;
    case RecordType::kOpEnter: {
      if (r.flags & shm::kFlagCaptured) break;  // runs at each graph launch, not here
      const uint32_t op = shm::ReadOpArgs(r.a).kind;
      steps_.OnEnter(StepInference::Signature(r.comm_id, op, proto::SizeBucket(r.b)), r.time_ns, r.b);
      ops_.OnEnter(r, op);
      break;
    }
    case RecordType::kOpEnd: {
      const uint32_t op = shm::ReadOpArgs(r.a).kind;
      if (ops_.OnEnd(r, op) && op != static_cast<uint32_t>(shm::OpKind::kGraphLaunch) && r.b > 0 &&
          r.time_ns >= r.b) {
        steps_.OnOpInterval(r.time_ns - r.b, r.time_ns);
      }
      break;
    }
    case RecordType::kApiError:
      OnError(r, now_unix_ms, events);
      break;
    case RecordType::kStepDone:
      steps_.OnDeclaredStep(r.time_ns);
      break;
    default:
      break;  // kOpStart (the table has it), kAlloc, types of a newer libft.so
  }
}

void RankMonitor::OnError(const shm::Record& r, int64_t now_unix_ms, std::vector<proto::Event>* events) {
  auto key = std::make_tuple(r.a, r.b, r.c);
  auto it = errors_seen_.find(key);
  if (it == errors_seen_.end()) {
    if (errors_seen_.size() >= 1024) errors_seen_.clear();
    it = errors_seen_.emplace(key, ErrorSeen{}).first;
  } else if (now_unix_ms - it->second.last_unix_ms < kErrorRepeatMs) {
    ++it->second.suppressed;  // an app retrying a failing call must not flood the stream
    return;
  }
  uint64_t suppressed = it->second.suppressed;
  it->second = ErrorSeen{now_unix_ms, 0};
  proto::Event e = MakeEvent(proto::EventKind::kError, now_unix_ms);
  e.api = ApiLibraryName(r.a);
  e.call = record_version_ >= 2 ? ApiCallName(r.a, r.b) : ApiCallNameV1(r.b);
  e.code = static_cast<int64_t>(r.c);
  e.comm_id = r.comm_id;
  e.message = fmt::format(
      "rank {} (pid {}): {} returned error {} ({}); the application received it unchanged and "
      "may fail or hang next: see the rank's own log for what it did with it",
      rank_, pid_, e.call, e.code, e.api);
  if (suppressed > 0) {
    e.message += fmt::format(" ({} more of the same in the last {} s were not reported)", suppressed,
                             kErrorRepeatMs / 1000);
  }
  events->push_back(std::move(e));
}

void RankMonitor::ReadSlots() {
  const uint32_t count = segment_->comm_slot_count();
  if (slots_.size() < count) slots_.resize(count);
  const shm::CommSlot* raw = segment_->comm_slots();
  uint32_t used = 0;
  for (uint32_t i = 0; i < count; ++i) {
    auto snap = shm::SnapshotCommSlot(*segment_, i);
    if (!snap) {
      // Slots are claimed first-fit and never freed: the first free one ends the table. A
      // slot whose writer kept it busy keeps its previous view until the next tick.
      if (raw[i].comm_id.load(std::memory_order_acquire) == 0) break;
      ++used;
      continue;
    }
    ++used;
    SlotView view;
    view.p = *snap;
    view.real_id = snap->comm_id;
    view.p2p = (snap->flags & shm::kCommSlotP2P) != 0;
    slots_[i] = view;
    if (!view.p2p) LearnComm(snap->comm_id);
  }
  for (uint32_t i = 0; i < used && i < slots_.size(); ++i) {
    if (!slots_[i]) continue;
    SlotView& v = *slots_[i];
    auto salted = salted_to_real_.find(v.p.comm_id);
    if (salted != salted_to_real_.end()) {
      v.p2p = true;
      v.real_id = salted->second;
    }
    if (ended_.count(v.real_id) > 0) continue;
    auto it = members_.find(v.real_id);
    if (v.p2p) {
      if (it != members_.end() && !it->second.p2p) {
        it->second.p2p = true;
        membership_changed_ = true;
      }
    } else if (it == members_.end() && members_.size() < kMaxComms) {
      proto::CommMember m;
      m.comm_id = v.real_id;
      m.comm_rank = v.p.comm_rank;
      m.comm_size = v.p.comm_size;
      members_.emplace(v.real_id, m);
      membership_changed_ = true;
    }
  }
}

void RankMonitor::BuildProgress(uint64_t now_ns, int64_t now_unix_ms) {
  const shm::SegmentHeader* h = segment_->header();
  proto::RankProgress& p = progress_;
  p.rank = rank_;
  p.node = node_;
  p.pid = pid_;
  p.incarnation = incarnation_;
  p.state = proto::RankStateName(life_);
  p.observed_unix_ms = now_unix_ms;
  uint64_t last_call = h->last_call_ns.load(std::memory_order_acquire);
  uint64_t blocked_since = h->blocked_since_ns.load(std::memory_order_acquire);
  p.last_call_age_ms = last_call == 0 ? -1 : AgeMs(now_ns, last_call);
  p.blocked_ms = blocked_since == 0 ? 0 : AgeMs(now_ns, blocked_since);
  p.cpu_pct = finished() ? 0 : process_watch_.cpu_pct();
  bool recent_call = last_call != 0 && (now_ns <= last_call || now_ns - last_call < settings_.busy_call_age_ns);
  bool working_cpu = p.cpu_pct + (finished() ? 0 : process_watch_.wait_pct()) >= settings_.busy_cpu_pct && blocked_since == 0;
  p.busy = !finished() && (recent_call || working_cpu);
  // Frozen: the process cannot run (stopped, traced) or its poller thread has stopped
  // beating. Either way its table no longer moves: the master must not read what it shows in
  // flight as a wait. A disabled libft.so stopped its poller on purpose.
  uint64_t heartbeat = h->heartbeat_ns.load(std::memory_order_acquire);
  const char proc_state = process_watch_.proc_state();
  p.proc_state = proc_state != 0 && !finished() ? std::string(1, proc_state) : std::string();
  p.heartbeat_age_ms = heartbeat == 0 ? -1 : AgeMs(now_ns, heartbeat);
  bool stopped = process_watch_.stopped();
  bool silent = heartbeat != 0 && now_ns > heartbeat && now_ns - heartbeat > settings_.frozen_after_ns;
  p.frozen = life_ == Life::kRunning && (stopped || silent);
  if (p.frozen) p.busy = false;
  p.comms.clear();
  for (const auto& slot : slots_) {
    if (!slot) continue;
    const shm::CommProgress& c = slot->p;
    proto::CommRow row;
    row.comm_id = slot->real_id;
    row.p2p = slot->p2p;
    row.comm_rank = c.comm_rank;
    row.comm_size = c.comm_size;
    row.op = shm::OpKindOfRecord(c.enter_op);
    row.bytes = c.entered_bytes;
    row.peer = c.entered_peer;
    row.entered_seq = c.entered_seq;
    row.started_seq = c.started_seq;
    row.completed_seq = c.completed_seq;
    row.entered_age_ms = c.entered_ns == 0 ? -1 : AgeMs(now_ns, c.entered_ns);
    row.started_age_ms = c.started_ns == 0 ? -1 : AgeMs(now_ns, c.started_ns);
    row.completed_age_ms = c.completed_ns == 0 ? -1 : AgeMs(now_ns, c.completed_ns);
    p.comms.push_back(std::move(row));
  }
}

void RankMonitor::CheckFrozen(uint64_t now_ns, int64_t now_unix_ms, std::vector<proto::Event>* events) {
  const bool stopped = process_watch_.stopped();
  const char proc_state = process_watch_.proc_state();
  if (!stopped) {
    stopped_since_ns_ = 0;
  } else if (stopped_since_ns_ == 0) {
    stopped_since_ns_ = now_ns;
  }
  if (!progress_.frozen) {
    frozen_raised_ = false;  // running again (SIGCONT, a debugger detached): a new episode may come
    return;
  }
  if (frozen_raised_) return;
  // How long it has been frozen: stopped that long by the kernel's account, or its poller
  // silent that long (a stopped process's poller is silent since it was stopped).
  uint64_t frozen_ns = stopped ? now_ns - stopped_since_ns_ : 0;
  const uint64_t heartbeat = segment_->header()->heartbeat_ns.load(std::memory_order_acquire);
  if (heartbeat != 0 && now_ns > heartbeat) frozen_ns = std::max(frozen_ns, now_ns - heartbeat);
  if (frozen_ns < settings_.frozen_after_ns) return;
  // A process told to terminate (a launcher's SIGTERM) may stop beating while it ends; its
  // death follows and says what happened.
  if (segment_->header()->terminate_signal.load(std::memory_order_acquire) != 0) return;
  frozen_raised_ = true;
  proto::Event e = MakeEvent(proto::EventKind::kFrozen, now_unix_ms);
  e.age_ms = static_cast<double>(frozen_ns) / 1e6;
  const std::string how =
      proc_state == 'T'   ? "its process is stopped (state T: SIGSTOP/SIGTSTP or a job-control stop)"
      : proc_state == 't' ? "its process is stopped by a tracer (state t: a debugger holds it)"
                           : fmt::format("its process (state {}) has not run libft.so's poller thread",
                                         proc_state != 0 ? std::string(1, proc_state) : std::string("?"));
  e.message = fmt::format(
      "rank {} (pid {}) is frozen: {}, heartbeat silent for {:.1f} s (FT_FROZEN_AFTER {:.1f} s). It "
      "cannot make progress and its peers will wait on it, inside NCCL or not; send SIGCONT if it "
      "was stopped on purpose, else the master stops the job",
      rank_, pid_, how, progress_.heartbeat_age_ms >= 0 ? progress_.heartbeat_age_ms / 1e3 : e.age_ms / 1e3,
      static_cast<double>(settings_.frozen_after_ns) / 1e9);
  FT_LOG(Warn, Worker, "{}", e.message);
  events->push_back(std::move(e));
}

std::vector<InFlightOp> RankMonitor::InFlight(uint64_t now_ns) const {
  std::vector<InFlightOp> ops;
  for (const auto& slot : slots_) {
    if (!slot) continue;
    const shm::CommProgress& c = slot->p;
    if (c.started_seq <= c.completed_seq) continue;
    InFlightOp op;
    op.comm_id = slot->real_id;
    op.p2p = slot->p2p;
    op.seq = c.completed_seq + 1;
    uint32_t kind = c.enter_op;
    op.bytes = c.entered_bytes;
    if (auto entered = slot->p2p ? std::nullopt : ops_.EnteredOp(slot->real_id, op.seq)) {
      kind = entered->op;
      op.bytes = entered->bytes;
    }
    op.op = shm::OpKindOfRecord(kind);
    op.started_age_ms = c.started_ns == 0 ? 0 : AgeMs(now_ns, c.started_ns);
    ops.push_back(std::move(op));
  }
  return ops;
}

void RankMonitor::OnSteps(int64_t now_unix_ms, std::vector<proto::Event>* events) {
  for (const StepSample& step : steps_.TakeSteps()) {
    ++steps_total_;
    last_step_ms_ = step.step_ms;
    if (window_steps_ms_.size() < kMaxWindowSteps) {
      window_steps_ms_.push_back(step.step_ms);
      window_compute_ms_.push_back(step.compute_ms);
      window_comm_ms_.push_back(step.comm_ms);
    }
    FT_LOG(Debug, Worker, "rank {}: step {} took {:.1f} ms (compute {:.1f} ms, collectives {:.1f} ms)",
           rank_, step.index, step.step_ms, step.compute_ms, step.comm_ms);
    bool was_slow = slowdown_.slow();
    auto slow = slowdown_.OnStep(step);
    if (was_slow && !slowdown_.slow()) {
      FT_LOG(Info, Worker, "rank {}: step time back to its baseline of {:.1f} ms", rank_, slowdown_.baseline_ms());
    }
    if (!slow) continue;
    proto::Event e = MakeEvent(proto::EventKind::kSlowdown, now_unix_ms);
    e.step_ms = slow->step_ms;
    e.baseline_ms = slow->baseline_ms;
    e.compute_ms = slow->compute_ms;
    const char* which = slow->compute_slow && slow->step_slow ? "step and compute time"
                        : slow->compute_slow                  ? "compute time"
                                                              : "step time";
    e.message = fmt::format(
        "rank {}: {} beyond its noise: step {:.1f} ms against its baseline of {:.1f} ms ({:+.0f}%), "
        "compute {:.1f} ms against {:.1f} ms ({:+.0f}%), medians of the last {} steps. If only "
        "this rank's compute grew it is the straggler (GPU clocks, thermals, host contention); if "
        "every rank slowed, look at the network or the input pipeline",
        rank_, which, slow->step_ms, slow->baseline_ms, 100 * (slow->step_ms / slow->baseline_ms - 1),
        slow->compute_ms, slow->baseline_compute_ms,
        100 * (slow->compute_ms / std::max(slow->baseline_compute_ms, 1e-9) - 1), settings_.slowdown_steps);
    events->push_back(std::move(e));
  }
}

void RankMonitor::Finish(Life life, uint64_t now_ns, int64_t now_unix_ms, std::vector<proto::Event>* events) {
  // What the process wrote before it ended is final now: read the rest.
  DrainRing(now_unix_ms, events);
  ReadSlots();
  life_ = life;
  finished_ns_ = now_ns;
  const shm::SegmentHeader* h = segment_->header();
  // When it ended, not when this worker noticed (a tick late, seconds late on a loaded host or for
  // a restarted worker): the end's time tells the master which ranks started after it (a
  // relaunch, which a launcher starts only once the old processes are gone) and which before (a
  // teardown under way). The later of its last heartbeat and the last tick that saw it alive.
  int64_t end_unix_ms = seen_alive_ ? alive_unix_ms_ : 0;
  const uint64_t heartbeat = h->heartbeat_ns.load(std::memory_order_acquire);
  if (heartbeat != 0 && heartbeat <= now_ns) {
    end_unix_ms = std::max(end_unix_ms, now_unix_ms - static_cast<int64_t>((now_ns - heartbeat) / 1'000'000));
  }
  if (end_unix_ms <= 0 || end_unix_ms > now_unix_ms) end_unix_ms = now_unix_ms;
  BuildProgress(now_ns, end_unix_ms);
  int32_t status = h->exit_status.load(std::memory_order_acquire);
  proto::Event e = MakeEvent(proto::EventKind::kExit, end_unix_ms);
  // libft.so's signal handler writes these before anything else when a launcher or scheduler
  // asks the process to end (SIGTERM): what follows is a teardown. Only a real signal number
  // counts (the bytes are the process's to write).
  const int32_t term = h->terminate_signal.load(std::memory_order_acquire);
  if (term > 0 && term < 128) {
    e.terminated_by_signal = term;
    const uint64_t at = h->terminate_unix_ns.load(std::memory_order_acquire);
    e.terminate_unix_ms = static_cast<int64_t>(std::min<uint64_t>(at / 1'000'000, INT64_MAX));
  }
  DescribeEnd(RankEnd{rank_, pid_, life, status, term, exited_itself_, process_watch_.wait_status()}, &e);
  events->push_back(std::move(e));
}

proto::Event RankMonitor::MakeEvent(proto::EventKind kind, int64_t unix_ms) const {
  return proto::NewEvent(kind, rank_, node_, unix_ms);
}

proto::Membership RankMonitor::membership() const {
  proto::Membership m{.rank = rank_, .local_rank = local_rank_, .world_size = world_size_,
                      .node = node_, .host = host_, .pid = pid_, .incarnation = incarnation_,
                      .state = proto::RankStateName(life_), .unix_ms = progress_.observed_unix_ms,
                      .comms = {}, .restored_step = restored_step_, .restore_plan = restore_plan_};
  for (const auto& [id, member] : members_) m.comms.push_back(member);
  // The segment stays mapped after the process removed it at its exit: its last value is final.
  if (finished() && segment_) {
    const int64_t plus1 = segment_->header()->app_step_plus1.load(std::memory_order_acquire);
    if (plus1 > 0) m.step = plus1 - 1;
  }
  return m;
}

bool RankMonitor::IsMember(uint64_t comm_id) const {
  if (members_.count(comm_id) > 0) return true;
  for (const auto& slot : slots_) {
    if (slot && !slot->p2p && slot->real_id == comm_id) return true;
  }
  return false;
}

std::optional<uint64_t> RankMonitor::EnteredSeq(uint64_t comm_id) const {
  for (const auto& slot : slots_) {
    if (slot && !slot->p2p && slot->real_id == comm_id) return slot->p.entered_seq;
  }
  return std::nullopt;
}

proto::RankSummary RankMonitor::TakeSummary(int64_t unix_ms) {
  proto::RankSummary s{.rank = rank_, .node = node_, .unix_ms = unix_ms, .steps = steps_total_,
                        .step_ms = last_step_ms_, .step_p50_ms = Median(window_steps_ms_),
                        .compute_ms = Median(window_compute_ms_), .comm_wait_ms = Median(window_comm_ms_),
                        .records = window_records_, .dropped = window_dropped_,
                        .ops = ops_.TakeSummaries(), .kernels = kernels_.TakeLaunches(),
                        .kernel_samples = kernels_.TakeSamples(), .slowdown = slowdown_.slow() ? 1 : 0};
  // What the job says of its steps, from the header (live fields, read as they stand: a record
  // dropped on a full ring loses neither): the master's horizon for a slowdown.
  if (segment_) {
    const int64_t plus1 = segment_->header()->app_step_plus1.load(std::memory_order_acquire);
    const int64_t total = segment_->header()->total_steps.load(std::memory_order_relaxed);
    s.declared_step = plus1 > 0 ? plus1 - 1 : -1;
    s.total_steps = std::max<int64_t>(0, total);
  }
  window_steps_ms_.clear();
  window_compute_ms_.clear();
  window_comm_ms_.clear();
  window_records_ = 0;
  window_dropped_ = 0;
  return s;
}

}  // namespace ft::worker
