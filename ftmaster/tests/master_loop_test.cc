// MasterLoop driven by Tick(now, unix_ms) against an in-memory Redis (redis/fake_store.h): no
// redis-server, no wall clock. Two masters on one FakeRedis are two FakeStores (two
// connections), each with its own injected faults. Workers are played by the test: it writes
// membership, progress, events and acks the way ftworker does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ftmaster/cli/cli.h"
#include "ftmaster/core/gone_nodes.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/core/save_outcome.h"
#include "ftmaster/core/tests/job_fixture.h"
#include "ftmaster/transfer_secret.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/notice.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "proto/master_codec.h"
#include "redis/fake/fake_store.h"
#include "tests/util/log_capture.h"

namespace ft::master {
namespace {

using Clock = MasterLoop::Clock;
using testing::Job;

constexpr int64_t kTickMs = 20;

class MasterLoopTest : public ::testing::Test {
 protected:
  struct Master {
    redis::FakeStore* store = nullptr;  // owned by loop
    std::unique_ptr<MasterLoop> loop;
  };

  MasterLoopTest() : keys_("job"), job_(2, 2, 1, 2) { server_.SetUnixMs(UnixMs()); }

  int64_t UnixMs() const { return Job::kNow + elapsed_ms_; }
  Clock::time_point Now() const { return Clock::time_point(std::chrono::hours(1000)) + std::chrono::milliseconds(elapsed_ms_); }

  Master MakeMaster(const std::string& id, const std::string& topology = "", Config config = Config::Defaults()) {
    MasterOptions o;
    o.job = "job";
    o.id = id;
    o.config = std::move(config);
    o.topology = topology;
    o.out = nullptr;
    auto store = std::make_unique<redis::FakeStore>(&server_, id);
    Master m;
    m.store = store.get();
    m.loop = std::make_unique<MasterLoop>(std::move(o), std::move(store));
    EXPECT_TRUE(m.loop->Init().ok());
    return m;
  }

  // Advances the shared clock (the server's too) by `ms`, ticking every master every kTickMs.
  void Run(int64_t ms, std::vector<Master*> masters) {
    for (int64_t t = 0; t < ms; t += kTickMs) {
      elapsed_ms_ += kTickMs;
      server_.SetUnixMs(UnixMs());
      for (Master* m : masters) m->loop->Tick(Now(), UnixMs());
    }
  }

  // What workers write: membership, progress (every rank), the workers set, their heartbeats.
  void Report() {
    for (proto::Membership& m : job_.membership) {
      server_.Execute({"HSET", keys_.Ranks(), std::to_string(m.rank), proto::Encode(m)});
      server_.Execute({"SADD", keys_.Workers(), m.node});
      server_.Execute({"SET", keys_.WorkerHeartbeat(m.node), "{}"});
    }
    for (proto::RankProgress& p : job_.progress) {
      p.observed_unix_ms = UnixMs();
      server_.Execute({"HSET", keys_.ProgressOf(p.rank), std::to_string(p.rank), proto::Encode(p)});
    }
  }

  // What one node's worker writes again after Redis lost its data: its ranks' membership
  // only (not the workers set, which its next heartbeat adds).
  void WriteMembershipOf(const std::string& node) {
    for (const proto::Membership& m : job_.membership) {
      if (m.node == node) server_.Execute({"HSET", keys_.Ranks(), std::to_string(m.rank), proto::Encode(m)});
    }
  }
  void WriteProgress() {
    for (proto::RankProgress& p : job_.progress) {
      p.observed_unix_ms = UnixMs();
      server_.Execute({"HSET", keys_.ProgressOf(p.rank), std::to_string(p.rank), proto::Encode(p)});
    }
  }

  // Ranks 1 and 2 wait on rank 3 (its dp and tp peers) in collective #11, for 5 s.
  void PeersWaitOnRank3() {
    job_.Set(1, job_.DpComm(1, 0), 11, 11, 10, 5000);
    job_.Set(2, job_.TpComm(1, 0), 11, 11, 10, 5000);
  }

  // Every rank's copy of step 20 (two shards, two replicas each), judged and planned.
  void PlanStep20(Master& a) {
    Report();
    for (int r = 0; r < 4; ++r) PutCopy(20, r, r % 2 == 0 ? 0xa0 : 0xb1);
    Run(6000, {&a});
  }
  // Every rank ends told to terminate (a teardown: no incident), at its node's time now.
  void EveryRankTornDown(Master& a) {
    for (int r = 0; r < 4; ++r) {
      job_.membership[static_cast<size_t>(r)].unix_ms = UnixMs();
      Exit(r, false, -15, true, 15);
    }
    Run(2000, {&a});
  }

  // Rank 3 crashes while its peers wait on it; every save fails and the stop is acknowledged:
  // the job is stopped. The action as stored.
  proto::MasterAction CrashOfRank3SavesFailStopped(Master& a) {
    PeersWaitOnRank3();
    Report();
    Run(100, {&a});
    Exit(3, false, -9);
    Run(1500, {&a});
    proto::MasterAction action = StoredAction();
    for (const SaveTarget& t : action.save) {
      Ack(fmt::format("{}-save-{}", action.incident, t.rank), t.node, t.rank, "failed");
    }
    Run(200, {&a});
    action = StoredAction();
    EXPECT_EQ(action.phase, proto::ActionPhase::kStop);
    for (const std::string& node : action.nodes) {
      Ack(fmt::format("{}-stop-{}", action.incident, node), node, -1, "done");
    }
    Run(200, {&a});
    return action;
  }

  // What the workers' summaries say each second for `seconds`: every rank computes 100 ms and
  // waits in its dp all-reduce for the slowest; rank 3 computes `factor` times that.
  void SummariesWithSlowRank3(Master& a, int seconds, double factor) {
    for (int s = 0; s < seconds; ++s) {
      for (int r = 0; r < 4; ++r) {
        proto::RankSummary sum;
        sum.rank = r;
        sum.node = job_.membership[static_cast<size_t>(r)].node;
        sum.unix_ms = UnixMs();
        sum.steps = static_cast<uint64_t>(10 * (s + 1));
        sum.compute_ms = r == 3 ? 100 * factor : 100;
        sum.step_p50_ms = 100 * factor + 20;
        proto::OpSummary op;
        op.comm_id = job_.DpComm(r % 2, 0);
        op.op = proto::OpKind::kAllReduce;
        op.count = 10;
        op.p50_ms = 100 * factor - sum.compute_ms + 20;
        sum.ops.push_back(op);
        server_.Execute({"HSET", keys_.SummaryOf(r), std::to_string(r), proto::Encode(sum)});
      }
      Run(1000, {&a});
    }
  }

  // tp=4 dp=2 (job_ made so by the caller): `seconds` one-second rounds of summaries in which
  // every rank computes alike and DP comm t's transfer takes transfer[t] ms.
  void SummariesWithLinks(std::vector<Master*> masters, int seconds, const std::vector<double>& transfer) {
    for (int s = 0; s < seconds; ++s) {
      for (int r = 0; r < 8; ++r) {
        proto::RankSummary sum;
        sum.rank = r;
        sum.node = job_.membership[static_cast<size_t>(r)].node;
        sum.unix_ms = UnixMs();
        sum.steps = static_cast<uint64_t>(10 * (s + 1));
        sum.compute_ms = 100;
        sum.step_p50_ms = 130;
        proto::OpSummary op;
        op.comm_id = job_.DpComm(r % 4, 0);
        op.op = proto::OpKind::kAllReduce;
        op.bucket = 2;
        op.count = 10;
        op.p50_ms = transfer[static_cast<size_t>(r % 4)];
        sum.ops.push_back(op);
        server_.Execute({"HSET", keys_.SummaryOf(r), std::to_string(r), proto::Encode(sum)});
      }
      Run(1000, masters);
    }
  }

  // `report`: the worker also rewrote the tables (else only the event carries the news, and
  // the window waits for fresh reports up to hang_window).
  void Exit(int rank, bool clean, int code, bool report = true, int terminated_by_signal = 0) {
    job_.membership[static_cast<size_t>(rank)].state = clean ? "exited" : "dead";
    job_.progress[static_cast<size_t>(rank)].state = clean ? "exited" : "dead";
    if (report) Report();
    proto::Event e;
    e.kind = "exit";
    e.rank = rank;
    e.node = job_.membership[static_cast<size_t>(rank)].node;
    e.unix_ms = UnixMs();
    e.code = code;
    e.clean = clean;
    e.terminated_by_signal = terminated_by_signal;
    e.terminate_unix_ms = terminated_by_signal > 0 ? UnixMs() - 50 : 0;
    e.message = "test";
    e.progress = job_.progress[static_cast<size_t>(rank)];
    server_.Execute({"XADD", keys_.Events(), "*", "kind", "exit", "rank", std::to_string(rank),
                     "node", e.node, "json", proto::Encode(e)});
  }

  // A worker's exit event of `rank`'s process `progress` (its incarnation): status 1, now; the
  // membership and tables are left as they are (a late report).
  void FailedExitOf(int rank, const proto::RankProgress& progress, int64_t unix_ms = 0) {
    proto::Event e;
    e.kind = "exit";
    e.rank = rank;
    e.node = job_.membership[static_cast<size_t>(rank)].node;
    e.unix_ms = unix_ms > 0 ? unix_ms : UnixMs();
    e.code = 1;
    e.message = fmt::format("rank {} exited with status 1", rank);
    e.progress = progress;
    server_.Execute({"XADD", keys_.Events(), "*", "kind", "exit", "rank", std::to_string(rank), "node", e.node,
                     "json", proto::Encode(e)});
  }

  // A worker's hardware event: `kind` on rank's GPU.
  void Hardware(int rank, const std::string& kind, int64_t value, bool critical) {
    proto::Event e;
    e.kind = "hardware";
    e.rank = rank;
    e.node = job_.membership[static_cast<size_t>(rank)].node;
    e.unix_ms = UnixMs();
    e.message = "test";
    e.hw.source = "nvml";
    e.hw.device = "0000:2a:00.0";
    e.hw.kind = kind;
    e.hw.value = value;
    e.hw.critical = critical;
    e.hw.ranks = {rank};
    e.hw.unix_ms = e.unix_ms;
    server_.Execute({"XADD", keys_.Events(), "*", "kind", "hardware", "rank", std::to_string(rank),
                     "node", e.node, "json", proto::Encode(e)});
  }

  void Ack(const std::string& id, const std::string& node, int rank, const std::string& result) {
    proto::CommandAck a;
    a.id = id;
    a.node = node;
    a.rank = rank;
    a.result = result;
    a.unix_ms = UnixMs();
    server_.Execute({"XADD", keys_.Acks(), "*", "id", id, "result", result, "json", proto::Encode(a)});
  }

  std::string State(const std::string& field) {
    return server_.HGet(keys_.MasterState(), field).value_or("");
  }
  proto::MasterAction StoredAction() {
    proto::MasterAction a;
    EXPECT_TRUE(proto::Decode(State("action"), &a).ok()) << State("action");
    return a;
  }
  std::vector<proto::Command> CommandsFor(const std::string& node) {
    std::vector<proto::Command> out;
    for (const auto& e : server_.Stream(keys_.Commands(node))) {
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
        if (e.fields[i] != "json") continue;
        proto::Command c;
        EXPECT_TRUE(proto::Decode(e.fields[i + 1], &c).ok());
        out.push_back(c);
      }
    }
    return out;
  }

