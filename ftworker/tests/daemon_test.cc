// ftworker's Daemon driven by Tick(mono_ns, unix_ms) against an in-memory Redis
// (redis/fake/fake_store.h) with injected faults: commands, acknowledgements, outages, a restarted
// worker. Ranks are synthetic segments (test_util.h); no redis-server, no wall clock.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ftworker/daemon.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/node_plan.h"
#include "proto/codec.h"
#include "redis/fake/fake_store.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr int kPid0 = 3'900'101;  // fake pids: FakeProbe answers for them
constexpr uint64_t kTickNs = 10 * kMs;

class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest() : job_(UniqueJob("dm")), keys_(job_), monitor_(MonitorOptions(job_, &probe_)) {
    store_ = NewDaemon(&daemon_);
  }

  redis::FakeStore* NewDaemon(std::unique_ptr<Daemon>* out) {
    DaemonOptions o;
    o.job = job_;
    o.node = "n1";
    o.host = "host-n1";
    o.config = Config::Defaults();
    o.config.ckpt_arena_dir = arena_dir_.path();  // the restore plan file goes there
    auto store = std::make_unique<redis::FakeStore>(&server_, "worker");
    redis::FakeStore* raw = store.get();
    *out = std::make_unique<Daemon>(o, &monitor_, std::move(store));
    return raw;
  }

  int64_t UnixMs() const { return 1'700'000'000'000 + static_cast<int64_t>((now_ - t0_) / kMs); }

  void TickFor(uint64_t ms, Daemon* daemon = nullptr) {
    for (uint64_t t = 0; t < ms * kMs; t += kTickNs) {
      now_ += kTickNs;
      server_.SetUnixMs(UnixMs());
      (daemon ? daemon : daemon_.get())->Tick(now_, UnixMs());
    }
  }

  std::string Command(const std::string& kind, int rank, const std::string& id,
                      std::vector<proto::RankIncarnation> incarnations = {},
                      int64_t decided_unix_ms = 0) {
    proto::Command c;
    c.id = id;
    c.kind = kind;
    c.rank = rank;
    c.grace_s = 1;
    c.text = "test";
    c.incarnations = std::move(incarnations);
    c.decided_unix_ms = decided_unix_ms;
    Reply r = server_.Execute({"XADD", keys_.Commands("n1"), "*", "kind", kind, "rank",
                               std::to_string(rank), "json", proto::Encode(c)});
    return r.str();
  }

  std::vector<proto::CommandAck> Acks() {
    std::vector<proto::CommandAck> out;
    for (const auto& e : server_.Stream(keys_.Acks())) {
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
        if (e.fields[i] != "json") continue;
        proto::CommandAck a;
        EXPECT_TRUE(proto::Decode(e.fields[i + 1], &a).ok());
        out.push_back(a);
      }
    }
    return out;
  }

  std::vector<proto::Event> Events(const std::string& kind) {
    std::vector<proto::Event> out;
    for (const auto& e : server_.Stream(keys_.Events())) {
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
        proto::Event ev;
        if (e.fields[i] == "json" && proto::Decode(e.fields[i + 1], &ev).ok() && ev.kind == kind) {
          out.push_back(ev);
        }
      }
    }
    return out;
  }

  using Reply = redis::Reply;
  std::string job_;
  proto::Keys keys_;
  TempDir arena_dir_{"daemon"};
  FakeProbe probe_;
  NodeMonitor monitor_;
  redis::FakeRedis server_;
  std::unique_ptr<Daemon> daemon_;
  redis::FakeStore* store_ = nullptr;
  const uint64_t t0_ = MonoNs();
  uint64_t now_ = t0_;
};

TEST_F(DaemonTest, ReportsItselfAndItsRanks) {
  FakeRank rank(job_, 0, kPid0, "n1");
  TickFor(300);
  EXPECT_TRUE(server_.Exists(keys_.WorkerHeartbeat("n1")));
  EXPECT_EQ(server_.Members(keys_.Workers()), (std::set<std::string>{"n1"}));
  EXPECT_TRUE(server_.HGet(keys_.Ranks(), "0").has_value());
  EXPECT_TRUE(server_.HGet(keys_.ProgressOf(0), "0").has_value());
}

// A stop for the whole node after its ranks are gone is done, and says so; it used to read
// as an error ("no_such_rank: no rank -1").
TEST_F(DaemonTest, StopAfterEveryRankExitedSaysNothingToStop) {
  {
    FakeRank rank(job_, 0, kPid0, "n1");
    TickFor(300);
    rank.Exit(0);
    probe_.procs[kPid0].exists = false;
    TickFor(300);
  }
  ASSERT_EQ(Events("exit").size(), 1u);
  Command("stop", -1, "inc-stop-n1");
  TickFor(300);
  std::vector<proto::CommandAck> acks = Acks();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, "done");
  EXPECT_EQ(acks[0].message, "nothing to stop: all 1 rank of node n1 already exited");
  EXPECT_TRUE(probe_.signals.empty());
}

