#include "tests/model/model_run.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <set>

#include "ftmaster/core/tests/job_fixture.h"
#include "ftmaster/master_loop.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "redis/fake/fake_store.h"
#include "tests/model/model_worker.h"

namespace ft::model {
namespace {

constexpr char kJob[] = "job";
constexpr int64_t kTickMs = 50;
constexpr int64_t kStart = master::testing::Job::kNow;
constexpr int64_t kLimitMs = 150000;   // a schedule that has not settled by then fails I1
constexpr int kStepsAfterRestore = 3;  // the last launch trains this far past its restore
constexpr int64_t kAimMs = 4000;
constexpr int64_t kQuietMs = 5000;  // the schedule runs on this long after its last fault       // a fault aimed at an update (or between steps) waits at most this

master::MasterLoop::Clock::time_point MonoOf(int64_t unix_ms) {
  return master::MasterLoop::Clock::time_point(std::chrono::hours(1000)) + std::chrono::milliseconds(unix_ms - kStart);
}

class Schedule {
 public:
  Schedule(const Draw& draw, const std::string& plan_dir, std::vector<std::string>* trace)
      : draw_(draw), trace_(trace), keys_(kJob), fixture_(draw.tp, draw.dp, 1, draw.ranks_per_node),
        rng_(draw.seed ^ 0x5eedull), job_(draw_, &rng_, [this](const std::string& s) { Trace(s); }) {
    server_.SetUnixMs(now_);
    for (int n = 0; n < draw.nodes; ++n) {
      std::vector<int> ranks;
      for (int r = 0; r < draw.world(); ++r) {
        if (r / draw.ranks_per_node == n) ranks.push_back(r);
      }
      workers_.push_back(std::make_unique<ModelWorker>(&server_, kJob, &keys_, fmt::format("n{}", n), ranks, plan_dir,
                                                       &fixture_, [this](const std::string& s) { Trace(s); }));
    }
    for (const char* id : {"a", "b"}) masters_.push_back(MakeMaster(id));
    for (const Fault& f : draw.faults) facts_.incident_fault |= f.kind == FaultKind::kKill ||
                                                               f.kind == FaultKind::kFailingExit ||
                                                               f.kind == FaultKind::kPreempt ||
                                                               f.kind == FaultKind::kKillDuringRecovery;
  }

  RunFacts Run();

 private:
  struct Master {
    redis::FakeStore* store = nullptr;  // owned by loop
    std::unique_ptr<master::MasterLoop> loop;
  };

  Master MakeMaster(const std::string& id) {
    master::MasterOptions o;
    o.job = kJob;
    o.id = id;
    o.config = Config::Defaults();
    o.config.sharded_optimizer = draw_.sharded;
    o.topology = fmt::format("tp={},dp={},pp=1", draw_.tp, draw_.dp);
    o.out = nullptr;
    auto store = std::make_unique<redis::FakeStore>(&server_, id);
    Master m;
    m.store = store.get();
    m.loop = std::make_unique<master::MasterLoop>(std::move(o), std::move(store));
    (void)m.loop->Init();
    return m;
  }

  void Trace(const std::string& line) {
    if (trace_ != nullptr) trace_->push_back(fmt::format("{:>8.2f}s {}", static_cast<double>(now_ - kStart) / 1000.0, line));
  }
  ModelWorker& WorkerOf(int rank) { return *workers_[static_cast<size_t>(rank / draw_.ranks_per_node)]; }
  ModelWorker* WorkerNamed(const std::string& node) {
    for (auto& w : workers_) {
      if (w->node() == node) return w.get();
    }
    return nullptr;
  }
  // The launch ends: the facts its relaunch is judged by, taken now.
  void NoteLaunchEnding(const std::string& cause, bool preempted) {
    if (ending_) return;
    ending_ = true;
    LaunchFacts f;
    f.launch = job_.launch() + 1;
    f.cause = cause;
    f.newest_whole = job_.NewestWholeEverywhere();
    f.newest_reached = job_.NewestReached();
    f.preempted = preempted;
    facts_.launches.push_back(f);
    Trace(fmt::format("launch {} ends ({}): newest step whole on every shard {}, newest step reached {}", job_.launch(),
                      cause, f.newest_whole, f.newest_reached));
  }
  void TearDown() {
    for (int r = 0; r < job_.world(); ++r) job_.Terminate(r, now_, /*by_worker=*/false);
  }
  bool FireFault(const Fault& f);
  void Step();
  void Collect();