  // What a worker reports for a committed copy: the copy in ft:{J}:ckpt:<step>, the step in
  // ft:{J}:ckpt:steps.
  // `saved_ms` (0: none): when the rank saved it — a restarted worker reports an old copy again,
  // unix_ms now and saved_unix_ms then.
  void PutCopy(int64_t step, int rank, uint64_t digest, std::vector<std::string> tiers = {"arena"},
               bool torn = false, std::string origin = "", int64_t saved_ms = 0) {
    proto::CkptCopy c;
    c.step = step;
    c.rank = rank;
    c.node = job_.membership[static_cast<size_t>(rank)].node;
    c.digest = digest;
    c.torn = torn;
    c.origin = !origin.empty() ? origin : torn ? "just-in-time" : "periodic";
    c.bytes = 4096;
    c.tiers = std::move(tiers);
    c.unix_ms = UnixMs();
    c.saved_unix_ms = saved_ms;
    server_.Execute({"HSET", keys_.CkptStep(step), std::to_string(rank), proto::Encode(c)});
    server_.Execute({"ZADD", keys_.CkptSteps(), std::to_string(step), std::to_string(step)});
  }
  void Relaunch() {
    for (proto::Membership& m : job_.membership) {
      m.state = "running";
      m.incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
    }
    for (proto::RankProgress& p : job_.progress) {
      p.state = "running";
      p.incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
    }
    Report();
  }
  proto::CkptRewinds Rewinds() {
    proto::CkptRewinds r;
    auto text = server_.Get(keys_.CkptRewinds());
    if (text) {
      EXPECT_TRUE(proto::Decode(*text, &r).ok()) << *text;
    }
    return r;
  }
  proto::RestorePlan Plan() {
    proto::RestorePlan p;
    auto text = server_.Get(keys_.Restore());
    if (text) {
      EXPECT_TRUE(proto::Decode(*text, &p).ok()) << *text;
    }
    return p;
  }
  proto::StepVerdict Verdict(int64_t step) {
    proto::StepVerdict v;
    auto text = server_.HGet(keys_.CkptVerdicts(), std::to_string(step));
    EXPECT_TRUE(text.has_value()) << "no verdict for step " << step;
    if (text) {
      EXPECT_TRUE(proto::Decode(*text, &v).ok()) << *text;
    }
    return v;
  }
  std::vector<proto::Incident> Incidents(const std::string& kind) {
    std::vector<proto::Incident> out;
    for (const auto& e : server_.Stream(keys_.Incidents())) {
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
        if (e.fields[i] != "json") continue;
        proto::Incident inc;
        EXPECT_TRUE(proto::Decode(e.fields[i + 1], &inc).ok());
        if (inc.kind == kind) out.push_back(inc);
      }
    }
    return out;
  }
  // A CLI command against the same server (a second connection).
  std::string Cli(Status (*command)(redis::Commands&, const CliOptions&, std::string*), bool json) {
    redis::FakeStore cli(&server_, "cli");
    EXPECT_TRUE(cli.Ensure(Now()));
    CliOptions o;
    o.job = "job";
    o.json = json;
    o.now_unix_ms = UnixMs();
    std::string out;
    Status s = command(cli, o, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  redis::FakeRedis server_;
  proto::Keys keys_;
  Job job_;
  int64_t elapsed_ms_ = 0;
};

TEST_F(MasterLoopTest, LeadsAndMarksTheJobRunning) {
  Master a = MakeMaster("a");
  Report();
  Run(100, {&a});
  EXPECT_TRUE(a.loop->leading(Now()));
  EXPECT_EQ(server_.Get(keys_.Leader()).value_or(""), "a");
  EXPECT_EQ(State("job_state"), "running");
  EXPECT_FALSE(a.loop->incident_open());
}

// One rank exits cleanly while the others run on (the end of a job, seen one rank at a
// time): no window, no incident. A crash opens one at once (below).
// A critical signal while the job runs is an incident at once (its node a suspect before
// anything fails), once; a crash on that node then evicts it, with the signal as the reason.
TEST_F(MasterLoopTest, HardwareSignalsAreReportedAndEvictTheNodeOfACrash) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Hardware(3, "xid", 13, false);  // an application's: kept as evidence, no incident
  Run(200, {&a});
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
  Hardware(3, "xid", 79, true);
  Run(200, {&a});
  ASSERT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  proto::Incident hw;
  const auto written = server_.Stream(keys_.Incidents());
  const auto& fields = written[0].fields;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i] == "json") {
      ASSERT_TRUE(proto::Decode(fields[i + 1], &hw).ok());
    }
  }
  EXPECT_EQ(hw.kind, "hardware");
  ASSERT_EQ(hw.suspects.size(), 1u);
  EXPECT_EQ(hw.suspects[0].rank, 3);
  EXPECT_EQ(hw.decision, "none");
  Hardware(3, "xid", 79, true);  // again: said once
  Run(200, {&a});
  EXPECT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  EXPECT_EQ(State("job_state"), "running") << "a signal alone stops nothing";

  Exit(3, false, -9, /*report=*/true);
  Run(1500, {&a});
  EXPECT_EQ(server_.Members(keys_.Evicted()), (std::set<std::string>{"n1"}));
  EXPECT_NE(State("evicted_why:n1").find("Xid 79"), std::string::npos) << State("evicted_why:n1");
}

TEST_F(MasterLoopTest, ACleanExitAloneOpensNoWindow) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  Run(100, {&a});
  Exit(3, true, 0);
  Run(kTickMs, {&a});
  EXPECT_FALSE(a.loop->incident_open());
  EXPECT_TRUE(State("open_incident").empty());
  Run(2000, {&a});
  EXPECT_EQ(a.loop->stats().windows, 0u) << "nothing to attribute";
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
}

// An uncaught exception ends a rank through its exit path with status 1: a crash like a
// SIGKILL, never the job finishing — also as an older worker wrote it (clean, code 1) — and the
// incident gives the status, not "code 0".
TEST_F(MasterLoopTest, AFailingExitStatusIsACrashNotAFinish) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  Run(100, {&a});
  Exit(3, /*clean=*/true, /*code=*/1);
  Run(2500, {&a});
  for (int r = 0; r < 3; ++r) Exit(r, true, 0);  // the others end cleanly after it
  Run(2500, {&a});
  const std::vector<proto::Incident> crashes = Incidents("crash");
  ASSERT_EQ(crashes.size(), 1u);
  ASSERT_FALSE(crashes[0].suspects.empty());
  EXPECT_EQ(crashes[0].suspects[0].rank, 3);
  EXPECT_NE(proto::Encode(crashes[0]).find("exited with status 1"), std::string::npos) << proto::Encode(crashes[0]);
  EXPECT_NE(State("job_state"), "finished");
  EXPECT_NE(a.loop->job_state(), proto::JobState::kFinished);
}

// A preempted rank's exit (told to terminate) closes its window with no incident; its peers,
// still waiting on it a second later (their own termination saves, one step more), open another
// window by their timeouts: still the teardown, not a crash that stops the job (a campaign seed).
TEST_F(MasterLoopTest, PeersWaitingOnAPreemptedRankInALaterWindowAreNoCrash) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  for (size_t r = 0; r < job_.membership.size(); ++r) {
    job_.membership[r].incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
    job_.progress[r].incarnation = job_.membership[r].incarnation;
  }
  Report();
  Run(100, {&a});
  Exit(3, false, -15, true, /*terminated_by_signal=*/15);
  Run(1500, {&a});
  ASSERT_FALSE(a.loop->incident_open());
  PeersWaitOnRank3();
  Report();
  proto::Event e;
  e.kind = "timeout";
  e.rank = 1;
  e.node = job_.membership[1].node;
  e.unix_ms = UnixMs();
  e.comm_id = job_.DpComm(1, 0);
  e.seq = 11;
  e.message = "test";
  e.progress = job_.progress[1];
  server_.Execute({"XADD", keys_.Events(), "*", "kind", "timeout", "rank", "1", "node", e.node, "json",
                   proto::Encode(e)});
  Run(1500, {&a});
  EXPECT_TRUE(Incidents("crash").empty()) << "rank 3 was told to terminate";
  EXPECT_EQ(State("job_state"), "running");
}

// A worker restarted after its rank died reports the death late, when the rank's relaunch already
// runs (a newer incarnation in the membership): not an incident that would stop the relaunch.
TEST_F(MasterLoopTest, TheLateExitOfAProcessFromBeforeARelaunchIsNoIncident) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  const uint64_t old_incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
  for (size_t r = 0; r < job_.membership.size(); ++r) {
    job_.membership[r].incarnation = static_cast<uint64_t>(UnixMs() - 1000) * 1000000;  // the relaunch
    job_.progress[r].incarnation = job_.membership[r].incarnation;
  }
  Report();
  Run(2500, {&a});
  job_.progress[0].incarnation = old_incarnation;  // the event's process: the one before
  job_.progress[0].state = "dead";
  FailedExitOf(0, job_.progress[0]);
  Run(1500, {&a});
  EXPECT_FALSE(a.loop->incident_open());
  EXPECT_TRUE(Incidents("crash").empty());
  EXPECT_EQ(State("job_state"), "running");
}

// An exit the master reads seconds late, while its membership still names the dead process as
// the rank's (Redis restored from a snapshot taken before the relaunch registered it) and the
// other ranks already run the relaunch, started after the exit: whatever the window decides is
// for the processes that ran at the exit, so no command names a relaunched one and each carries
// the exit's time, before which the workers' newer processes did not start (campaign seed 1197:
// the relaunch was saved and stopped).
TEST_F(MasterLoopTest, AnExitReadLateCommandsNoProcessStartedAfterIt) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  const int64_t exit_ms = UnixMs() - 3000;
  const uint64_t relaunch = static_cast<uint64_t>(exit_ms + 500) * 1000000;
  for (size_t r = 0; r < job_.membership.size(); ++r) {
    job_.membership[r].incarnation = relaunch + r;
    job_.progress[r].incarnation = job_.membership[r].incarnation;
  }
  job_.membership[1].incarnation = static_cast<uint64_t>(exit_ms - 60000) * 1000000;  // the dead process
  job_.progress[1].incarnation = job_.membership[1].incarnation;
  Report();
  Run(2500, {&a});
  proto::RankProgress ended = job_.progress[1];
  ended.state = "dead";
  FailedExitOf(1, ended, exit_ms);
  Run(8000, {&a});
  size_t commands = 0;
  for (const std::string& node : {job_.membership[0].node, job_.membership[2].node}) {
    for (const proto::Command& c : CommandsFor(node)) {
      ++commands;
      EXPECT_LE(c.decided_unix_ms, exit_ms) << c.id;
      for (const proto::RankIncarnation& named : c.incarnations) {
        EXPECT_LT(named.incarnation, relaunch) << c.id << " names rank " << named.rank << "'s relaunched process";
      }
    }
  }
  EXPECT_GT(commands, 0u) << "the crash was decided and its commands sent";
}

// The same with a master that starts after both were written (its predecessor died while Redis
// was away; the workers flushed the exit and the relaunch's membership on reconnecting): it
// reads the membership before the events, so it does not take the old process's exit for a
// crash of the running job and stop the relaunch (a campaign seed: crash, ftmaster and Redis
// restarted, the relaunch in place stopped by the new master).
TEST_F(MasterLoopTest, ANewMasterReadsTheMembershipBeforeItsFirstEvents) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  const uint64_t old_incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
  for (size_t r = 0; r < job_.membership.size(); ++r) {
    job_.membership[r].incarnation = old_incarnation + r;
    job_.progress[r].incarnation = job_.membership[r].incarnation;
  }
  Report();
  Run(2500, {&a});
  ASSERT_EQ(State("job_state"), "running");
  // Master a is gone. Rank 3 failed; the launcher restarted every rank in place at once.
  proto::RankProgress ended = job_.progress[3];
  ended.state = "dead";
  FailedExitOf(3, ended);
  for (size_t r = 0; r < job_.membership.size(); ++r) {
    job_.membership[r].incarnation = static_cast<uint64_t>(UnixMs() + 100) * 1000000 + r;
    job_.progress[r].incarnation = job_.membership[r].incarnation;
  }
  Run(200, {});
  Report();
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(6000, {&b});
  EXPECT_EQ(server_.Get(keys_.Leader()).value_or(""), "b");
  EXPECT_FALSE(b.loop->incident_open());
  EXPECT_TRUE(Incidents("crash").empty());
  EXPECT_EQ(State("job_state"), "running");
}

// A crash opens a window; when it closes the incident is written once, the save goes to the
// healthy replica's node, and with no acknowledgement the stop follows at the save deadline.
TEST_F(MasterLoopTest, WindowCloseDecisionAndAckDeadlines) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  // The tables predate the event: the window waits for fresher ones, at most hang_window.
  Exit(3, false, -9, /*report=*/false);
  Run(kTickMs, {&a});
  EXPECT_TRUE(a.loop->incident_open());
  EXPECT_FALSE(State("open_incident").empty()) << "the window is persisted for a successor";
  Run(900, {&a});
  EXPECT_TRUE(a.loop->incident_open()) << "before hang_window (1 s)";
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
  Run(200, {&a});
  EXPECT_FALSE(a.loop->incident_open());
  ASSERT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  EXPECT_TRUE(server_.Members(keys_.Evicted()).empty())
      << "a crash with no evidence against its node restarts in place (hw_evidence.h)";
  EXPECT_EQ(State("job_state"), "stopping");
  proto::MasterAction action = StoredAction();
  EXPECT_EQ(action.decision, proto::DecisionKind::kSaveThenStop);
  EXPECT_EQ(action.phase, proto::ActionPhase::kSave);
  ASSERT_TRUE(action.sent);
  const std::vector<proto::Command> saves = CommandsFor("n0");
  ASSERT_EQ(saves.size(), 2u);  // ranks 0 and 1: every healthy replica saves
  EXPECT_EQ(saves[0].kind, "save");
  ASSERT_EQ(CommandsFor("n1").size(), 1u);  // rank 2, healthy on the evicted n1
  EXPECT_EQ(CommandsFor("n1")[0].rank, 2);

  // One save answers; the others never do: the save phase ends at its deadline (30 s), then
  // the done rank's copy is awaited (copy_wait, 5 s; it never comes here).
  Ack(saves[0].id, "n0", saves[0].rank, "done");
  Run(29000, {&a});
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kSave) << "before the deadline the master waits";
  Run(1500, {&a});
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kSave) << "the saved copy's report is awaited";
  Run(5000, {&a});
  action = StoredAction();
  EXPECT_EQ(action.phase, proto::ActionPhase::kStop);
  EXPECT_EQ(action.nodes, (std::vector<std::string>{"n0", "n1"}));
  ASSERT_EQ(CommandsFor("n1").size(), 2u);
  EXPECT_EQ(CommandsFor("n1")[1].kind, "stop");

  // Both stops acknowledged: stopped at once, not at the stop deadline.
  Ack(fmt::format("{}-stop-n0", action.incident), "n0", -1, "done");
  Ack(fmt::format("{}-stop-n1", action.incident), "n1", -1, "done");
  Run(200, {&a});
  EXPECT_EQ(State("job_state"), "stopped");
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kDone);
  EXPECT_EQ(a.loop->job_state(), proto::JobState::kStopped);
}

