// RestorePlanSync on an in-memory Redis (redis/fake/fake_store.h): the plan file follows the
// master's plan, `step none` without one, a garbled plan keeps the old file, an unreachable
// Redis writes nothing, the tier directories are this worker's.
#include "ftworker/ckpt/restore_plan_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "redis/fake/fake_store.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr uint64_t kSec = 1'000'000'000;

class RestorePlanSyncTest : public ::testing::Test {
 protected:
  RestorePlanSyncTest() {
    options_.job = job_;
    options_.node = "node/1";  // sanitized in the file's name and contents
    options_.arena_dir = tmp_.path();
    options_.local_dir = "/nvme/ckpt";
    options_.remote_dir = "/shared/ckpt";
    (void)store_.Ensure(redis::Store::Clock::now());
  }

  void Publish(const proto::RestorePlan& plan) {
    server_.Execute({"SET", keys_.Restore(), proto::Encode(plan)});
    server_.Execute({"SET", keys_.RestoreVersion(), std::to_string(plan.version)});
  }
  ckpt::NodePlan ReadPlan(const RestorePlanSync& sync) {
    ckpt::NodePlan plan;
    Status s = ckpt::ReadNodePlan(sync.path(), &plan);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return plan;
  }

  std::string job_ = UniqueJob("ps");
  proto::Keys keys_{job_};
  TempDir tmp_{"plan"};
  redis::FakeRedis server_;
  redis::FakeStore store_{&server_, "worker"};
  RestorePlanSyncOptions options_;
};

TEST(ToNodePlanTest, CarriesThePlanWithThisWorkersDirectories) {
  proto::RestorePlan plan;
  plan.version = 7;
  plan.step = 40;
  plan.ranks.push_back({3, 0xabcull, {{3, "n2", {"local"}}}});
  plan.ranks.push_back({1, 0xdefull, {{1, "n1", {"arena", "local"}}, {5, "n 3", {"remote"}}}});
  RestorePlanSyncOptions o{.job = "j", .node = "n1", .arena_dir = "/dev/shm",
                           .local_dir = "/nvme", .remote_dir = ""};
  ckpt::NodePlan node = ToNodePlan(plan, o);
  EXPECT_EQ(node.version, 7);
  EXPECT_EQ(node.step, 40);
  EXPECT_EQ(node.arena_dir, "/dev/shm");
  EXPECT_EQ(node.local_dir, "/nvme");
  EXPECT_EQ(node.remote_dir, "");
  ASSERT_EQ(node.ranks.size(), 2u);
  EXPECT_EQ(node.ranks[0].rank, 1) << "sorted by rank";
  EXPECT_EQ(node.ranks[0].digest, 0xdefull);
  EXPECT_EQ(node.ranks[0].sources[1], (ckpt::PlanSource{5, "n_3", {"remote"}}));
  EXPECT_EQ(node.ranks[1].rank, 3);
  // It is a plan the file format accepts.
  ckpt::NodePlan back;
  Status s = ckpt::ParseNodePlan(ckpt::EncodeNodePlan(node), &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(back, node);
}

TEST_F(RestorePlanSyncTest, NoPlanInRedisIsStepNone) {
  RestorePlanSync sync(options_);
  sync.Poll(1 * kSec, store_);
  EXPECT_EQ(sync.files_written(), 1);
  EXPECT_EQ(sync.path(), ckpt::NodePlanPath(tmp_.path(), job_, "node_1"));
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, -1);
  EXPECT_EQ(plan.node, "node_1");
  EXPECT_TRUE(plan.ranks.empty());
  sync.Poll(3 * kSec, store_);
  EXPECT_EQ(sync.files_written(), 1) << "unchanged: not rewritten";

  RestorePlanSync never_wrote(options_);  // e.g. a second worker that never reached Redis
  never_wrote.RemoveFile();
  EXPECT_TRUE(std::filesystem::exists(sync.path())) << "only the writer removes the file";
  sync.RemoveFile();
  EXPECT_FALSE(std::filesystem::exists(sync.path()));
}

