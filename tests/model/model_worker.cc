#include "tests/model/model_worker.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"

namespace ft::model {
namespace {

constexpr int64_t kReportMs = 1000;  // progress, heartbeat (the daemon's report period)
constexpr int64_t kScanMs = 1000;    // CkptKeeper's arena scan interval

redis::Store::Clock::time_point MonoOf(int64_t unix_ms) {
  return redis::Store::Clock::time_point(std::chrono::milliseconds(unix_ms));
}

// RestorePlanSync::NoteRankEnded gains the worker-clock time the rank ended (its ended
// membership's unix_ms): passed where this build has it.
template <typename Sync>
void NoteEnded(Sync& sync, int rank, const std::string& how, uint64_t mono_ns, int64_t end_unix_ms) {
  if constexpr (requires { sync.NoteRankEnded(rank, how, mono_ns, end_unix_ms); }) {
    sync.NoteRankEnded(rank, how, mono_ns, end_unix_ms);
  } else {
    (void)end_unix_ms;
    sync.NoteRankEnded(rank, how, mono_ns);
  }
}

}  // namespace

ModelWorker::ModelWorker(redis::FakeRedis* server, std::string job, const proto::Keys* keys, std::string node, std::vector<int> ranks,
                         std::string plan_dir, master::testing::Job* fixture, Trace trace)
    : server_(server), job_(std::move(job)), keys_(keys), node_(std::move(node)), ranks_(std::move(ranks)), plan_dir_(std::move(plan_dir)),
      fixture_(fixture), trace_(std::move(trace)) {}

ModelWorker::~ModelWorker() = default;

std::string ModelWorker::plan_path() const { return ckpt::NodePlanPath(plan_dir_, job_, node_); }

void ModelWorker::Start(int64_t now_ms) {
  store_ = std::make_unique<redis::FakeStore>(server_, "worker-" + node_);
  shim_ = std::make_unique<EvalShim>(store_.get());
  reporter_ = std::make_unique<worker::Reporter>(*keys_, node_, 100000);
  worker::RestorePlanSyncOptions o;
  o.job = job_;
  o.node = node_;
  o.arena_dir = plan_dir_;
  plan_sync_ = std::make_unique<worker::RestorePlanSync>(o);
  plan_sync_->Claim();  // as ftworker's daemon: a killed predecessor's plan file goes
  reported_.clear();  // a new keeper: every copy is reported again
  running_ = true;
  next_report_ms_ = now_ms;
  next_scan_ms_ = now_ms;
  trace_(fmt::format("worker {}: starts", node_));
}

void ModelWorker::Stop(bool clean) {
  if (!running_) return;
  if (clean) plan_sync_->RemoveFile();
  trace_(fmt::format("worker {}: {}", node_, clean ? "stops (plan file removed)" : "SIGKILLed (plan file left, its lock dropped)"));
  plan_sync_.reset();
  reporter_.reset();
  shim_.reset();
  store_.reset();
  running_ = false;
}

proto::Membership ModelWorker::MembershipOf(int rank, const ModelJob& job, int64_t now_ms) const {
  proto::Membership m = fixture_->membership[static_cast<size_t>(rank)];
  m.node = node_;
  m.host = node_;
  m.pid = 1000 + rank;
  m.incarnation = job.incarnation(rank);
  m.unix_ms = now_ms;
  m.state = "running";
  m.step = -1;
  // What the rank's ft_restore did, as libft.so writes it into its segment (restored_step_plus2).
  for (auto r = job.restores().rbegin(); r != job.restores().rend(); ++r) {
    if (r->launch != job.launch() || r->rank != rank || !r->done) continue;
    m.restored_step = r->ok ? r->step : -1;
    m.restore_plan = r->plan_version;
    break;
  }
  auto it = ended_.find(rank);
  if (it != ended_.end() && it->second.incarnation == m.incarnation) {
    m.state = it->second.note.stopped_by_worker ? "stopped" : "dead";
    m.unix_ms = it->second.note.unix_ms;
    m.step = it->second.note.step;
  }
  return m;
}

void ModelWorker::ReportExit(const ExitNote& note, ModelJob& job, int64_t now_ms) {
  ended_[note.rank] = Ended{note, job.incarnation(note.rank)};
  proto::Membership m = MembershipOf(note.rank, job, now_ms);
  proto::RankProgress& p = fixture_->progress[static_cast<size_t>(note.rank)];
  p.state = m.state;
  p.incarnation = m.incarnation;
  p.observed_unix_ms = now_ms;
  proto::Event e;
  e.kind = "exit";
  e.rank = note.rank;
  e.node = node_;
  e.unix_ms = note.unix_ms;
  e.code = note.code;
  e.clean = false;
  e.terminated_by_signal = note.terminated_by_signal;
  e.terminate_unix_ms = note.terminate_unix_ms;
  e.message = fmt::format("rank {} ended (code {})", note.rank, note.code);
  e.progress = p;
  reporter_->AddEvent(e);
  reporter_->SetMembership(m);
  // daemon.cc: every end without a clean finish (a stopped rank's too) holds the node's plan
  // file until the master's plan echoes it.
  NoteEnded(*plan_sync_, note.rank, note.code < 0 ? fmt::format("signal {}", -note.code) : fmt::format("exit status {}", note.code),
            static_cast<uint64_t>(now_ms) * 1000000ull, m.unix_ms);
}

void ModelWorker::ReportMemberships(ModelJob& job, int64_t now_ms) {
  for (int rank : ranks_) {
    auto it = ended_.find(rank);
    if (it != ended_.end() && it->second.incarnation != job.incarnation(rank)) ended_.erase(it);  // relaunched
    proto::Membership m = MembershipOf(rank, job, now_ms);
    if (m.state == "running") m.unix_ms = static_cast<int64_t>(m.incarnation / 1000000);  // stable while it runs
    reporter_->SetMembership(m);
    if (now_ms >= next_report_ms_) {
      proto::RankProgress& p = fixture_->progress[static_cast<size_t>(rank)];
      p.state = m.state;
      p.incarnation = m.incarnation;
      p.observed_unix_ms = now_ms;
      reporter_->SetProgress(p);
    }
  }
  if (now_ms >= next_report_ms_) {
    reporter_->Heartbeat(100, node_, ranks_, now_ms);
    next_report_ms_ = now_ms + kReportMs;
  }
}

void ModelWorker::RunCommands(ModelJob& job, int64_t now_ms) {
  const std::vector<redis::FakeRedis::StreamEntry> entries = server_->Stream(keys_->Commands(node_));
  for (; command_cursor_ < entries.size(); ++command_cursor_) {
    const redis::Argv& f = entries[command_cursor_].fields;
    proto::Command c;
    bool decoded = false;
    for (size_t i = 0; i + 1 < f.size(); i += 2) {
      if (f[i] == "json") decoded = proto::Decode(f[i + 1], &c).ok();
    }
    if (!decoded) continue;
    auto ack = [&](int rank, const std::string& result, const std::string& message) {
      proto::CommandAck a;
      a.id = c.id;
      a.node = node_;
      a.rank = rank;
      a.result = result;
      a.message = message;
      a.unix_ms = now_ms;
      reporter_->AddAck(a);
    };
    trace_(fmt::format("worker {}: command {} ({}, rank {})", node_, c.id, c.kind, c.rank));
    if (c.kind == "stop") {
      bool any_alive = false;
      for (int rank : ranks_) any_alive |= job.alive(rank);
      if (!any_alive && c.rank < 0) {
        ack(-1, "done", "nothing to stop");
        continue;
      }
    }
    for (int rank : ranks_) {
      if (c.rank >= 0 && c.rank != rank) continue;
      // CommandRunner's staleness: a command names the processes it is for.
      const uint64_t inc = job.incarnation(rank);
      bool stale = false;
      bool named = false;
      for (const proto::RankIncarnation& n : c.incarnations) {
        if (n.rank == rank) {
          named = true;
          stale = n.incarnation != inc;
        }
      }
      const int64_t decided = c.decided_unix_ms > 0 ? c.decided_unix_ms : c.unix_ms;
      if (!named && decided > 0 && inc > static_cast<uint64_t>(decided) * 1000000ull) stale = true;
      if (stale) {
        ack(rank, "stale", "meant for another process");
        continue;
      }
      if (c.kind == "stop") {
        if (job.alive(rank)) {
          job.Terminate(rank, now_ms, /*by_worker=*/true);
          ack(rank, "done", "SIGTERM sent");
        } else {
          ack(rank, "failed", "not running");
        }
      } else if (c.kind == "save") {
        if (job.alive(rank)) {
          job.JitSave(rank, c.id, now_ms);
        } else {
          ack(rank, "failed", "not running");
        }
      } else {
        ack(rank, "not_supported", "the model runs save and stop only");
      }
    }
  }
  for (const SaveAck& a : std::exchange(pending_acks_, {})) {
    proto::CommandAck ack;
    ack.id = a.command_id;
    ack.node = node_;
    ack.rank = a.rank;
    ack.result = a.result;
    ack.message = a.message;
    ack.unix_ms = now_ms;
    reporter_->AddAck(ack);
  }
}

void ModelWorker::ScanArenas(const ModelJob& job, int64_t now_ms) {
  std::map<std::pair<int64_t, int>, std::string> held;
  std::map<std::pair<int64_t, int>, proto::CkptCopy> copies;
  for (int rank : ranks_) {
    const ModelArena& a = job.arena(rank);
    if (a.committed() < 0 || !a.slot(a.committed()).readable()) continue;  // ReadCommitted fails: nothing reported
    const int64_t committed_step = a.slot(a.committed()).step;
    for (int s = 0; s < 2; ++s) {
      const SlotCopy& sc = a.slot(s);
      if (!sc.readable() || (s != a.committed() && sc.step == committed_step)) continue;
      proto::CkptCopy c;
      c.step = sc.step;
      c.rank = rank;
      c.node = node_;
      c.tp = rank % fixture_->world();
      c.digest = sc.digest;
      c.torn = sc.torn;
      c.origin = sc.origin == "restore" ? "periodic" : sc.origin;
      c.bytes = 4096;
      c.tiers = {"arena"};
      c.saved_unix_ms = sc.saved_unix_ms;
      c.tp = c.pp = c.dp = -1;  // the master's topology says
      held[{sc.step, rank}] = proto::Encode(c);
      copies[{sc.step, rank}] = c;
    }
  }
  for (auto& [id, text] : held) {
    auto it = reported_.find(id);
    if (it != reported_.end() && it->second == text) continue;
    proto::CkptCopy c = copies[id];
    c.unix_ms = now_ms;
    reporter_->SetCkptCopy(c);
    reported_[id] = text;
  }
  for (auto it = reported_.begin(); it != reported_.end();) {
    if (held.count(it->first)) {
      ++it;
      continue;
    }
    reporter_->RemoveCkptCopy(it->first.first, it->first.second);
    it = reported_.erase(it);
  }
}

void ModelWorker::Tick(int64_t now_ms, ModelJob& job) {
  if (!running_) return;
  store_->Ensure(MonoOf(now_ms));
  // daemon.cc: an ended rank's last copies are scanned at once and flushed before its exit
  // event is reported, so the master never reads the end first.
  if (!pending_exits_.empty()) {
    ScanArenas(job, now_ms);
    next_scan_ms_ = now_ms + kScanMs;
    if (now_ms >= hold_until_ms_) (void)reporter_->Flush(*shim_);
  }
  for (const ExitNote& note : std::exchange(pending_exits_, {})) ReportExit(note, job, now_ms);
  ReportMemberships(job, now_ms);
  RunCommands(job, now_ms);
  if (now_ms >= next_scan_ms_) {
    ScanArenas(job, now_ms);
    next_scan_ms_ = now_ms + kScanMs;
  }
  if (now_ms >= hold_until_ms_) (void)reporter_->Flush(*shim_);
  plan_sync_->Poll(static_cast<uint64_t>(now_ms) * 1000000ull, *store_);
}

}  // namespace ft::model