// Workers write calm ranks' tables only on a change (ftworker/report_pacing.h): the window's
// notice has them write every table, so it goes out as the window opens and its close follows
// the decision (proto/notice.h).
TEST_F(MasterLoopTest, AWindowIsNoticedWhenItOpensAndWhenItCloses) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  auto windows = [&] {
    std::vector<proto::Notice> out;
    for (const auto& e : server_.Stream(keys_.Notify())) {
      proto::Notice n;
      if (proto::ParseNotice(e.fields, &n).ok() && n.kind == proto::NoticeKind::kWindow) out.push_back(n);
    }
    return out;
  };
  EXPECT_TRUE(windows().empty()) << "no window, no notice";
  Exit(3, false, -9, /*report=*/false);
  Run(kTickMs, {&a});
  ASSERT_TRUE(a.loop->incident_open());
  std::vector<proto::Notice> seen = windows();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].open);
  EXPECT_FALSE(seen[0].window.empty());
  // It names the members of the dead rank's communicators (tp {2,3}, dp {1,3}): only their
  // tables are asked for at every report.
  ASSERT_TRUE(seen[0].ranks.has_value()) << "the window's members are known: named";
  EXPECT_EQ(seen[0].ranks->Format(), "1-3");
  Run(1200, {&a});
  ASSERT_FALSE(a.loop->incident_open());
  seen = windows();
  ASSERT_GE(seen.size(), 2u);
  for (size_t k = 0; k + 1 < seen.size(); ++k) {
    EXPECT_TRUE(seen[k].open) << "opened (and renewed every second while open), " << k;
    EXPECT_EQ(seen[k].window, seen[0].window);
  }
  EXPECT_FALSE(seen.back().open) << "then closed";
  EXPECT_EQ(seen.back().window, seen[0].window);
  Run(3000, {&a});
  EXPECT_EQ(windows().size(), seen.size()) << "nothing more once it closed";
}

// A leader cut off from Redis keeps believing it leads until its local deadline; meanwhile
// the lease expires on the server and another master takes it. Every write of the old leader
// is refused on the server (fenced), even though it still thinks it leads.
TEST_F(MasterLoopTest, LeaseFencingRefusesAStaleLeadersWrites) {
  Master a = MakeMaster("a");
  Master b = MakeMaster("b");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a, &b});
  ASSERT_TRUE(a.loop->leading(Now()));
  ASSERT_FALSE(b.loop->leading(Now()));
  // a's renewals fail from now on; b's lease attempts succeed once the key expires (2 s).
  a.store->FailCommand("RENEW", Status::Unavailable("injected"));
  // Only b ticks while the key runs out on the server (a is paused: a GC, a stopped VM).
  Run(2100, {&b});
  ASSERT_TRUE(b.loop->leading(Now()));
  EXPECT_EQ(server_.Get(keys_.Leader()).value_or(""), "b");
  // The worst case: a wakes with its own clock barely moved (its local deadline still
  // ahead), so it still believes it leads, and finds an event to act on.
  Exit(3, false, -9);
  const int64_t b_elapsed = elapsed_ms_;
  elapsed_ms_ = 200;
  const uint64_t fenced_before = a.loop->stats().fenced_out;
  a.loop->Tick(Now(), UnixMs());
  elapsed_ms_ = b_elapsed;
  EXPECT_GT(a.loop->stats().fenced_out, fenced_before) << "a's cursor write must be refused";
  EXPECT_EQ(State("events_cursor"), "") << "nothing of a's reached the hash";
  // b, the real leader, reads the event and decides.
  Run(1500, {&b});
  EXPECT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  EXPECT_FALSE(State("events_cursor").empty());
}

// The leader dies with a window open; the standby takes over after the lease, continues the
// window from `open_incident` and decides it; the incident is written exactly once even when
// the old leader comes back and ticks again.
TEST_F(MasterLoopTest, TakeoverContinuesTheWindowAndWritesOnce) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a, &b});
  ASSERT_TRUE(a.loop->leading(Now()));
  Exit(3, false, -9, /*report=*/false);
  Run(kTickMs * 2, {&a, &b});
  ASSERT_TRUE(a.loop->incident_open());
  a.store->Drop();  // a loses Redis for good
  Run(3000, {&a, &b});
  EXPECT_FALSE(a.loop->leading(Now()));
  ASSERT_TRUE(b.loop->leading(Now()));
  EXPECT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  EXPECT_EQ(State("job_state"), "stopping");
  a.store->Restore();
  Run(3000, {&a, &b});
  EXPECT_EQ(server_.Stream(keys_.Incidents()).size(), 1u) << "decided once";
  EXPECT_TRUE(b.loop->leading(Now()));
}

// A Redis failure in the middle of a write loses nothing: the write is retried next round.
TEST_F(MasterLoopTest, AFailedIncidentWriteIsRetried) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  a.store->FailCommand("GATED_APPEND", Status::Unavailable("injected"));
  Exit(3, false, -9);
  Run(1500, {&a});
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
  EXPECT_TRUE(a.loop->incident_open());
  a.store->ClearFaults();
  Run(200, {&a});
  EXPECT_EQ(server_.Stream(keys_.Incidents()).size(), 1u);
  EXPECT_FALSE(a.loop->incident_open());
}

// Redis restarted empty and the workers wrote their ranks again, every one exited now, and
// counted ranks:version up to the value the master read before: the new term reads the hash
// whatever the version says, and the job is finished.
TEST_F(MasterLoopTest, AMembershipRedisLostIsReadAgainWhateverItsVersionSays) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  server_.Execute({"SET", keys_.RanksVersion(), "7"});
  Run(1500, {&a});
  ASSERT_EQ(State("job_state"), "running");

  server_.FlushAll();
  for (proto::Membership& m : job_.membership) m.state = "exited";
  Report();
  server_.Execute({"SET", keys_.RanksVersion(), "7"});
  Run(5000, {&a});
  EXPECT_EQ(State("job_state"), "finished") << "the hash read again: every rank exited";
}

// Every rank exits cleanly: the job is finished (not "running" forever), no incident, and the
// topology inferred while the ranks ran is kept although their departed memberships form no
// grid. A successor master reads the same.
TEST_F(MasterLoopTest, AJobWhoseRanksAllExitCleanlyIsFinishedAndKeepsItsTopology) {
  Master a = MakeMaster("a");  // no --topology: inferred from the communicators
  Report();
  Run(2500, {&a});
  EXPECT_EQ(State("inferred_topology"), "tp=2,dp=2,pp=1");
  EXPECT_EQ(State("inferred_order"), "tp-dp-pp");
  for (int r = 0; r < job_.world(); ++r) {
    job_.membership[static_cast<size_t>(r)].comms.clear();  // destroyed before exit
    job_.progress[static_cast<size_t>(r)].comms.clear();
  }
  for (int r = 0; r < job_.world(); ++r) Exit(r, true, 0);
  Run(5000, {&a});
  EXPECT_EQ(State("job_state"), "finished");
  EXPECT_EQ(a.loop->job_state(), proto::JobState::kFinished);
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
  EXPECT_EQ(State("inferred_topology"), "tp=2,dp=2,pp=1") << "kept, not re-inferred";

  a.loop->Release();
  Master b = MakeMaster("b");
  Run(500, {&b});
  EXPECT_EQ(b.loop->job_state(), proto::JobState::kFinished);
  EXPECT_EQ(State("inferred_topology"), "tp=2,dp=2,pp=1");

  // The job launched again: watched again.
  for (proto::Membership& m : job_.membership) {
    m.state = "running";
    m.incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
  }
  Report();
  Run(2500, {&b});
  EXPECT_EQ(State("job_state"), "running");
}

// A finished job launched again whose first event is a crash, before the master's regular
// membership read: the relaunch is seen first (an ended job's membership is read every tick),
// and the crash is an incident, not an event of the finished run nor its teardown.
TEST_F(MasterLoopTest, ACrashRightAfterAFinishedJobIsLaunchedAgainIsAnIncident) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  Run(2500, {&a});
  for (int r = 0; r < job_.world(); ++r) Exit(r, true, 0);
  Run(5000, {&a});
  ASSERT_EQ(State("job_state"), "finished");
  const uint64_t relaunched = static_cast<uint64_t>(UnixMs()) * 1000000;
  for (proto::Membership& m : job_.membership) {
    m.state = "running";
    m.incarnation = relaunched;
  }
  for (proto::RankProgress& p : job_.progress) {
    p.state = "running";
    p.incarnation = relaunched;
  }
  Report();
  Exit(3, false, -9);  // at once: the master has not read the membership since
  Run(3000, {&a});
  const auto incidents = server_.Stream(keys_.Incidents());
  ASSERT_EQ(incidents.size(), 1u) << "the relaunch's crash was ignored as the finished run's";
  EXPECT_NE(State("job_state"), "finished");
}

// A job with a rank that died is not finished: it is a crash.
TEST_F(MasterLoopTest, NotFinishedWhenARankDidNotExitCleanly) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  Run(100, {&a});
  for (int r = 0; r < 3; ++r) Exit(r, true, 0);
  Exit(3, false, -9);
  Run(5000, {&a});
  EXPECT_NE(State("job_state"), "finished");
}

// A job_state this build does not know is no state: a standby reads it as unknown (reported, not
// taken for running or stopped); the leader of a new term reports it and watches the job.
TEST_F(MasterLoopTest, AnUnknownJobStateIsReportedAndANewLeaderWatchesTheJob) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  Run(100, {&a});
  ASSERT_EQ(State("job_state"), "running");
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(1500, {&a, &b});
  ASSERT_EQ(b.loop->job_state(), proto::JobState::kRunning) << "the standby polls the leader's state";
  server_.Execute({"HSET", keys_.MasterState(), "job_state", "paused"});
  const uint64_t bad_before = b.loop->bad_values().count();
  Run(1500, {&a, &b});
  EXPECT_EQ(b.loop->job_state(), std::nullopt);
  EXPECT_GT(b.loop->bad_values().count(), bad_before);

  a.loop->Release();
  const uint64_t bad_standby = b.loop->bad_values().count();
  Run(500, {&b});
  EXPECT_EQ(State("job_state"), "running");
  EXPECT_EQ(b.loop->job_state(), proto::JobState::kRunning);
  EXPECT_GT(b.loop->bad_values().count(), bad_standby) << "the new term's read reports it too";
}

// ---- checkpoints: verification, the restore plan, sdc ------------------------------------------

// Redis restarted empty: the copies are reported again and the plan published again under a
// version this master never published before — workers take an unchanged version for an
// unchanged plan, and the old plan 1 (step 100) must not stand for the new one (step 101).
TEST_F(MasterLoopTest, APlanPublishedAgainAfterRedisLostItsDataHasANewVersion) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 100);
  ASSERT_EQ(Plan().version, 1);

  server_.FlushAll();
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(101, r, r % 2 == 0 ? 0xa2 : 0xb3);
  Run(6000, {&a});
  EXPECT_EQ(Plan().step, 101);
  EXPECT_EQ(Plan().version, 2) << "not version 1 again";
  EXPECT_EQ(server_.Get(keys_.RestoreVersion()).value_or(""), "2");
}

// tp=2 dp=2: both replicas of each shard agree → verified, planned (version 1); a tier added to
// a copy of the planned step republishes it (version 2); nothing new → no republish.
TEST_F(MasterLoopTest, VerifiedStepIsPlannedAndTierChangesBumpTheVersion) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  proto::StepVerdict v = Verdict(100);
  EXPECT_EQ(v.state, proto::VerdictState::kVerified) << v.why;
  EXPECT_EQ(v.shards, 2);
  EXPECT_EQ(v.verified_shards, 2);
  EXPECT_EQ(v.copies, 4);
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, 100);
  EXPECT_EQ(plan.version, 1);
  EXPECT_EQ(server_.Get(keys_.RestoreVersion()).value_or(""), "1");
  ASSERT_EQ(plan.ranks.size(), 4u);
  EXPECT_EQ(plan.ranks[3].digest, 0xb1u);
  ASSERT_EQ(plan.ranks[3].sources.size(), 2u);
  EXPECT_EQ(plan.ranks[3].sources[0].rank, 3) << "its own copy first";
  EXPECT_EQ(plan.ranks[3].sources[1].rank, 1);
  EXPECT_EQ(plan.ranks[0].sources[1].rank, 2);

  PutCopy(100, 1, 0xb1, {"arena", "local"});
  Run(2500, {&a});  // the planned step is re-read every ckpt_refresh (2 s)
  plan = Plan();
  EXPECT_EQ(plan.version, 2);
  EXPECT_EQ(plan.ranks[1].sources[0].tiers, (std::vector<std::string>{"arena", "local"}));
  EXPECT_EQ(server_.Get(keys_.RestoreVersion()).value_or(""), "2");
  const uint64_t reads = a.loop->stats().ckpt_step_reads;
  Run(1000, {&a});
  EXPECT_EQ(Plan().version, 2) << "unchanged: not republished";
  EXPECT_LE(a.loop->stats().ckpt_step_reads, reads + 1) << "unchanged steps are not read again";

  // A successor continues the numbering and republishes nothing that did not change.
  a.loop->Release();
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(1000, {&b});
  EXPECT_EQ(Plan().version, 2);
  PutCopy(101, 0, 0xa0);
  PutCopy(101, 1, 0xb1);
  Run(1000, {&b});
  // What moved before its term is unknown to a successor: a newer step waiting for its replicas
  // keeps the plan settling for the settle window.
  EXPECT_EQ(Plan().version, 3);
  EXPECT_NE(Plan().settling.find("step 101 waits for its replicas"), std::string::npos) << Plan().settling;
  Run(5000, {&b});  // one replica per shard: judged at copy_wait
  EXPECT_EQ(Plan().step, 101);
  EXPECT_EQ(Plan().settling, "");
  EXPECT_EQ(Plan().version, 4);
}