TEST_F(RestorePlanSyncTest, FollowsThePlanAndKeepsTheFileWhenAPlanIsGarbled) {
  LogCapture log;
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 2;
  published.step = 30;
  published.ranks.push_back({0, 0x1234ull, {{0, "node_1", {"arena"}}}});
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.version, 2);
  EXPECT_EQ(plan.step, 30);
  EXPECT_EQ(plan.local_dir, "/nvme/ckpt");
  EXPECT_EQ(plan.remote_dir, "/shared/ckpt");
  ASSERT_EQ(plan.ranks.size(), 1u);
  EXPECT_EQ(plan.ranks[0].digest, 0x1234ull);

  published.version = 3;
  published.step = 31;
  Publish(published);
  sync.Poll(1 * kSec + kSec / 2, store_);
  EXPECT_EQ(ReadPlan(sync).step, 30) << "polled about once a second, not every tick";
  sync.Poll(2 * kSec + kSec / 2, store_);
  EXPECT_EQ(ReadPlan(sync).step, 31);
  const ckpt::NodePlan good = ReadPlan(sync);

  server_.Execute({"SET", keys_.Restore(), "{\"v\":1,\"version\":4,\"step\":"});
  server_.Execute({"SET", keys_.RestoreVersion(), "4"});
  sync.Poll(4 * kSec, store_);
  sync.Poll(6 * kSec, store_);
  EXPECT_EQ(log.Count({"restore plan (version 4)", "unreadable", "keeping the plan file"}), 1u)
      << log.All();
  EXPECT_EQ(ReadPlan(sync), good);
}

// Relative tier directories are resolved against the worker's directory: the ranks may run
// elsewhere, and the file format takes absolute paths only.
TEST_F(RestorePlanSyncTest, TheMastersSettlingPlanIsWrittenSettling) {
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 4;
  published.settling = "an incident's decision is being carried out";
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, -1);
  EXPECT_EQ(plan.settling, "an incident's decision is being carried out");
  published.version = 5;
  published.settling.clear();
  Publish(published);
  sync.PollSoon();
  sync.Poll(1 * kSec + 1, store_);
  EXPECT_EQ(ReadPlan(sync).settling, "") << "final: step none now means start from scratch";
}

TEST_F(RestorePlanSyncTest, ARanksEndSettlesTheFileForAWhileTheMastersSettlingLonger) {
  options_.settle_for_ns = 3 * kSec;
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 2;
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(ReadPlan(sync).settling, "");
  sync.NoteRankEnded(3, "signal 9", 1 * kSec, 5000);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, -1);
  EXPECT_NE(plan.settling.find("rank 3 of this node ended (signal 9)"), std::string::npos) << plan.settling;
  published.version = 3;
  published.settling = "step 30 waits for its replicas' copies";
  Publish(published);
  sync.PollSoon();
  sync.Poll(2 * kSec, store_);
  EXPECT_EQ(ReadPlan(sync).settling, "step 30 waits for its replicas' copies") << "the master's reason first";
  published.version = 4;
  published.step = 30;
  published.settling.clear();
  published.ranks.push_back({3, 0x1234ull, {{1, "node0", {"arena"}}}});
  published.ends_seen = {{"node/1", 5000}};
  Publish(published);
  sync.PollSoon();
  sync.Poll(3 * kSec, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 30);
  EXPECT_EQ(plan.settling, "") << "a final step built after the end: restored at once, on every node alike";
  published.version = 5;
  published.step = -1;
  published.ranks.clear();
  Publish(published);
  sync.PollSoon();
  sync.Poll(3 * kSec + 1, store_);
  EXPECT_NE(ReadPlan(sync).settling, "") << "step none less than 3 s after the end: not yet the master's word";
  sync.Poll(4 * kSec + 1, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, -1);
  EXPECT_EQ(plan.settling, "");
}

// A worker restarted after Redis restarted empty: no plan in Redis, but this node's arenas hold
// committed copies of the job. Ranks relaunched now must wait for the master to judge them, not
// read `step none` and start from scratch beside peers on other nodes that restore (campaign
// seed 1176: the mixed launch was stopped as a restore mismatch). An empty arena says nothing.
TEST_F(RestorePlanSyncTest, CopiesOnTheNodeWithNoPlanInRedisSettleStepNone) {
  options_.end_wait_for_ns = 6 * kSec;
  {
    FakeArena empty(tmp_.path(), job_, 1, 4096);  // registered, never saved
    RestorePlanSync sync(options_);
    sync.Poll(1 * kSec, store_);
    EXPECT_EQ(ReadPlan(sync).settling, "") << "no copy: a new job starts at once";
    sync.RemoveFile();
  }
  FakeArena saved(tmp_.path(), job_, 0, 4096);
  saved.Save(14, 0x5a);
  LogCapture log;
  RestorePlanSync sync(options_);
  sync.Poll(1 * kSec, store_);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, -1);
  EXPECT_NE(plan.settling.find("hold copies of the job's ranks (rank 0 step 14)"), std::string::npos) << plan.settling;
  EXPECT_EQ(log.Count({"restore plan: this node's arenas hold copies", "Redis has no restore plan"}), 1u) << log.All();
  // The master's plan ends the wait at once, as any plan from Redis does.
  proto::RestorePlan published;
  published.version = 1;
  published.step = 14;
  published.ranks.push_back({0, 0x1234ull, {{0, "node/1", {"arena"}}}});
  Publish(published);
  sync.PollSoon();
  sync.Poll(2 * kSec, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 14);
  EXPECT_EQ(plan.settling, "");
}