TEST_F(DaemonTest, StopOnANodeThatNeverHadRanks) {
  TickFor(100);
  Command("stop", -1, "inc-stop-n1");
  TickFor(300);
  std::vector<proto::CommandAck> acks = Acks();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, "done");
  EXPECT_EQ(acks[0].message, "nothing to stop: no rank of the job runs on node n1");
  // A command for one rank that is not here is still an error.
  Command("save", 7, "inc-save-7");
  TickFor(300);
  acks = Acks();
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[1].result, "no_such_rank");
}

// The connection breaks while the acknowledgement is being written: the worker keeps it and
// delivers it once Redis is back; the command is not executed twice, and a restarted worker
// resumes after the cursor it persisted.
TEST_F(DaemonTest, AckSurvivesAnOutageAndARestartDoesNotRepeatCommands) {
  TickFor(100);
  const std::string id = Command("stop", -1, "inc-stop-n1");
  store_->FailCommand("XADD", Status::Unavailable("injected: connection reset"));
  TickFor(300);
  EXPECT_TRUE(Acks().empty());
  EXPECT_EQ(server_.Get(keys_.CommandCursor("n1")).value_or(""), id) << "executed, cursor kept";
  EXPECT_GT(daemon_->reporter().pending(), 0u);
  store_->ClearFaults();
  TickFor(300);
  ASSERT_EQ(Acks().size(), 1u);
  EXPECT_EQ(daemon_->reporter().pending(), 0u);

  std::unique_ptr<Daemon> restarted;
  NewDaemon(&restarted);
  TickFor(300, restarted.get());
  EXPECT_EQ(Acks().size(), 1u) << "a restarted worker resumed after the cursor";
}

// Commands act only on the process they were decided for: a stop or save written for an earlier
// incarnation of the rank (what a worker that lost its cursor replays after a relaunch), or
// for no named process before this one started, is acked "stale" and not executed.
TEST_F(DaemonTest, CommandsForAnotherIncarnationAreAckedStaleNotExecuted) {
  FakeRank rank(job_, 0, kPid0, "n1");
  TickFor(300);
  proto::Membership m;
  ASSERT_TRUE(proto::Decode(server_.HGet(keys_.Ranks(), "0").value_or(""), &m).ok());
  ASSERT_GT(m.incarnation, 0u);
  const int64_t before_start_ms = static_cast<int64_t>(m.incarnation / 1000000) - 60000;
  Command("stop", -1, "old-stop-n1", {{0, m.incarnation - 1}}, before_start_ms);
  Command("save", 0, "old-save-0", {{0, m.incarnation - 1}}, before_start_ms);
  Command("stop", -1, "unnamed-stop-n1", {}, before_start_ms);
  TickFor(300);
  std::vector<proto::CommandAck> acks = Acks();
  ASSERT_EQ(acks.size(), 3u);
  for (const proto::CommandAck& a : acks) {
    EXPECT_EQ(a.result, "stale") << a.id << ": " << a.message;
    EXPECT_EQ(a.rank, 0) << a.id;
  }
  EXPECT_TRUE(probe_.signals.empty()) << "a relaunched rank was stopped by its predecessor's stop";
  // The one written for this process runs.
  Command("stop", -1, "new-stop-n1", {{0, m.incarnation}}, before_start_ms + 120000);
  TickFor(300);
  acks = Acks();
  ASSERT_EQ(acks.size(), 4u);
  EXPECT_EQ(acks[3].result, "done") << acks[3].message;
  EXPECT_EQ(probe_.signals.size(), 1u);
}

// A rank this worker stopped (the master's stop) ended: the node's plan file says settling for
// a while, so ranks restarted in place at once wait for the plan made after the fault instead of
// reading the one from before it as final.
TEST_F(DaemonTest, ARankStoppedByThisWorkerSettlesThePlanFile) {
  FakeRank rank(job_, 0, kPid0, "n1");
  TickFor(1500);  // the plan of no checkpoint, read from Redis and written
  ckpt::NodePlan plan;
  const std::string path = ckpt::NodePlanPath(arena_dir_.path(), job_, "n1");
  ASSERT_TRUE(ckpt::ReadNodePlan(path, &plan).ok()) << path;
  ASSERT_EQ(plan.settling, "");
  Command("stop", -1, "stop-n1");
  TickFor(300);
  ASSERT_EQ(probe_.signals.size(), 1u);
  probe_.procs[kPid0].exists = false;  // died of the SIGTERM
  TickFor(300);
  ASSERT_TRUE(ckpt::ReadNodePlan(path, &plan).ok());
  EXPECT_NE(plan.settling.find("rank 0 of this node ended"), std::string::npos) << "'" << plan.settling << "'";
}