// A checkpoint round held up (the master descheduled, a slow Redis reply) spaces the steady
// reads that follow by its cost, but not while the plan settles: relaunched ranks wait on it for
// at most FT_RESTORE_WAIT, and the replicas' deadline (copy_wait) passes by the clock. Spaced,
// the round after one of 600 ms came 7.2 s later, past the deadline.
TEST_F(MasterLoopTest, ASettlingPlanIsJudgedAtItsDeadlineAfterASlowRound) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 100);
  a.loop->Release();
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(1000, {&b});
  PutCopy(101, 0, 0xa0);
  PutCopy(101, 1, 0xb1);
  Run(1000, {&b});
  ASSERT_NE(Plan().settling.find("step 101 waits for its replicas"), std::string::npos) << Plan().settling;
  b.store->DelayOnce("HLEN", std::chrono::milliseconds(600));  // the round's count of a step's copies
  Run(5000, {&b});  // one replica per shard: judged at copy_wait
  EXPECT_EQ(Plan().step, 101) << Plan().settling;
  EXPECT_EQ(Plan().settling, "");
}

// tp=2 dp=2 on n0 {0,1}, n1 {2,3}: n1 joins the evicted set (a scheduler or the master wrote
// it) → republished with n1's copies last; once n1's worker is gone (its heartbeat expired)
// → republished with n1's arena copies no source: ranks 2 and 3 pull from n0. When every
// replica of the newest step is in gone evicted memory, the older step with a remote copy is
// planned instead.
// A node lost without an eviction (a preempted spot node that never comes back): its worker's
// heartbeat gone for GoneNodes::kGoneAfterMs, its copies stop being sources and the plan is
// republished with n0's alone; gone for less (a worker restarting), nothing moves; back, its
// copies count again.
TEST_F(MasterLoopTest, ANodeLostWithoutAnEvictionLeavesThePlan) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(3000, {&a});
  ASSERT_EQ(Plan().step, 100);
  ASSERT_EQ(Plan().ranks[2].sources.size(), 2u);
  const int64_t version = Plan().version;

  server_.Execute({"DEL", keys_.WorkerHeartbeat("n1")});
  Run(GoneNodes::kGoneAfterMs / 2, {&a});
  server_.Execute({"SET", keys_.WorkerHeartbeat("n1"), "{}"});  // a restarted worker: not lost
  Run(3000, {&a});
  server_.Execute({"DEL", keys_.WorkerHeartbeat("n1")});
  Run(GoneNodes::kGoneAfterMs / 2, {&a});
  EXPECT_EQ(Plan().version, version) << "no heartbeat for less than the wait: nothing moves";

  Run(GoneNodes::kGoneAfterMs, {&a});
  proto::RestorePlan plan = Plan();
  EXPECT_GT(plan.version, version) << "n1 lost: republished";
  EXPECT_EQ(plan.step, 100);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(plan.ranks[static_cast<size_t>(r)].sources.size(), 1u) << "rank " << r;
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources[0].node, "n0") << "rank " << r;
  }

  server_.Execute({"SET", keys_.WorkerHeartbeat("n1"), "{}"});
  Run(3000, {&a});
  EXPECT_EQ(Plan().ranks[2].sources.size(), 2u) << "n1 back: its copies are sources again";
}

// A master that took over after a node was lost never saw it beat, and the relaunch on a
// replacement moved its ranks' membership off it: the copies it reported, which the plan
// names, say it lived, and it is judged like any other (the campaign's seed 1112).
TEST_F(MasterLoopTest, ANodeLostBeforeThisMasterStartedIsJudgedByTheCopiesItReported) {
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);  // n1's worker saved 2, 3
  for (int r = 2; r < 4; ++r) job_.membership[static_cast<size_t>(r)].node = "n2";  // relaunched
  Report();
  server_.Execute({"DEL", keys_.WorkerHeartbeat("n1")});  // never beats while this master runs
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Run(3000, {&a});
  ASSERT_EQ(Plan().step, 100);
  ASSERT_EQ(Plan().ranks[2].sources.size(), 2u) << "n1's copy still named: not judged yet";
  const int64_t version = Plan().version;

  Run(GoneNodes::kGoneAfterMs, {&a});
  const proto::RestorePlan plan = Plan();
  EXPECT_GT(plan.version, version) << "n1 lost: republished";
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(plan.ranks[static_cast<size_t>(r)].sources.size(), 1u) << "rank " << r;
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources[0].node, "n0") << "rank " << r;
  }
}

// A node lost with its worker at a preemption: its ranks stay "running" in the membership for
// good (no worker reports their ends). They are no teardown's survivors whose last copies may
// still come: once the node counts as lost, the plan is final (seed 1113 kept it settling for
// as long as the job was not relaunched).
TEST_F(MasterLoopTest, ALostNodesRanksDoNotKeepThePlanSettling) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PlanStep20(a);
  ASSERT_EQ(Plan().step, 20);
  for (int r = 0; r < 2; ++r) {  // n0's ranks end told to; n1 goes with its ranks and worker
    job_.membership[static_cast<size_t>(r)].unix_ms = UnixMs();
    Exit(r, false, -15, true, 15);
  }
  server_.Execute({"DEL", keys_.WorkerHeartbeat("n1")});
  Run(3000, {&a});
  ASSERT_NE(Plan().settling.find("still run (2, 3)"), std::string::npos) << Plan().settling;

  Run(GoneNodes::kGoneAfterMs, {&a});
  const proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.settling, "") << "n1 lost: its ranks are not being stopped";
  EXPECT_EQ(plan.step, 20);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(plan.ranks[static_cast<size_t>(r)].sources.size(), 1u) << "rank " << r;
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources[0].node, "n0") << "rank " << r;
  }
}

TEST_F(MasterLoopTest, EvictionReordersAndRepublishesThePlan) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (const char* node : {"n0", "n1"}) server_.Execute({"SET", keys_.WorkerHeartbeat(node), "{}"});
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  ASSERT_EQ(Plan().version, 1);
  ASSERT_EQ(Plan().ranks[2].sources.size(), 2u);
  EXPECT_EQ(Plan().ranks[2].sources[0].rank, 2);

  server_.Execute({"SADD", keys_.Evicted(), "n1"});
  Run(1000, {&a});
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.version, 2) << "the evicted set moved: republished";
  ASSERT_EQ(plan.ranks[2].sources.size(), 2u);
  EXPECT_EQ(plan.ranks[2].sources[0].rank, 0) << "n1's copies last";
  EXPECT_EQ(plan.ranks[2].sources[1].rank, 2);
  EXPECT_EQ(plan.ranks[2].sources[1].tiers, (std::vector<std::string>{"arena"})) << "n1's worker still serves";

  server_.Execute({"DEL", keys_.WorkerHeartbeat("n1")});
  Run(1000, {&a});
  plan = Plan();
  EXPECT_EQ(plan.version, 3) << "n1's worker is gone: republished";
  EXPECT_EQ(plan.step, 100);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(plan.ranks[static_cast<size_t>(r)].sources.size(), 1u) << "rank " << r;
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources[0].rank, r % 2) << "rank " << r;
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources[0].node, "n0");
  }
  Run(1000, {&a});
  EXPECT_EQ(Plan().version, 3) << "nothing moved: not republished";

  // Step 99's copies reached the remote directory; step 100's only n0's and n1's memory.
  for (int r = 0; r < 4; ++r) PutCopy(99, r, r % 2 == 0 ? 0x90 : 0x91, {"remote"});
  server_.Execute({"SADD", keys_.Evicted(), "n0"});
  server_.Execute({"DEL", keys_.WorkerHeartbeat("n0")});
  Run(1000, {&a});
  plan = Plan();
  EXPECT_EQ(plan.version, 4);
  EXPECT_EQ(plan.step, 99) << "step 100 is held only in gone evicted memory";
  EXPECT_EQ(plan.ranks[3].sources[0].tiers, (std::vector<std::string>{"remote"}));

  // Step 100's copies reach the remote directory too (a field rewritten, HLEN unchanged): the
  // master re-reads the newer restorable step and plans it.
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1, {"arena", "remote"});
  Run(3000, {&a});
  plan = Plan();
  EXPECT_EQ(plan.step, 100);
  EXPECT_EQ(plan.ranks[0].sources[0].tiers, (std::vector<std::string>{"remote"}));
}

// tp=1 dp=4: one replica of four differs → an sdc incident naming it (once), the majority's
// digest planned, the odd copy no source.
TEST_F(MasterLoopTest, OddReplicaIsAnSdcIncidentAndTheMajorityIsPlanned) {
  Master a = MakeMaster("a", "tp=1,dp=4,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r == 1 ? 0xbad : 0x600d);
  Run(1000, {&a});
  proto::StepVerdict v = Verdict(100);
  EXPECT_EQ(v.state, proto::VerdictState::kVerified) << v.why;
  EXPECT_EQ(v.sdc_ranks, (std::vector<int>{1}));
  std::vector<proto::Incident> sdc = Incidents("sdc");
  ASSERT_EQ(sdc.size(), 1u);
  ASSERT_EQ(sdc[0].suspects.size(), 1u);
  EXPECT_EQ(sdc[0].suspects[0].rank, 1);
  EXPECT_EQ(sdc[0].suspects[0].node, "n0");
  EXPECT_EQ(sdc[0].decision, "none");
  EXPECT_NE(sdc[0].message.find("eviction candidate"), std::string::npos) << sdc[0].message;
  ASSERT_EQ(sdc[0].evidence.size(), 3u);
  EXPECT_NE(sdc[0].evidence[0].find("0000000000000bad"), std::string::npos) << sdc[0].evidence[0];
  EXPECT_NE(sdc[0].evidence[1].find("000000000000600d"), std::string::npos) << sdc[0].evidence[1];
  EXPECT_EQ(sdc[0].evidence[2], "hardware: none found on n0 from 60 s before the incident")
      << "the suspect's node's signals are looked for (hw_evidence.h)";
  EXPECT_TRUE(sdc[0].hardware_checked);
  EXPECT_TRUE(server_.Members(keys_.Evicted()).empty()) << "a candidate, not evicted";
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, 100);
  EXPECT_EQ(plan.ranks[1].digest, 0x600du);
  EXPECT_EQ(plan.ranks[1].sources[0].rank, 0) << "rank 1's own copy is the odd one: its node peer first";

  // Re-read (a copy's tiers change) and a successor: still one incident per (step, rank).
  PutCopy(100, 1, 0xbad, {"arena", "local"});
  Run(3000, {&a});
  a.loop->Release();
  Master b = MakeMaster("b", "tp=1,dp=4,pp=1");
  Run(1000, {&b});
  EXPECT_EQ(Incidents("sdc").size(), 1u);
}