  const Draw& draw_;
  std::vector<std::string>* trace_;
  redis::FakeRedis server_;
  proto::Keys keys_;
  master::testing::Job fixture_;
  std::mt19937_64 rng_;
  ModelJob job_;
  std::vector<std::unique_ptr<ModelWorker>> workers_;
  std::vector<Master> masters_;
  RunFacts facts_;
  int64_t now_ = kStart;
  bool ending_ = false;            // the launcher is tearing the launch down
  int64_t relaunch_at_ = -1;
  int64_t last_fault_ms_ = 0;
  int64_t recovery_launch_ms_ = -1;  // when the first relaunch after an incident started
  std::vector<std::pair<int64_t, std::string>> worker_restarts_;  // (when, node)
};

bool Schedule::FireFault(const Fault& f) {
  const int64_t at = kStart + f.at_ms;
  switch (f.kind) {
    case FaultKind::kKill:
    case FaultKind::kFailingExit:
    case FaultKind::kPreempt:
    case FaultKind::kKillDuringRecovery: {
      int64_t due = at;
      if (f.kind == FaultKind::kKillDuringRecovery) {
        if (recovery_launch_ms_ < 0) return false;
        due = recovery_launch_ms_ + f.at_ms;
      }
      if (now_ < due) return false;
      const int aim = f.rank >= 0 ? f.rank : 0;
      if (!job_.alive(aim) || ending_) return now_ >= due + kAimMs;  // nothing to hit: dropped
      const bool aimed = f.moment == 0 || (f.moment == 1 ? job_.in_update(aim) : !job_.in_update(aim));
      if (!aimed && now_ < due + kAimMs) return false;
      ++facts_.faults_fired;
      Trace(fmt::format("FAULT {}{}", FaultName(f.kind), f.rank >= 0 ? fmt::format(" rank {}", f.rank) : ""));
      if (f.kind == FaultKind::kPreempt) {
        NoteLaunchEnding("preempt", true);
        TearDown();
      } else {
        NoteLaunchEnding(FaultName(f.kind), false);
        if (f.kind == FaultKind::kFailingExit) {
          job_.FailExit(f.rank, now_);
        } else {
          job_.Kill(f.rank, now_);
        }
      }
      return true;
    }
    case FaultKind::kDelayReports:
      if (now_ < at) return false;
      ++facts_.faults_fired;
      Trace(fmt::format("FAULT worker {}'s writes held for {} ms", f.node, f.length_ms));
      WorkerNamed(f.node)->HoldWrites(now_ + f.length_ms);
      return true;
    case FaultKind::kWorkerRestart:
      if (now_ < at) return false;
      ++facts_.faults_fired;
      Trace(fmt::format("FAULT worker {} restarts ({} ms down)", f.node, f.length_ms));
      WorkerNamed(f.node)->Stop(f.clean);
      worker_restarts_.push_back({now_ + f.length_ms, f.node});
      return true;
    case FaultKind::kMasterFailover:
      if (now_ < at) return false;
      ++facts_.faults_fired;
      for (Master& m : masters_) {
        if (m.loop->leading(MonoOf(now_))) {
          Trace(fmt::format("FAULT master {} loses Redis for good", m.loop->id()));
          m.store->Drop();
          break;
        }
      }
      return true;
  }
  return true;
}

void Schedule::Step() {
  now_ += kTickMs;
  server_.SetUnixMs(now_);
  for (auto it = worker_restarts_.begin(); it != worker_restarts_.end();) {
    if (now_ >= it->first) {
      WorkerNamed(it->second)->Start(now_);
      it = worker_restarts_.erase(it);
    } else {
      ++it;
    }
  }
  job_.Tick(now_, [this](int rank) { return WorkerOf(rank).plan_path(); });
  // A teardown ends ranks still restoring at once, and their exits are noted only then: take
  // them in this tick too, or the launcher would read them as ends of the launch it starts next.
  for (std::vector<ExitNote> exits = job_.TakeExits(); !exits.empty(); exits = job_.TakeExits()) {
    for (const ExitNote& e : exits) {
      WorkerOf(e.rank).OnExit(e);
      if (!ending_) {
        // Not one of the draw's faults: a stop by the master, or a failed restore's end.
        NoteLaunchEnding(e.stopped_by_worker ? "the master's stop" : "unplanned end", false);
      }
      TearDown();  // the launcher ends the rest (idempotent)
    }
  }
  for (const SaveAck& a : job_.TakeAcks()) WorkerOf(a.rank).OnAck(a);
  for (auto& w : workers_) w->Tick(now_, job_);
  for (Master& m : masters_) m.loop->Tick(MonoOf(now_), now_);
  if (ending_ && !job_.any_alive() && relaunch_at_ < 0) relaunch_at_ = now_ + draw_.relaunch_delay_ms;
  if (relaunch_at_ >= 0 && now_ >= relaunch_at_) {
    relaunch_at_ = -1;
    ending_ = false;
    job_.Launch(job_.launch() + 1, now_);
    if (recovery_launch_ms_ < 0) recovery_launch_ms_ = now_;
  }
}

void Schedule::Collect() {
  facts_.restores = job_.restores();
  facts_.last_launch = job_.launch();
  facts_.simulated_ms = now_ - kStart;
  std::set<std::string> incident_ids;
  for (const auto& e : server_.Stream(keys_.Incidents())) {
    for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
      if (e.fields[i] != "json") continue;
      proto::Incident inc;
      if (proto::Decode(e.fields[i + 1], &inc).ok()) {
        incident_ids.insert(inc.id);
        facts_.incidents.push_back(inc.kind + " " + inc.id);
      }
    }
  }
  for (const auto& w : workers_) {
    for (const auto& e : server_.Stream(keys_.Commands(w->node()))) {
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
        if (e.fields[i] != "json") continue;
        proto::Command c;
        if (!proto::Decode(e.fields[i + 1], &c).ok() || c.kind != "stop") continue;
        const size_t cut = c.id.rfind("-stop-");
        const std::string incident = cut == std::string::npos ? "" : c.id.substr(0, cut);
        facts_.stops.push_back(StopCommand{c.id, w->node(), incident_ids.count(incident) > 0});
      }
    }
  }
  if (auto text = server_.Get(keys_.Restore())) {
    proto::RestorePlan plan;
    if (proto::Decode(*text, &plan).ok()) {
      facts_.final_plan_step = plan.step;
      facts_.final_plan_settling = plan.settling;
    }
  }
  // I5, as far as the model sees: every worker stops cleanly; no plan file outlives them.
  for (auto& w : workers_) {
    w->Stop(/*clean=*/true);
    if (std::filesystem::exists(w->plan_path())) facts_.leftovers.push_back(w->plan_path());
    std::error_code ec;
    std::filesystem::remove(w->plan_path(), ec);
  }
}

RunFacts Schedule::Run() {
  for (auto& w : workers_) w->Start(now_);
  for (int i = 0; i < 4; ++i) Step();
  job_.Launch(1, now_);
  std::vector<bool> fired(draw_.faults.size(), false);
  while (now_ - kStart < kLimitMs) {
    Step();
    bool pending = false;
    for (size_t i = 0; i < draw_.faults.size(); ++i) {
      if (!fired[i] && FireFault(draw_.faults[i])) {
        fired[i] = true;
        last_fault_ms_ = now_;
      }
      pending |= !fired[i];
    }
    if (!pending && now_ >= last_fault_ms_ + kQuietMs && worker_restarts_.empty() && !ending_ && relaunch_at_ < 0 && job_.Settled(kStepsAfterRestore)) {
      facts_.settled = true;
      break;
    }
  }
  Trace(facts_.settled ? "settled" : "NOT settled within the limit");
  Collect();
  return facts_;
}

}  // namespace

RunFacts RunSchedule(const Draw& draw, const std::string& plan_dir, std::vector<std::string>* trace) {
  Schedule schedule(draw, plan_dir, trace);
  return schedule.Run();
}

}  // namespace ft::model