// After a save-then-stop the plan names the saved step, but a plan published after the stop
// need not hold the copies the stopped ranks saved on their way out: the file waits until the
// master's plan echoes this node's end (the exit event's time), and the copies went to Redis
// before the exit event.
TEST_F(DaemonTest, AStoppedRanksEndHoldsThePlanUntilTheMasterEchoesIt) {
  FakeRank rank(job_, 0, kPid0, "n1");
  proto::RestorePlan published;
  published.version = 3;
  published.step = 30;
  published.unix_ms = UnixMs();
  server_.Execute({"SET", keys_.Restore(), proto::Encode(published)});
  server_.Execute({"SET", keys_.RestoreVersion(), "3"});
  TickFor(1500);
  ckpt::NodePlan plan;
  const std::string path = ckpt::NodePlanPath(arena_dir_.path(), job_, "n1");
  ASSERT_TRUE(ckpt::ReadNodePlan(path, &plan).ok()) << path;
  ASSERT_EQ(plan.step, 30);
  proto::Membership m;
  ASSERT_TRUE(proto::Decode(server_.HGet(keys_.Ranks(), "0").value_or(""), &m).ok());
  Command("stop", -1, "stop-n1", {{0, m.incarnation}}, published.unix_ms - 500);  // decided before the plan
  TickFor(300);
  ASSERT_EQ(probe_.signals.size(), 1u);
  probe_.procs[kPid0].exists = false;
  TickFor(300);
  ASSERT_TRUE(ckpt::ReadNodePlan(path, &plan).ok());
  EXPECT_NE(plan.settling.find("rank 0 of this node ended"), std::string::npos) << "'" << plan.settling << "'";
  int64_t end_ms = -1;
  for (const auto& e : server_.Stream(keys_.Events())) {
    for (size_t i = 0; i + 1 < e.fields.size(); i += 2) {
      proto::Event event;
      if (e.fields[i] == "json" && proto::Decode(e.fields[i + 1], &event).ok() && event.kind == "exit") {
        end_ms = event.unix_ms;
      }
    }
  }
  ASSERT_GT(end_ms, 0) << "the exit event was reported";
  published.version = 4;
  published.ends_seen = {{"n1", end_ms}};
  server_.Execute({"SET", keys_.Restore(), proto::Encode(published)});
  server_.Execute({"SET", keys_.RestoreVersion(), "4"});
  TickFor(1500);
  ASSERT_TRUE(ckpt::ReadNodePlan(path, &plan).ok());
  EXPECT_EQ(plan.step, 30);
  EXPECT_EQ(plan.settling, "") << "the master's plan is built on what the stopped rank reported";
}

// A worker upgraded from the grouped layout (docs/redis-schema.md, "Slots") finds
// its cursor where the old worker kept it, and does not run the node's old commands again.
TEST_F(DaemonTest, AnUpgradedWorkerResumesAfterTheCursorOfTheOldLayout) {
  TickFor(100);
  const std::string id = Command("stop", -1, "inc-stop-n1");
  TickFor(300);
  ASSERT_EQ(Acks().size(), 1u);
  ASSERT_EQ(server_.Get(keys_.CommandCursor("n1")).value_or(""), id);
  // What an old worker left: the cursor in the node's group, none beside the stream.
  server_.Execute({"SET", keys_.LegacyCommandCursor("n1"), id});
  server_.Execute({"DEL", keys_.CommandCursor("n1")});
  EXPECT_EQ(keys_.CommandCursor("n1"), keys_.Commands("n1") + ":cursor");

  std::unique_ptr<Daemon> upgraded;
  NewDaemon(&upgraded);
  TickFor(300, upgraded.get());
  EXPECT_EQ(Acks().size(), 1u) << "the stop ran again after the upgrade";
}

// Detection goes on while Redis is away; what was seen is delivered when it is back.
TEST_F(DaemonTest, EventsSeenDuringAnOutageAreDeliveredAfterIt) {
  FakeRank rank(job_, 0, kPid0, "n1");
  TickFor(300);
  store_->Drop();
  rank.Exit(0);
  probe_.procs[kPid0].exists = false;
  TickFor(500);
  EXPECT_TRUE(Events("exit").empty());
  EXPECT_FALSE(daemon_->connected());
  store_->Restore();
  TickFor(300);
  ASSERT_EQ(Events("exit").size(), 1u);
  EXPECT_TRUE(Events("exit")[0].clean);
}

}  // namespace
}  // namespace ft::worker