// tp=2 dp=2, step by step: 100 verified; 200 two replicas disagree → untrusted, 100 stays
// planned; 300 a torn odd copy ignored, a single replica accepted → planned; 400 a shard
// missing → incomplete, 300 stays planned.
TEST_F(MasterLoopTest, UntrustedTornSingleReplicaAndMissingShardSteps) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, 0x100 + static_cast<uint64_t>(r % 2));
  Run(1000, {&a});
  EXPECT_EQ(Plan().step, 100);

  PutCopy(200, 0, 0x200);
  PutCopy(200, 2, 0x2ff);  // shard tp=0: two replicas, two digests
  PutCopy(200, 1, 0x201);
  PutCopy(200, 3, 0x201);
  Run(1000, {&a});
  proto::StepVerdict v = Verdict(200);
  EXPECT_EQ(v.state, proto::VerdictState::kUntrusted);
  EXPECT_EQ(v.verified_shards, 1);
  EXPECT_NE(v.why.find("not trusted"), std::string::npos) << v.why;
  EXPECT_TRUE(v.sdc_ranks.empty());
  EXPECT_EQ(Plan().step, 100) << "the previous restorable step";
  EXPECT_EQ(Plan().version, 1);
  EXPECT_TRUE(Incidents("sdc").empty());

  PutCopy(300, 0, 0x300);
  PutCopy(300, 2, 0x300);
  PutCopy(300, 1, 0xdead, {"arena"}, /*torn=*/true);
  PutCopy(300, 3, 0x301);
  Run(1000, {&a});
  v = Verdict(300);
  EXPECT_EQ(v.state, proto::VerdictState::kVerified) << v.why;
  EXPECT_EQ(v.copies, 3);
  EXPECT_TRUE(v.sdc_ranks.empty()) << "a torn copy is no evidence of corruption";
  EXPECT_NE(v.why.find("single copy, not cross-checked"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("1 torn copy ignored"), std::string::npos) << v.why;
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, 300);
  EXPECT_EQ(plan.version, 2);
  ASSERT_EQ(plan.ranks[1].sources.size(), 1u);
  EXPECT_EQ(plan.ranks[1].sources[0].rank, 3) << "the torn copy is no source";

  PutCopy(400, 0, 0x400);
  Run(1000, {&a});
  EXPECT_FALSE(server_.HGet(keys_.CkptVerdicts(), "400").has_value())
      << "1 of 4 replicas reported: no verdict before copy_wait";
  Run(5000, {&a});
  EXPECT_EQ(Verdict(400).state, proto::VerdictState::kIncomplete);
  EXPECT_TRUE(Verdict(400).Has(proto::VerdictReason::kPartialReport)) << "judged at the deadline: " << Verdict(400).why;
  EXPECT_EQ(Verdict(400).copies, 1) << "1 of 4 replicas reported";
  EXPECT_EQ(Plan().step, 300);

  // A step whose copies are all removed (retention) leaves the set, and its verdict goes.
  PutCopy(50, 0, 0x50);
  Run(6000, {&a});
  EXPECT_EQ(Verdict(50).state, proto::VerdictState::kIncomplete);
  server_.Execute({"DEL", keys_.CkptStep(50)});
  server_.Execute({"ZREM", keys_.CkptSteps(), "50"});
  Run(1000, {&a});
  EXPECT_FALSE(server_.HGet(keys_.CkptVerdicts(), "50").has_value());
  EXPECT_TRUE(server_.HGet(keys_.CkptVerdicts(), "100").has_value());

  // The CLI lists them, newest first, and names the planned step.
  const std::string text = Cli(CheckpointsCommand, false);
  EXPECT_NE(text.find("restore plan 2: step 300"), std::string::npos) << text;
  EXPECT_LT(text.find("       400  incomplete"), text.find("       300  verified")) << text;
  EXPECT_NE(text.find("<- restore"), std::string::npos) << text;
  EXPECT_NE(text.find("untrusted"), std::string::npos) << text;
  EXPECT_NE(text.find("SAVED BY"), std::string::npos) << text;
  EXPECT_NE(text.find("periodic 3, just-in-time 1"), std::string::npos) << "step 300's copies: " << text;
  nlohmann::json j = nlohmann::json::parse(Cli(CheckpointsCommand, true));
  EXPECT_EQ(j["plan"]["step"], 300);
  ASSERT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][0]["step"], 400);
  EXPECT_EQ(j["steps"][1]["state"], "verified");
  EXPECT_EQ(j["steps"][1]["planned"], true);
  EXPECT_EQ(j["steps"][1]["torn"], 1);
  EXPECT_EQ(j["steps"][1]["tiers"]["arena"], 4);
  EXPECT_EQ(j["steps"][1]["origins"]["periodic"], 3);
  EXPECT_EQ(j["steps"][1]["origins"]["just-in-time"], 1);
  EXPECT_EQ(j["steps"][2]["state"], "untrusted");
  EXPECT_EQ(j["steps"][3]["verified_shards"], 2);
}

// tp=1 dp=2: the replicas of a periodic save report a moment apart. The first copy alone is not
// judged (it would be accepted as a single replica, never compared); once its twin is in, the
// two are compared: they disagree, so the step is untrusted and the earlier step stays planned.
TEST_F(MasterLoopTest, AStepIsJudgedWhenEveryReplicaReportedNotOnTheFirstCopy) {
  Master a = MakeMaster("a", "tp=1,dp=2,pp=1");
  Report();
  for (int r = 0; r < 2; ++r) PutCopy(10, r, 0x10);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 10);
  EXPECT_FALSE(Verdict(10).Has(proto::VerdictReason::kPartialReport)) << "both were in: " << Verdict(10).why;

  PutCopy(20, 0, 0x20);
  const uint64_t reads = a.loop->stats().ckpt_step_reads;
  Run(3000, {&a});
  EXPECT_FALSE(server_.HGet(keys_.CkptVerdicts(), "20").has_value()) << "judged on one of two replicas";
  EXPECT_LE(a.loop->stats().ckpt_step_reads, reads + 3) << "a waiting step is read again only when a copy comes "
                                                           "(and the planned step on its refresh)";
  EXPECT_EQ(Plan().step, 10);
  PutCopy(20, 1, 0x2f);
  Run(1000, {&a});
  EXPECT_EQ(Verdict(20).state, proto::VerdictState::kUntrusted) << Verdict(20).why;
  EXPECT_EQ(Plan().step, 10);

  // A torn copy is a report too: the other replica's copy is judged at once, as a single one.
  PutCopy(30, 0, 0x30);
  PutCopy(30, 1, 0x3f, {"arena"}, /*torn=*/true);
  Run(1000, {&a});
  EXPECT_EQ(Verdict(30).state, proto::VerdictState::kVerified) << Verdict(30).why;
  EXPECT_EQ(Plan().step, 30);
}

// The just-in-time save: every healthy replica saves; their copies are verified and the plan
// published before the stop goes out; the incident records saved and verified shards and the
// step (`ftmaster incidents`, text and --json).
TEST_F(MasterLoopTest, SaveIsVerifiedAndPlannedBeforeTheStop) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  ASSERT_EQ(action.decision, proto::DecisionKind::kSaveThenStop);
  ASSERT_EQ(action.save.size(), 3u);  // ranks 0, 1, 2
  for (const SaveTarget& t : action.save) {
    PutCopy(50, t.rank, t.rank % 2 == 0 ? 0x50a : 0x50b);
    Ack(fmt::format("{}-save-{}", action.incident, t.rank), t.node, t.rank, "done");
    // The ack message as ftworker passes it on (shm/mailbox.h).
  }
  Run(200, {&a});
  action = StoredAction();
  EXPECT_EQ(action.phase, proto::ActionPhase::kStop);
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, 50) << "published before the stop";
  ASSERT_EQ(plan.ranks.size(), 4u);
  EXPECT_EQ(plan.ranks[3].sources[0].rank, 1) << "the crashed rank restores from its replica";
  EXPECT_EQ(Verdict(50).state, proto::VerdictState::kVerified);
  // Re-read on the planned step's refresh (3 of 4 replicas, copy_wait not over) while the
  // plan is rebuilt (n0 evicted too): judged for good by the save round, the step stays
  // planned — republished once, for the new source order, never withdrawn.
  for (const char* node : {"n0", "n1"}) server_.Execute({"SET", keys_.WorkerHeartbeat(node), "{}"});
  Run(2500, {&a});
  server_.Execute({"SADD", keys_.Evicted(), "n0"});
  Run(500, {&a});
  EXPECT_EQ(Plan().step, 50) << "withdrawn";
  EXPECT_EQ(Plan().version, plan.version + 1);
  SaveOutcome outcome;
  ASSERT_TRUE(DecodeSaveOutcome(State("checkpoint:" + action.incident), &outcome))
      << State("checkpoint:" + action.incident);
  EXPECT_EQ(outcome.shards, 2);
  EXPECT_EQ(outcome.saved, 2);
  EXPECT_EQ(outcome.verified, 2);
  EXPECT_EQ(outcome.step, 50);
  EXPECT_EQ(outcome.done, 3);
  EXPECT_EQ(State("checkpoint"), State("checkpoint:" + action.incident));

  const std::string text = Cli(IncidentsCommand, false);
  EXPECT_NE(text.find("checkpoint: saved 2 of 2 shards (3 ranks answered done), verified 2 at step 50"),
            std::string::npos) << text;
  const std::string json = Cli(IncidentsCommand, true);
  nlohmann::json line = nlohmann::json::parse(json.substr(0, json.find('\n')));
  EXPECT_EQ(line["kind"], "crash");
  EXPECT_EQ(line["checkpoint"]["verified"], 2);
  EXPECT_EQ(line["checkpoint"]["step"], 50);
}

// A launcher's teardown: the survivors are gone before the master's save reaches them (no
// ack), but their termination saves committed the step they completed. The save round counts
// nothing; the copies are verified after the fact, the plan restores them, and the incident
// says where the restored copies came from (text and --json).
TEST_F(MasterLoopTest, TheIncidentSaysTheRestoredCopiesCameFromTerminationSaves) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  ASSERT_EQ(action.decision, proto::DecisionKind::kSaveThenStop);
  for (int rank : {0, 1, 2}) PutCopy(60, rank, rank % 2 == 0 ? 0x60a : 0x60b, {"arena"}, false, "termination");
  Run(7000, {&a});  // copy_wait for rank 3's copy, which never comes
  EXPECT_EQ(Plan().step, 60);
  const std::string text = Cli(IncidentsCommand, false);
  EXPECT_NE(text.find("restore: plan " + std::to_string(Plan().version) + " restores step 60, its copies saved by "
                      "termination 3"),
            std::string::npos) << text;
  const std::string json = Cli(IncidentsCommand, true);
  nlohmann::json line = nlohmann::json::parse(json.substr(0, json.find('\n')));
  EXPECT_EQ(line["restore"]["step"], 60) << json;
  EXPECT_EQ(line["restore"]["saved_by"]["termination"], 3) << json;
}

// The acks carry the step; a copy reported late is still awaited (copy_wait), then judged.
TEST_F(MasterLoopTest, SaveWaitsForTheCopiesOfTheStepTheAcksName) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  ASSERT_EQ(action.save.size(), 3u);
  PutCopy(60, 0, 0x60a);  // an older step is in the set too: the acks say which one was saved
  PutCopy(61, 0, 0x61a);
  PutCopy(61, 2, 0x61a);
  for (const SaveTarget& t : action.save) {
    proto::CommandAck ack;
    ack.id = fmt::format("{}-save-{}", action.incident, t.rank);
    ack.node = t.node;
    ack.rank = t.rank;
    ack.result = "done";
    ack.message = "saved step=61 digest=0000000000000061 torn=0 bytes=4096 ms=3";
    ack.unix_ms = UnixMs();
    server_.Execute({"XADD", keys_.Acks(), "*", "id", ack.id, "result", "done", "json", proto::Encode(ack)});
  }
  Run(1000, {&a});
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kSave) << "rank 1's copy of step 61 is not reported yet";
  PutCopy(61, 1, 0x61b);
  Run(200, {&a});
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kStop);
  EXPECT_EQ(Plan().step, 61);
  SaveOutcome outcome;
  ASSERT_TRUE(DecodeSaveOutcome(State("checkpoint"), &outcome));
  EXPECT_EQ(outcome.step, 61);
  EXPECT_EQ(outcome.verified, 2);
}

// A rank whose save was torn (taken inside its update) reports no new copy: its arena keeps the
// whole one. The save does not wait the copy deadline for it.
TEST_F(MasterLoopTest, ATornSaveIsNotWaitedFor) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  ASSERT_EQ(action.save.size(), 3u);
  PutCopy(61, 0, 0x61a);
  PutCopy(61, 2, 0x61a);
  // Rank 1 answers with a torn save of step 61: no copy of step 61 comes from it.
  for (const SaveTarget& t : action.save) {
    proto::CommandAck ack;
    ack.id = fmt::format("{}-save-{}", action.incident, t.rank);
    ack.node = t.node;
    ack.rank = t.rank;
    ack.result = "done";
    ack.message = t.rank == 1 ? "saved step=61 digest=0000000000000062 torn=1 bytes=4096 ms=3"
                              : "saved step=61 digest=0000000000000061 torn=0 bytes=4096 ms=3";
    ack.unix_ms = UnixMs();
    server_.Execute({"XADD", keys_.Acks(), "*", "id", ack.id, "result", "done", "json", proto::Encode(ack)});
  }
  Run(1000, {&a});  // well within the 5 s copy deadline
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kStop) << "waited for a torn copy that never comes";
}

// Nothing registered: no checkpoint, no wait for copies, and the incident says why.
TEST_F(MasterLoopTest, NothingRegisteredIsRecordedInTheIncident) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  for (const SaveTarget& t : action.save) {
    Ack(fmt::format("{}-save-{}", action.incident, t.rank), t.node, t.rank, "nothing_registered");
  }
  Run(200, {&a});
  EXPECT_EQ(StoredAction().phase, proto::ActionPhase::kStop) << "no copy to wait for";
  SaveOutcome outcome;
  ASSERT_TRUE(DecodeSaveOutcome(State("checkpoint:" + action.incident), &outcome));
  EXPECT_EQ(outcome.saved, 0);
  EXPECT_EQ(outcome.nothing_registered, 3);
  EXPECT_EQ(Plan().step, -1) << "no checkpoint";
  const std::string text = Cli(IncidentsCommand, false);
  EXPECT_NE(text.find("the job is stopped without a checkpoint: nothing is registered — call ft_register"),
            std::string::npos) << text;
  nlohmann::json line = nlohmann::json::parse(Cli(IncidentsCommand, true));
  EXPECT_EQ(line["checkpoint"]["nothing_registered"], 3);
}