// Redis lost its data (restarted empty): the plan in hand stays, settling, until the master
// publishes again — a `step none` now would start a relaunch from scratch over the copies it
// names — and at most end_wait_for; the master's next plan replaces it.
TEST_F(RestorePlanSyncTest, APlanRedisLostStaysSettlingUntilTheMasterPublishesAgain) {
  options_.end_wait_for_ns = 6 * kSec;
  LogCapture log;
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 5;
  published.step = 23;
  published.ranks.push_back({0, 0x1234ull, {{0, "node_1", {"arena"}}}});
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(ReadPlan(sync).step, 23);

  server_.Execute({"DEL", keys_.Restore(), keys_.RestoreVersion()});
  sync.Poll(2 * kSec, store_);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 23) << "not step none";
  EXPECT_NE(plan.settling.find("Redis no longer holds the master's restore plan"), std::string::npos)
      << plan.settling;
  sync.Poll(4 * kSec, store_);
  EXPECT_NE(ReadPlan(sync).settling, "") << "2 s of 6";
  sync.Poll(8 * kSec + 1, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.settling, "") << "a master that never publishes again: the plan in hand, final";
  EXPECT_EQ(plan.step, 23);
  EXPECT_EQ(log.Count({"published no restore plan within 6000 ms"}), 1u) << log.All();

  published.version = 1;  // a master that began its versions anew
  published.step = 24;
  Publish(published);
  sync.Poll(10 * kSec, store_);
  EXPECT_EQ(ReadPlan(sync).step, 24);
}

// A master that published again after Redis lost its data may have begun its versions anew:
// after a reconnect (ForgetVersion) the plan is read whatever its version says, so a new plan
// under the version of the one in hand is not taken for it (a seeded campaign schedule: the
// relaunch restored the old plan's step 15, which no arena held any more).
TEST_F(RestorePlanSyncTest, AfterAReconnectAPlanUnderTheSameVersionIsReadAgain) {
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 1;
  published.step = 15;
  published.ranks.push_back({0, 0x15ull, {{0, "node_1", {"arena"}}}});
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(ReadPlan(sync).step, 15);

  published.step = 23;  // Redis restarted empty, and the master's plan 1 again
  published.ranks[0].digest = 0x23ull;
  Publish(published);
  sync.Poll(3 * kSec, store_);
  EXPECT_EQ(ReadPlan(sync).step, 15) << "without a reconnect the version says unchanged";
  sync.ForgetVersion();
  sync.Poll(3 * kSec + 1, store_);
  const ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 23);
  ASSERT_EQ(plan.ranks.size(), 1u);
  EXPECT_EQ(plan.ranks[0].digest, 0x23ull);
}

// A master that never comes: the settling `step none` is final after end_wait_for.
TEST_F(RestorePlanSyncTest, CopiesWithNoPlanSettleAtMostTheEndWait) {
  options_.end_wait_for_ns = 6 * kSec;
  FakeArena saved(tmp_.path(), job_, 2, 4096);
  saved.Save(9, 0x11);
  RestorePlanSync sync(options_);
  sync.Poll(1 * kSec, store_);
  EXPECT_NE(ReadPlan(sync).settling, "");
  sync.Poll(6 * kSec, store_);
  EXPECT_NE(ReadPlan(sync).settling, "") << "5 s of 6";
  sync.Poll(7 * kSec + 1, store_);
  EXPECT_EQ(ReadPlan(sync).settling, "");
  EXPECT_EQ(ReadPlan(sync).step, -1);
}

