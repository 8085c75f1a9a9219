// MasterLoop driven by Tick(now, unix_ms) against an in-memory Redis (redis/fake_store.h): no
// redis-server, no wall clock. Two masters on one FakeRedis are two FakeStores (two
// connections), each with its own injected faults. Workers are played by the test: it writes
// membership, progress, events and acks the way ftworker does.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ftmaster/master_loop.h"
#include "ftmaster/tests/job_fixture.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "redis/fake_store.h"

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

  Master MakeMaster(const std::string& id, const std::string& topology = "") {
    MasterOptions o;
    o.job = "job";
    o.id = id;
    o.config = Config::Defaults();
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

  // What workers write: membership, progress (every rank), the workers set.
  void Report() {
    for (proto::Membership& m : job_.membership) {
      server_.Execute({"HSET", keys_.Ranks(), std::to_string(m.rank), proto::Encode(m)});
      server_.Execute({"SADD", keys_.Workers(), m.node});
    }
    for (proto::RankProgress& p : job_.progress) {
      p.observed_unix_ms = UnixMs();
      server_.Execute({"HSET", keys_.Progress(), std::to_string(p.rank), proto::Encode(p)});
    }
  }

  // Ranks 1 and 2 wait on rank 3 (its dp and tp peers) in collective #11, for 5 s.
  void PeersWaitOnRank3() {
    job_.Set(1, job_.DpComm(1, 0), 11, 11, 10, 5000);
    job_.Set(2, job_.TpComm(1, 0), 11, 11, 10, 5000);
  }

  // `report`: the worker also rewrote the tables (else only the event carries the news, and
  // the window waits for fresh reports up to hang_window).
  void Exit(int rank, bool clean, int code, bool report = true) {
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
    e.message = "test";
    e.progress = job_.progress[static_cast<size_t>(rank)];
    server_.Execute({"XADD", keys_.Events(), "*", "kind", "exit", "rank", std::to_string(rank),
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
  EXPECT_EQ(server_.Members(keys_.Evicted()), (std::set<std::string>{"n1"}));
  EXPECT_EQ(State("job_state"), "stopping");
  proto::MasterAction action = StoredAction();
  EXPECT_EQ(action.decision, "save-then-stop");
  EXPECT_EQ(action.phase, "save");
  ASSERT_TRUE(action.sent);
  const std::vector<proto::Command> saves = CommandsFor("n0");
  ASSERT_EQ(saves.size(), 2u);  // ranks 0 and 1 (n1 is evicted)
  EXPECT_EQ(saves[0].kind, "save");
  EXPECT_TRUE(CommandsFor("n1").empty());

  // One save answers; the other never does: the save phase ends at its deadline (30 s).
  Ack(saves[0].id, "n0", saves[0].rank, "done");
  Run(29000, {&a});
  EXPECT_EQ(StoredAction().phase, "save") << "before the deadline the master waits";
  Run(1500, {&a});
  action = StoredAction();
  EXPECT_EQ(action.phase, "stop");
  EXPECT_EQ(action.nodes, (std::vector<std::string>{"n0", "n1"}));
  ASSERT_EQ(CommandsFor("n1").size(), 1u);
  EXPECT_EQ(CommandsFor("n1")[0].kind, "stop");

  // Both stops acknowledged: stopped at once, not at the stop deadline.
  Ack(fmt::format("{}-stop-n0", action.incident), "n0", -1, "done");
  Ack(fmt::format("{}-stop-n1", action.incident), "n1", -1, "done");
  Run(200, {&a});
  EXPECT_EQ(State("job_state"), "stopped");
  EXPECT_EQ(StoredAction().phase, "done");
  EXPECT_EQ(a.loop->job_state(), "stopped");
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
  EXPECT_EQ(a.loop->job_state(), "finished");
  EXPECT_TRUE(server_.Stream(keys_.Incidents()).empty());
  EXPECT_EQ(State("inferred_topology"), "tp=2,dp=2,pp=1") << "kept, not re-inferred";

  a.loop->Release();
  Master b = MakeMaster("b");
  Run(500, {&b});
  EXPECT_EQ(b.loop->job_state(), "finished");
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

}  // namespace
}  // namespace ft::master