// A first launch has no history: no plan, the workers write `step none` at once. After a crash,
// copies newer than the plan that wait for their replicas make the plan settling — a relaunch
// that comes meanwhile waits; once they are judged the plan of their step is final, and stays.
TEST_F(MasterLoopTest, ACrashMakesThePlanSettleUntilItsCopiesAreJudged) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PeersWaitOnRank3();
  Report();
  Run(3000, {&a});
  EXPECT_FALSE(server_.Exists(keys_.Restore())) << "a first launch: nothing to settle, no plan";
  Exit(3, false, -9);
  Run(1500, {&a});
  proto::MasterAction action = StoredAction();
  for (const SaveTarget& t : action.save) {
    Ack(fmt::format("{}-save-{}", action.incident, t.rank), t.node, t.rank, "failed");
  }
  Run(200, {&a});
  action = StoredAction();
  for (const std::string& node : action.nodes) Ack(fmt::format("{}-stop-{}", action.incident, node), node, -1, "done");
  // The survivors' termination saves, then their ends.
  for (int r = 0; r < 3; ++r) PutCopy(30, r, r % 2 == 0 ? 0xa0 : 0xb1, {"arena"}, false, "termination");
  for (int r = 0; r < 3; ++r) Exit(r, false, -15);
  Run(1000, {&a});
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, -1);
  EXPECT_NE(plan.settling.find("step 30 waits for its replicas"), std::string::npos) << plan.settling;
  const int64_t settling_version = plan.version;
  Run(8000, {&a});
  plan = Plan();
  EXPECT_EQ(plan.step, 30);
  EXPECT_EQ(plan.settling, "") << "judged: final";
  EXPECT_GT(plan.version, settling_version);
  const int64_t final_version = plan.version;
  // The relaunch: new incarnations (started now). The final plan is not withdrawn.
  for (proto::Membership& m : job_.membership) {
    m.incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
    m.state = "running";
  }
  Report();
  Run(4000, {&a});
  EXPECT_EQ(Plan().version, final_version) << "once final, the plan stays until something newer is saved";
}

// Each node's newest end (an exit event without a clean finish, its time in that node's clock)
// is echoed in the plan, so a worker whose rank ended knows the plan was built on the copies it
// reported before the end; the echo is never lowered (a relaunch hides the end in the
// membership) and a new master keeps the last one's.
TEST_F(MasterLoopTest, ThePlanEchoesEachNodesNewestEndAndKeepsItAcrossARelaunchAndATakeover) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PlanStep20(a);
  ASSERT_EQ(Plan().step, 20);
  EXPECT_TRUE(Plan().ends_seen.empty()) << "nothing ended";
  // A preemption: each rank's second termination save (step 21) reported before its end.
  std::map<std::string, int64_t> ends;
  for (int r = 0; r < 4; ++r) {
    PutCopy(21, r, r % 2 == 0 ? 0xa1 : 0xb2, {"arena"}, false, "termination");
    ends[job_.membership[static_cast<size_t>(r)].node] = UnixMs();
    Exit(r, false, -15, true, /*terminated_by_signal=*/15);
  }
  ASSERT_EQ(ends.size(), 2u);
  Run(2000, {&a});
  proto::RestorePlan plan = Plan();
  EXPECT_EQ(plan.step, 21);
  EXPECT_EQ(plan.settling, "");
  EXPECT_EQ(plan.ends_seen, ends);
  Relaunch();
  Run(4000, {&a});
  EXPECT_EQ(Plan().ends_seen, ends) << "the relaunched ranks' memberships hide the ends: still echoed";
  a.loop->Release();
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(4000, {&b});
  EXPECT_EQ(Plan().ends_seen, ends) << "the new master starts from the published echo";
  const std::string node1 = job_.membership[1].node;
  Exit(1, false, -9);
  ends[node1] = UnixMs();
  Run(2000, {&b});
  EXPECT_EQ(Plan().ends_seen, ends) << "rank 1's node's newer end; the other node's kept";
}

// One plan per launch: once ranks of a relaunch restored from the published plan, a newer step
// (a late copy, a save) is not published until every rank of the launch restored; bounded, so
// ranks that never call ft_restore do not freeze the plan of a job that trains on.
TEST_F(MasterLoopTest, APlanStaysWhileItsLaunchRestoresThenMoves) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PlanStep20(a);
  ASSERT_EQ(Plan().step, 20);
  EveryRankTornDown(a);
  Relaunch();
  const int64_t version = Plan().version;
  for (int r = 0; r < 2; ++r) {
    job_.membership[static_cast<size_t>(r)].restored_step = 20;
    job_.membership[static_cast<size_t>(r)].restore_plan = version;
  }
  Report();
  Run(1000, {&a});
  for (int r = 0; r < 4; ++r) PutCopy(21, r, r % 2 == 0 ? 0xa2 : 0xb3);  // a late copy of a newer step
  Run(3000, {&a});
  EXPECT_EQ(Plan().step, 20) << "ranks 2 and 3 have not restored yet";
  EXPECT_EQ(Plan().version, version);
  for (int r = 2; r < 4; ++r) {
    job_.membership[static_cast<size_t>(r)].restored_step = 20;
    job_.membership[static_cast<size_t>(r)].restore_plan = version;
  }
  Report();
  Run(3000, {&a});
  EXPECT_EQ(Plan().step, 21) << "every rank of the launch restored";
  EXPECT_TRUE(Incidents("restore-mismatch").empty());
  // A launch whose ranks never all restore holds the plan at most a minute.
  EveryRankTornDown(a);
  Relaunch();
  for (int r = 0; r < 4; ++r) job_.membership[static_cast<size_t>(r)].restored_step = r == 0 ? 21 : -2;
  job_.membership[0].restore_plan = Plan().version;
  Report();
  Run(1000, {&a});
  for (int r = 0; r < 4; ++r) PutCopy(24, r, r % 2 == 0 ? 0xa4 : 0xb4);
  Run(20000, {&a});
  EXPECT_EQ(Plan().step, 21);
  Run(45000, {&a});
  EXPECT_EQ(Plan().step, 24) << "held at most a minute";
}

// A launch whose ranks restored different steps (a plan moved between their reads, a rank whose
// restore failed) trains a mixed state: an incident names the odd ranks and the job is stopped;
// once the launch is gone a rewind keeps what it saved past the step most ranks restored out of
// every plan. Ranks still running from before the newest end (a teardown's survivors) are not
// of the launch.
TEST_F(MasterLoopTest, ALaunchWhoseRanksRestoredDifferentStepsIsStoppedAndItsLaterCopiesNeverPlanned) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  PlanStep20(a);
  ASSERT_EQ(Plan().step, 20);
  // Rank 3 crashed; its relaunch restored step 20 while ranks 0-2 (the first launch, started from
  // scratch) are still being torn down: not a mismatch.
  for (int r = 0; r < 3; ++r) job_.membership[static_cast<size_t>(r)].restored_step = -1;
  job_.membership[3].unix_ms = UnixMs();
  Exit(3, false, -15, true, 15);  // a teardown: no incident (this test's is the mismatch)
  Run(200, {&a});
  job_.membership[3].state = "running";
  job_.membership[3].incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
  job_.membership[3].restored_step = 20;
  Report();
  Run(2000, {&a});
  EXPECT_TRUE(Incidents("restore-mismatch").empty()) << "the survivors of a teardown are not of the launch";
  // Every rank ended, then a relaunch: ranks 0-2 restored 20, rank 3 nothing.
  EveryRankTornDown(a);
  Relaunch();
  const int64_t version = Plan().version;
  for (int r = 0; r < 4; ++r) {
    job_.membership[static_cast<size_t>(r)].restored_step = r < 3 ? 20 : -1;
    job_.membership[static_cast<size_t>(r)].restore_plan = version;
  }
  Report();
  Run(1000, {&a});
  std::vector<proto::Incident> mismatch = Incidents("restore-mismatch");
  ASSERT_EQ(mismatch.size(), 1u);
  EXPECT_EQ(mismatch[0].decision, "stop");
  ASSERT_EQ(mismatch[0].suspects.size(), 1u);
  EXPECT_EQ(mismatch[0].suspects[0].rank, 3);
  EXPECT_NE(mismatch[0].message.find("3 ranks restored step 20"), std::string::npos) << mismatch[0].message;
  EXPECT_EQ(StoredAction().decision, proto::DecisionKind::kStop);
  EXPECT_FALSE(CommandsFor("n0").empty()) << "the job is stopped";
  // What the mixed launch saved before it ended: never planned.
  for (int r = 0; r < 4; ++r) PutCopy(21, r, r % 2 == 0 ? 0xa2 : 0xb3, {"arena"}, false, "termination");
  for (int r = 0; r < 4; ++r) {
    job_.membership[static_cast<size_t>(r)].unix_ms = UnixMs();
    Exit(r, false, -15, true, 15);
  }
  Run(8000, {&a});
  const proto::CkptRewinds rewinds = Rewinds();
  ASSERT_FALSE(rewinds.rewinds.empty());
  EXPECT_EQ(rewinds.rewinds.back().step, 20);
  EXPECT_NE(rewinds.rewinds.back().why.find("restored different steps"), std::string::npos) << rewinds.rewinds.back().why;
  EXPECT_TRUE(Verdict(21).Has(proto::VerdictReason::kSuperseded)) << Verdict(21).why;
  EXPECT_EQ(Plan().step, 20);
  EXPECT_EQ(Incidents("restore-mismatch").size(), 1u) << "once per launch";
}

// A job that finished and is launched again starts from scratch: the finished run's plan is
// withdrawn at the finish, and its copies — still in a tier, reported again by a restarted worker —
// are never planned again, even where the new run has only reached lower step numbers.
TEST_F(MasterLoopTest, AFinishedRunsCopiesAreNeverPlannedAgain) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(30, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 30);
  const int64_t saved_ms = UnixMs() - 1000;
  for (int r = 0; r < 4; ++r) job_.membership[static_cast<size_t>(r)].step = 60;  // past the save
  for (int r = 0; r < 4; ++r) Exit(r, true, 0);
  Run(10000, {&a});
  ASSERT_EQ(State("job_state"), "finished");
  EXPECT_EQ(Plan().step, -1) << "a launch after the finish restores nothing of the finished run";
  EXPECT_EQ(Plan().settling, "");
  ASSERT_EQ(Rewinds().rewinds.size(), 1u);
  EXPECT_EQ(Rewinds().rewinds[0].step, -1);
  EXPECT_TRUE(Verdict(30).Has(proto::VerdictReason::kSuperseded)) << Verdict(30).why;

  Relaunch();
  Run(1000, {&a});
  EXPECT_EQ(State("job_state"), "running");
  // A restarted worker reports the old copies again (a new report time, the old save time).
  for (int r = 0; r < 4; ++r) PutCopy(30, r, r % 2 == 0 ? 0xa0 : 0xb1, {"arena"}, false, "periodic", saved_ms);
  for (int r = 0; r < 4; ++r) PutCopy(20, r, r % 2 == 0 ? 0xc0 : 0xd1);  // the new run's save
  Run(2000, {&a});
  EXPECT_EQ(Plan().step, 20) << "the new run's step, not the finished run's step 30";
  EXPECT_EQ(Plan().ranks[0].digest, 0xc0u);

  // A successor reads the rewinds and keeps planning the same.
  a.loop->Release();
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1");
  Run(2000, {&b});
  EXPECT_EQ(Plan().step, 20);
}

// A job that saved the step it ended at stays restorable as a running job's: its newest
// trustworthy step — here, its end step 30 untrusted (two replicas disagree), step 20 — and no
// rewind is recorded. The step comes with the ranks' exits.
TEST_F(MasterLoopTest, AFinishAtASavedStepKeepsTheRunRestorable) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(20, r, r % 2 == 0 ? 0xa0 : 0xb1);
  for (int r = 0; r < 4; ++r) PutCopy(30, r, r == 3 ? 0xbad : r % 2 == 0 ? 0xa3 : 0xb3);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 20);
  for (int r = 0; r < 4; ++r) job_.membership[static_cast<size_t>(r)].step = 30;
  for (int r = 0; r < 4; ++r) Exit(r, true, 0);
  Run(10000, {&a});
  ASSERT_EQ(State("job_state"), "finished");
  EXPECT_TRUE(Rewinds().rewinds.empty());
  EXPECT_EQ(Plan().step, 20);
  EXPECT_EQ(Plan().settling, "");
  EXPECT_EQ(Verdict(20).state, proto::VerdictState::kVerified);
}

// A job that ended past its last checkpoint (step 60, saved at 30): the plan settles while the
// end step's copies may come, then none is planned — a launch after it starts from scratch.
TEST_F(MasterLoopTest, AFinishPastTheLastCheckpointPlansNothing) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(30, r, r % 2 == 0 ? 0xa3 : 0xb3);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 30);
  for (int r = 0; r < 4; ++r) job_.membership[static_cast<size_t>(r)].step = 60;
  for (int r = 0; r < 4; ++r) Exit(r, true, 0);
  Run(2000, {&a});
  ASSERT_EQ(State("job_state"), "finished");
  EXPECT_NE(Plan().settling.find("the job finished at step 60"), std::string::npos) << Plan().settling;
  Run(8000, {&a});
  ASSERT_EQ(Rewinds().rewinds.size(), 1u);
  EXPECT_EQ(Plan().step, -1);
  EXPECT_EQ(Plan().settling, "");
}