// A preempted rank saves twice on its way out: a final plan the master built before it heard of
// the end (no echo, or an older one) may name the older step, so it is held until the echo
// comes; a master that never echoes holds it at most end_wait_for.
TEST_F(RestorePlanSyncTest, AnyPlanWaitsUntilTheMasterEchoesTheEndOfARank) {
  options_.settle_for_ns = 1 * kSec;
  options_.end_wait_for_ns = 10 * kSec;
  RestorePlanSync sync(options_);
  proto::RestorePlan published;
  published.version = 2;
  published.step = 41;
  published.ranks.push_back({3, 0x1234ull, {{3, "node/1", {"arena"}}}});
  published.ends_seen = {{"node/1", 4000}, {"node/2", 9000}};  // an earlier end; another node's
  Publish(published);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(ReadPlan(sync).settling, "");
  sync.NoteRankEnded(3, "signal 15", 2 * kSec, 8000);
  ckpt::NodePlan plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 41);
  EXPECT_NE(plan.settling.find("rank 3 of this node ended (signal 15); the master has not yet read the copies"),
            std::string::npos) << plan.settling;
  published.version = 3;
  published.ends_seen["node/1"] = 7999;  // still before this end
  Publish(published);
  sync.PollSoon();
  sync.Poll(4 * kSec, store_);
  EXPECT_NE(ReadPlan(sync).settling, "") << "an echo of an earlier end";
  published.version = 4;
  published.step = 42;
  published.ranks[0].digest = 0x4242ull;
  published.ends_seen["node/1"] = 8000;
  Publish(published);
  sync.PollSoon();
  sync.Poll(5 * kSec, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 42);
  EXPECT_EQ(plan.settling, "") << "built on the copies the rank saved on its way out";
  EXPECT_EQ(sync.local_settling(), "");

  // The master away: the end is waited for end_wait_for, then the plan is taken as it is.
  sync.NoteRankEnded(2, "signal 9", 6 * kSec, 12000);
  EXPECT_NE(ReadPlan(sync).settling, "");
  sync.Poll(15 * kSec, store_);
  EXPECT_NE(ReadPlan(sync).settling, "") << "9 s after the end: still waited for";
  sync.Poll(16 * kSec + 1, store_);
  plan = ReadPlan(sync);
  EXPECT_EQ(plan.step, 42);
  EXPECT_EQ(plan.settling, "");
}

TEST_F(RestorePlanSyncTest, RelativeDirectoriesBecomeAbsolute) {
  options_.local_dir = "ckpt/local";
  RestorePlanSync sync(options_);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(sync.files_written(), 1);
  EXPECT_EQ(ReadPlan(sync).local_dir, (std::filesystem::current_path() / "ckpt/local").string());
}

// A plan the file format refuses (two lines for one rank) is logged once and not retried.
TEST_F(RestorePlanSyncTest, PlanTheFileRefusesIsLoggedOnce) {
  LogCapture log;
  RestorePlanSync sync(options_);
  sync.Poll(1 * kSec, store_);
  ASSERT_EQ(sync.files_written(), 1);
  proto::RestorePlan published;
  published.version = 5;
  published.step = 30;
  published.ranks.push_back({0, 0x1ull, {{0, "node_1", {"arena"}}}});
  published.ranks.push_back({0, 0x2ull, {{0, "node_1", {"local"}}}});
  Publish(published);
  sync.Poll(3 * kSec, store_);
  sync.Poll(5 * kSec, store_);
  EXPECT_EQ(log.Count({"restore plan (version 5) cannot be handed"}), 1u) << log.All();
  EXPECT_EQ(sync.files_written(), 1);
  EXPECT_EQ(ReadPlan(sync).step, -1) << "the previous file is kept";
}

TEST_F(RestorePlanSyncTest, WritesNothingWhileRedisIsAway) {
  RestorePlanSync sync(options_);
  store_.Drop();
  sync.Poll(1 * kSec, store_);
  EXPECT_EQ(sync.files_written(), 0);
  EXPECT_FALSE(std::filesystem::exists(sync.path()));
  store_.Restore();
  ASSERT_TRUE(store_.Ensure(redis::Store::Clock::now()));
  sync.Poll(1 * kSec + 1, store_);  // retried at once, not a second later
  EXPECT_EQ(sync.files_written(), 1);
}

}  // namespace
}  // namespace ft::worker