// A relaunch that restored step 30: the left run's copy of step 35 (one rank's, saved before the
// relaunch) is not judged beside the new run's step 35, whose copies then verify on their own.
TEST_F(MasterLoopTest, ARelaunchSupersedesTheLeftRunsLaterCopies) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(30, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  PutCopy(35, 0, 0xdead);  // the left run's rank 0 saved step 35 alone before the job stopped
  Run(6000, {&a});
  ASSERT_EQ(Plan().step, 30);
  ASSERT_EQ(Verdict(35).state, proto::VerdictState::kIncomplete);
  Run(1000, {&a});
  Relaunch();
  Run(10000, {&a});  // the relaunch's settling window passes; its rewind is stored
  ASSERT_EQ(Rewinds().rewinds.size(), 1u);
  EXPECT_EQ(Rewinds().rewinds[0].step, 30);
  EXPECT_EQ(Rewinds().rewinds[0].why, "a relaunch restored step 30");
  EXPECT_TRUE(Verdict(35).Has(proto::VerdictReason::kSuperseded)) << Verdict(35).why;
  // The new run reaches step 35 again: ranks 1-3 saved it, rank 0's field still holds the left
  // run's copy (its save is late). Judged with that copy, shard (tp 0) would be untrusted.
  for (int r = 1; r < 4; ++r) PutCopy(35, r, r % 2 == 0 ? 0xa5 : 0xb5);
  Run(6000, {&a});
  EXPECT_EQ(Verdict(35).state, proto::VerdictState::kVerified) << Verdict(35).why;
  EXPECT_EQ(Plan().step, 35);
  EXPECT_EQ(Plan().ranks[0].digest, 0xa5u) << "the new run's bytes";
}

// After a stop, the relaunched job (new incarnations) is watched again: running, the finished
// action cleared, and a new hang decided like a first one.
TEST_F(MasterLoopTest, RelaunchAfterAStopIsWatchedAgain) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  const proto::MasterAction first = CrashOfRank3SavesFailStopped(a);
  ASSERT_EQ(State("job_state"), "stopped");

  // Events of the stopped job are ignored while it is stopped.
  Exit(0, false, -15);
  Run(1500, {&a});
  EXPECT_FALSE(a.loop->incident_open());

  // The relaunch: every rank a new incarnation, idle.
  Job fresh(2, 2, 1, 2);
  job_ = fresh;
  for (proto::Membership& m : job_.membership) m.incarnation = static_cast<uint64_t>(UnixMs()) * 1000000;
  Report();
  Run(2500, {&a});
  EXPECT_EQ(State("job_state"), "running");
  EXPECT_EQ(a.loop->job_state(), proto::JobState::kRunning);
  EXPECT_FALSE(server_.HGet(keys_.MasterState(), "action").has_value()) << "the done action is cleared";
  EXPECT_FALSE(State("checkpoint:" + first.incident).empty()) << "the first incident's outcome stays";

  // A new crash in the new run: a new incident and a new save.
  PeersWaitOnRank3();
  Report();
  Run(100, {&a});
  Exit(3, false, -9);
  Run(1500, {&a});
  EXPECT_EQ(Incidents("crash").size(), 2u);
  proto::MasterAction second = StoredAction();
  EXPECT_NE(second.incident, first.incident);
  EXPECT_EQ(second.decision, proto::DecisionKind::kSaveThenStop);
  EXPECT_EQ(second.phase, proto::ActionPhase::kSave);
  EXPECT_EQ(State("job_state"), "stopping");
}

// A relaunch whose nodes' clocks run 30 s behind the master's: its processes "started" before
// the stop was decided by those clocks, yet they are not the processes the master knew when it
// decided, so the job is watched again (by the clocks the new run's events were dropped).
TEST_F(MasterLoopTest, ARelaunchIsSeenWhateverTheNodesClocksSay) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  for (proto::Membership& m : job_.membership) m.incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
  const proto::MasterAction first = CrashOfRank3SavesFailStopped(a);
  ASSERT_EQ(State("job_state"), "stopped");
  for (const proto::Command& c : CommandsFor("n0")) {
    if (c.kind == "stop") {
      EXPECT_EQ(c.incarnations.size(), 2u) << "both processes of n0 it knew are named";
    }
  }
  Job fresh(2, 2, 1, 2);
  job_ = fresh;
  for (proto::Membership& m : job_.membership) m.incarnation = static_cast<uint64_t>(UnixMs() - 30000) * 1000000;
  Report();
  Run(2500, {&a});
  EXPECT_EQ(State("job_state"), "running") << "the relaunch is watched although its clock says it started before the stop";
}

// Redis restarted empty while a rank crashed: the workers write their ranks again as each
// reconnects, n1 first; the workers set is empty (each worker adds itself again). The window
// waits for n0's ranks before deciding, so the healthy replica there saves (deciding without
// it: a stop without a checkpoint), and the stop goes to both nodes although the workers set
// names neither (a seeded campaign schedule: a stop that reached no node left the hung job hung
// until its launcher's timeout).
TEST_F(MasterLoopTest, AfterRedisLostTheMembershipTheWindowWaitsForItAndTheStopReachesEveryNode) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  for (proto::Membership& m : job_.membership) m.incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
  PeersWaitOnRank3();
  WriteMembershipOf("n1");
  WriteProgress();
  Run(100, {&a});
  job_.membership[3].state = "dead";
  job_.progress[3].state = "dead";
  WriteMembershipOf("n1");
  WriteProgress();
  Exit(3, false, -9, /*report=*/false);
  Run(2500, {&a});
  EXPECT_FALSE(server_.HGet(keys_.MasterState(), "action").has_value()) << "no decision without n0's ranks";
  EXPECT_TRUE(a.loop->incident_open());

  WriteMembershipOf("n0");  // n0's worker reconnected
  Run(500, {&a});
  proto::MasterAction action = StoredAction();
  ASSERT_EQ(action.decision, proto::DecisionKind::kSaveThenStop);
  bool saves_on_n0 = false;
  for (const SaveTarget& t : action.save) saves_on_n0 |= t.node == "n0";
  EXPECT_TRUE(saves_on_n0) << "rank 1, shard tp=1's healthy replica, saves";
  for (const SaveTarget& t : action.save) {
    Ack(fmt::format("{}-save-{}", action.incident, t.rank), t.node, t.rank, "failed");
  }
  Run(200, {&a});
  action = StoredAction();
  ASSERT_EQ(action.phase, proto::ActionPhase::kStop);
  EXPECT_EQ(action.nodes, (std::vector<std::string>{"n0", "n1"})) << "by the membership: the workers set is empty";
}

// The same, with n0's worker back only after the wait: the master decides without n0's ranks
// (a stop, no healthy replica of shard tp=1 known) and stops n1. When n0's ranks come, they are
// the processes of the run it stopped (started before the decision), not a relaunch: the job
// stays stopped and its action stays.
TEST_F(MasterLoopTest, RanksRedisLostThatComeBackAfterTheDecisionAreNoRelaunch) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  for (proto::Membership& m : job_.membership) m.incarnation = static_cast<uint64_t>(UnixMs() - 60000) * 1000000;
  PeersWaitOnRank3();
  job_.membership[3].state = "dead";
  job_.progress[3].state = "dead";
  WriteMembershipOf("n1");
  WriteProgress();
  Exit(3, false, -9, /*report=*/false);
  Run(9000, {&a});
  proto::MasterAction action = StoredAction();
  EXPECT_EQ(action.decision, proto::DecisionKind::kStop);
  ASSERT_EQ(action.phase, proto::ActionPhase::kStop);
  EXPECT_EQ(action.nodes, std::vector<std::string>{"n1"});
  Ack(fmt::format("{}-stop-n1", action.incident), "n1", -1, "done");
  Run(500, {&a});
  ASSERT_EQ(State("job_state"), "stopped");

  WriteMembershipOf("n0");
  Run(2500, {&a});
  EXPECT_EQ(State("job_state"), "stopped") << "n0's ranks started before the decision: no relaunch";
  EXPECT_TRUE(server_.HGet(keys_.MasterState(), "action").has_value()) << "the action stays";
}

// `ftmaster save`: one save-at-step command (rank -1) per worker, with the id it prints.
TEST_F(MasterLoopTest, SaveCommandAsksEveryWorker) {
  Report();
  const std::string text = Cli(SaveCommand, false);
  EXPECT_NE(text.find("save requested: "), std::string::npos) << text;
  for (const char* node : {"n0", "n1"}) {
    std::vector<proto::Command> commands = CommandsFor(node);
    ASSERT_EQ(commands.size(), 1u) << node;
    EXPECT_EQ(commands[0].kind, "save-at-step");
    EXPECT_EQ(commands[0].rank, -1);
    EXPECT_NE(text.find(commands[0].text), std::string::npos) << text;
    // For the processes started before it, by its time: the membership may not show a restart
    // in place yet, and a save naming the processes before it ran on other nodes only.
    EXPECT_TRUE(commands[0].incarnations.empty()) << node;
    EXPECT_EQ(commands[0].decided_unix_ms, UnixMs()) << node;  // the worker's cut (CommandStaleness)
  }
  nlohmann::json j = nlohmann::json::parse(Cli(SaveCommand, true));
  EXPECT_EQ(j["nodes"], nlohmann::json::array({"n0", "n1"}));
  EXPECT_EQ(CommandsFor("n0").size(), 2u);
  EXPECT_EQ(CommandsFor("n0")[1].text, j["id"].get<std::string>());
}

// `ftmaster checkpoints` with ft:{J}:prefetch: one line per replacement node (done or running,
// ranks ready, bytes and sources), one per failed rank, a report of another step than the
// plan's said to be stale, a garbled report skipped; --json carries the reports as they are.
TEST_F(MasterLoopTest, CheckpointsShowThePrefetchOfReplacementNodes) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  for (int r = 0; r < 4; ++r) PutCopy(100, r, r % 2 == 0 ? 0xa0 : 0xb1);
  Run(1000, {&a});
  ASSERT_EQ(Plan().step, 100);
  EXPECT_EQ(Cli(CheckpointsCommand, false).find("prefetch"), std::string::npos) << "no reports: nothing said";
  EXPECT_EQ(nlohmann::json::parse(Cli(CheckpointsCommand, true))["prefetch"], nlohmann::json::array());

  proto::PrefetchReport done;
  done.node = "n2";
  done.step = 100;
  done.state = proto::PrefetchState::kDone;
  done.started_unix_ms = UnixMs() - 3000;
  done.done_unix_ms = UnixMs() - 1200;
  done.pull_s = 1.8;
  for (int r = 2; r < 4; ++r) {
    done.ranks.push_back(proto::PrefetchRank{r, proto::PrefetchOutcome::kPulled, true, 3u << 20, 1.7, "n0", r - 2, "tcp", ""});
  }
  proto::PrefetchReport running;
  running.node = "n3";
  running.step = 100;
  running.state = proto::PrefetchState::kRunning;
  running.started_unix_ms = UnixMs() - 2500;
  running.ranks.push_back(proto::PrefetchRank{4, proto::PrefetchOutcome::kRunning, false, 0, 0, "", -1, "", ""});
  running.ranks.push_back(proto::PrefetchRank{5, proto::PrefetchOutcome::kFailed, false, 0, 0.2, "", -1, "", "n0: connection refused"});
  proto::PrefetchReport old = done;
  old.node = "n4";
  old.step = 90;
  server_.Execute({"HSET", keys_.Prefetch(), "n2", proto::Encode(done), "n3", proto::Encode(running), "n4",
                   proto::Encode(old), "n5", "{\"v\":1,\"node\":\"n5\"}"});

  const std::string text = Cli(CheckpointsCommand, false);
  EXPECT_NE(text.find("prefetch on replacement nodes:\n"
                      "  n2: done in 1.8 s, step 100: 2 of 2 ranks ready (2 pulled); 6.0 MiB pulled from n0 over tcp\n"
                      "  n3: running for 2.5 s, step 100: 0 of 2 ranks ready (1 failed, 1 running)\n"
                      "    rank 5 failed: n0: connection refused; its restore reads another source\n"
                      "  n4: done in 1.8 s, step 90: 2 of 2 ranks ready (2 pulled); 6.0 MiB pulled from n0 over tcp"
                      " — stale: the plan names step 100\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("n5"), std::string::npos) << "a garbled report is skipped";
  nlohmann::json j = nlohmann::json::parse(Cli(CheckpointsCommand, true));
  ASSERT_EQ(j["prefetch"].size(), 3u);
  EXPECT_EQ(j["prefetch"][0]["node"], "n2");
  EXPECT_EQ(j["prefetch"][0]["ranks"][1]["source"], "n0");
  EXPECT_EQ(j["prefetch"][1]["state"], "running");
  EXPECT_EQ(j["prefetch"][1]["ranks"][1]["error"], "n0: connection refused");
  EXPECT_EQ(j["prefetch"][2]["step"], 90);
  EXPECT_EQ(j["garbled_values"], 1);
}

// ---- the job's transfer secret -----------------------------------------------------------------

// The leader creates ft:{J}:transfer:secret (64 lowercase hex characters) at the start of its
// term; a standby does not write it; a successor and a restarted master keep it; no log line
// and no CLI output carries it.
TEST_F(MasterLoopTest, TransferSecretIsCreatedOnceKeptByEverySuccessorAndNeverPrinted) {
  ASSERT_TRUE(log::Configure("debug", "").ok());
  test_util::LogCapture log;
  Master a = MakeMaster("a");
  Master b = MakeMaster("b");
  Run(200, {&a, &b});
  ASSERT_TRUE(a.loop->leading(Now()));
  const std::string secret = server_.Get(keys_.TransferSecret()).value_or("");
  ASSERT_EQ(secret.size(), 64u);
  EXPECT_TRUE(IsTransferSecret(secret)) << "not lowercase hex";
  EXPECT_EQ(log.Count({"transfer secret", keys_.TransferSecret()}), 1u) << log.All();

  a.loop->Release();  // b takes over: a new term, the same secret
  Run(500, {&b});
  ASSERT_TRUE(b.loop->leading(Now()));
  EXPECT_EQ(server_.Get(keys_.TransferSecret()).value_or(""), secret);

  b.loop->Release();
  b.loop.reset();
  Master restarted = MakeMaster("a");  // the same id, a fresh process
  Run(500, {&restarted});
  ASSERT_TRUE(restarted.loop->leading(Now()));
  EXPECT_EQ(server_.Get(keys_.TransferSecret()).value_or(""), secret);

  Report();
  // (`ftmaster status` needs XLEN, which the fake does not speak: the e2e test reads it.)
  for (auto* command : {CheckpointsCommand, EvictedCommand, IncidentsCommand, TimeoutsCommand}) {
    for (bool json : {false, true}) {
      const std::string out = Cli(command, json);
      EXPECT_EQ(out.find(secret), std::string::npos) << out;
    }
  }
  EXPECT_EQ(log.All().find(secret), std::string::npos) << "the secret was logged";
  ASSERT_TRUE(log::Configure("info", "").ok());
}

// Two fresh secrets differ (getrandom, not a fixed seed).
TEST(TransferSecretTest, FreshSecretsAreHexAndDiffer) {
  std::string one, two;
  ASSERT_TRUE(NewTransferSecret(&one).ok());
  ASSERT_TRUE(NewTransferSecret(&two).ok());
  EXPECT_TRUE(IsTransferSecret(one)) << one;
  EXPECT_TRUE(IsTransferSecret(two)) << two;
  EXPECT_NE(one, two);
  EXPECT_FALSE(IsTransferSecret(std::string(64, 'A')));
  EXPECT_FALSE(IsTransferSecret(std::string(63, 'a')));
}

// Redis loses the secret (flushed, restarted without persistence): the leader creates a new
// one at its next check, and says so. A value it did not make is kept, with a warning.
TEST_F(MasterLoopTest, LostTransferSecretIsCreatedAgainAndAForeignOneIsKept) {
  ASSERT_TRUE(log::Configure("info", "").ok());
  test_util::LogCapture log;
  Master a = MakeMaster("a");
  Run(200, {&a});
  const std::string first = server_.Get(keys_.TransferSecret()).value_or("");
  ASSERT_TRUE(IsTransferSecret(first));
  server_.Execute({"DEL", keys_.TransferSecret()});
  Run(6000, {&a});
  const std::string second = server_.Get(keys_.TransferSecret()).value_or("");
  EXPECT_TRUE(IsTransferSecret(second));
  EXPECT_NE(second, first);
  EXPECT_EQ(log.Count({"was gone from Redis"}), 1u) << log.All();

  a.loop->Release();
  server_.Execute({"SET", keys_.TransferSecret(), "operator-chosen"});
  Master b = MakeMaster("b");
  Run(6000, {&b});
  EXPECT_EQ(server_.Get(keys_.TransferSecret()).value_or(""), "operator-chosen");
  EXPECT_EQ(log.Count({"holds 15 bytes"}), 1u) << log.All();
}

}  // namespace
}  // namespace ft::master

namespace ft::master {
namespace {

// 16k ranks (tp=8, dp=128, pp=16) on one core: the checkpoint round that judges a step of
// 16,384 copies and publishes its plan, then steady rounds with nothing new. The times are
// printed (machines differ); what is asserted is that a steady round reads no copies.
TEST(CkptScaleTest, JudgesAndPlans16kCopiesAndStaysCheapWhenNothingChanged) {
  redis::FakeRedis server;
  proto::Keys keys("big");
  const int64_t t0 = 1'700'000'000'000;
  server.SetUnixMs(t0);
  const int world = 8 * 128 * 16;
  for (int r = 0; r < world; ++r) {
    proto::CkptCopy c;
    c.step = 7000;
    c.rank = r;
    c.node = fmt::format("node{}", r / 8);
    c.digest = 0x1000 + static_cast<uint64_t>(r % 8 + 8 * (r / (8 * 128)));  // per (tp, pp)
    c.bytes = uint64_t{1} << 30;
    c.tiers = {"arena", "local"};
    c.unix_ms = t0;
    server.Execute({"HSET", keys.CkptStep(7000), std::to_string(r), proto::Encode(c)});
  }
  server.Execute({"ZADD", keys.CkptSteps(), "7000", "7000"});
  MasterOptions o;
  o.job = "big";
  o.id = "a";
  o.config = Config::Defaults();
  o.topology = "tp=8,dp=128,pp=16";
  o.out = nullptr;
  auto owned = std::make_unique<redis::FakeStore>(&server, "a");
  MasterLoop loop(std::move(o), std::move(owned));
  ASSERT_TRUE(loop.Init().ok());
  const Clock::time_point base(std::chrono::hours(1000));
  auto start = Clock::now();
  loop.Tick(base, t0);
  const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_EQ(loop.stats().plans_published, 1u);
  proto::RestorePlan plan;
  const std::string text = server.Get(keys.Restore()).value_or("");
  ASSERT_TRUE(proto::Decode(text, &plan).ok());
  EXPECT_EQ(plan.ranks.size(), static_cast<size_t>(world));
  EXPECT_EQ(plan.ranks[5].sources.size(), kMaxPlanSources);
  const uint64_t reads = loop.stats().ckpt_step_reads;
  start = Clock::now();
  for (int i = 1; i <= 10; ++i) loop.Tick(base + std::chrono::milliseconds(600 * i), t0 + 600 * i);
  const double steady_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count() / 10;
  std::printf("ckpt round at %d ranks: first (read, judge, plan of %.1f MB) %.0f ms; steady tick %.2f ms; "
              "step reads %llu\n", world, static_cast<double>(text.size()) / 1e6, first_ms, steady_ms,
              static_cast<unsigned long long>(loop.stats().ckpt_step_reads - reads));
  // The planned step is re-read on its refresh (for tier changes), spaced so that it takes a
  // small share of the loop: at most a few times in 6 s.
  EXPECT_LE(loop.stats().ckpt_step_reads - reads, 3u);
  EXPECT_EQ(loop.stats().plans_published, 1u) << "nothing changed: nothing republished";
}

// FT_SLOW_ACTION=evict: a rank 1.5x slower than its peers is named (decision none, with the cost
// arithmetic), and once it has qualified FT_SLOW_CONFIRM its node is evicted and the job stopped
// (each rank saves as it terminates): one second incident, the node in the eviction set, a stop
// command to every node, the eviction counted for the hourly budget.
TEST_F(MasterLoopTest, AStragglerWorthReplacingIsEvictedThroughAStop) {
  Config config = Config::Defaults();
  config.slow_action = "evict";
  config.slow_confirm = std::chrono::seconds(5);
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1", config);
  Report();
  SummariesWithSlowRank3(a, 12, 1.5);
  std::vector<proto::Incident> named = Incidents("straggler");
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].decision, "none");
  EXPECT_EQ(named[0].suspects[0].rank, 3);
  EXPECT_NE(named[0].message.find("evict n1 if the rank still qualifies"), std::string::npos) << named[0].message;
  EXPECT_TRUE(server_.Members(keys_.Evicted()).empty()) << "not before the confirmation";
  EXPECT_EQ(State("job_state"), "running");

  SummariesWithSlowRank3(a, 6, 1.5);
  named = Incidents("straggler");
  ASSERT_EQ(named.size(), 2u);
  const proto::Incident& evicting = named[1];
  EXPECT_EQ(evicting.decision, "stop");
  EXPECT_EQ(evicting.id.substr(evicting.id.size() - 18), "-straggler-3-evict");
  ASSERT_EQ(evicting.suspects.size(), 1u);
  EXPECT_EQ(evicting.suspects[0].node, "n1");
  EXPECT_NE(evicting.evidence[0].find("keep 500.0 s"), std::string::npos) << evicting.evidence[0];  // 50 ms x 10000
  EXPECT_EQ(server_.Members(keys_.Evicted()), std::set<std::string>{"n1"});
  EXPECT_EQ(StoredAction().decision, proto::DecisionKind::kStop);
  EXPECT_EQ(StoredAction().incident, evicting.id);
  EXPECT_FALSE(State("slow_evictions").empty());
  for (const char* node : {"n0", "n1"}) {
    std::vector<proto::Command> commands = CommandsFor(node);
    ASSERT_EQ(commands.size(), 1u) << node;
    EXPECT_EQ(commands[0].kind, "stop") << node;
  }
  // Still slow while it stops: no second eviction.
  SummariesWithSlowRank3(a, 5, 1.5);
  EXPECT_EQ(Incidents("straggler").size(), 2u);
}

// The default policy only reports, however long the rank stays slow; a slowdown that ends
// before FT_SLOW_CONFIRM is not evicted even when the policy would evict.
TEST_F(MasterLoopTest, AStragglerIsOnlyReportedByDefaultOrWhenItRecovers) {
  Master a = MakeMaster("a", "tp=2,dp=2,pp=1");
  Report();
  SummariesWithSlowRank3(a, 60, 1.5);
  std::vector<proto::Incident> named = Incidents("straggler");
  ASSERT_EQ(named.size(), 1u);
  EXPECT_NE(named[0].message.find("FT_SLOW_ACTION=report"), std::string::npos) << named[0].message;
  EXPECT_TRUE(server_.Members(keys_.Evicted()).empty());
  EXPECT_EQ(State("job_state"), "running");

  Config config = Config::Defaults();
  config.slow_action = "evict";
  Master b = MakeMaster("b", "tp=2,dp=2,pp=1", config);
  server_.FlushAll();
  Report();
  SummariesWithSlowRank3(b, 15, 1.5);  // named at about 10 s
  SummariesWithSlowRank3(b, 40, 1.0);  // recovered 5 s later: 30 s FT_SLOW_CONFIRM never reached
  EXPECT_EQ(Incidents("straggler").size(), 1u);
  EXPECT_TRUE(server_.Members(keys_.Evicted()).empty());
  EXPECT_EQ(State("job_state"), "running");
}

// A slow-link episode lives in the master hash: a master that takes over while the link stays
// slow names it again and writes no second incident; when the link recovers the field goes.
TEST_F(MasterLoopTest, ASlowLinkStaysOneIncidentAcrossATakeoverAndEndsWhenItRecovers) {
  job_ = Job(4, 2, 1, 4);  // DP comms {0,4} {1,5} {2,6} {3,7}: one role of four
  Master a = MakeMaster("a", "tp=4,dp=2,pp=1");
  Report();
  Run(100, {&a});
  ASSERT_TRUE(a.loop->leading(Now()));
  const std::vector<double> slow = {5, 25, 5, 5};
  SummariesWithLinks({&a}, 15, slow);
  ASSERT_EQ(Incidents("slow-link").size(), 1u);
  const std::string field = "slow-link:" + fmt::format("{:016x}", job_.DpComm(1, 0));
  EXPECT_EQ(State(field), Incidents("slow-link")[0].id);

  Master b = MakeMaster("b", "tp=4,dp=2,pp=1");
  a.store->Drop();  // a loses Redis for good; b takes over with the link still slow
  SummariesWithLinks({&a, &b}, 30, slow);
  ASSERT_TRUE(b.loop->leading(Now()));
  EXPECT_EQ(Incidents("slow-link").size(), 1u) << "the new leader named the standing link again";
  EXPECT_FALSE(State(field).empty());

  SummariesWithLinks({&a, &b}, 5, {5, 5, 5, 5});
  EXPECT_TRUE(State(field).empty()) << "the episode ended with the slowness";
  EXPECT_EQ(Incidents("slow-link").size(), 1u);
}

// A job that numbers its steps (ft_step_done) is shown at its own step in `ftmaster status`, not
// at the count of steps ft saw (a PyTorch job restored at step 1200 has seen 5); a job that says
// nothing is shown at the count.
TEST_F(MasterLoopTest, StatusShowsTheStepTheJobNumbersWhenItSaysIt) {
  for (int r = 0; r < 2; ++r) {
    proto::RankSummary sum;
    sum.rank = r;
    sum.node = job_.membership[static_cast<size_t>(r)].node;
    sum.unix_ms = UnixMs();
    sum.steps = r == 0 ? 5 : 7;
    sum.step_p50_ms = 250;
    if (r == 0) {
      sum.declared_step = 1234;
      sum.total_steps = 5000;
    }
    server_.Execute({"HSET", keys_.SummaryOf(r), std::to_string(r), proto::Encode(sum)});
  }
  const std::string text = Cli(StatusCommand, false);
  auto row_of = [&](int rank) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string first;
      if (words >> first && first == std::to_string(rank)) return line;
    }
    return std::string();
  };
  EXPECT_NE(row_of(0).find(" 1234 "), std::string::npos) << text;
  EXPECT_EQ(row_of(0).find(" 5 "), std::string::npos) << text;
  EXPECT_NE(row_of(1).find(" 7 "), std::string::npos) << text;
  EXPECT_NE(row_of(0).find("250"), std::string::npos) << text;  // the step time
}

}  // namespace
}  // namespace ft::master
