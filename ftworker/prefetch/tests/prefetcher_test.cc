// The Prefetcher with a fake transfer engine that serves real arena files of "other nodes"
// (directories standing for their /dev/shm) and an in-memory Redis: which ranks are pulled,
// which sources are used, skipped or refused, the prefetch arena, the plan file withheld and
// then written with "prefetched", the report in Redis, the cleanup after the restore.
#include "ftworker/prefetch/prefetcher.h"
#include "proto/rank_ranges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "ftworker/prefetch/prefetch_sources.h"
#include "ftworker/prefetch/tests/prefetcher_fixture.h"
#include "ftworker/transfer/region_name.h"
#include "ftworker/ckpt/restore_plan_sync.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/tier.h"
#include "proto/transfer_codec.h"
#include "redis/fake/fake_store.h"
#include "tests/util/log_capture.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

TEST(NodeRanksTest, RangesAndListsParseSortedAndOnce) {
  std::vector<int> ranks;
  ASSERT_TRUE(ParseNodeRanks("4-7", &ranks).ok());
  EXPECT_EQ(ranks, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_TRUE(ParseNodeRanks("7,5,6,4", &ranks).ok());
  EXPECT_EQ(ranks, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_TRUE(ParseNodeRanks("8,0-2,1", &ranks).ok());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 8}));
  ASSERT_TRUE(ParseNodeRanks("", &ranks).ok());
  EXPECT_TRUE(ranks.empty());
  EXPECT_EQ(proto::RankRanges::Of(std::vector<int>{0, 1, 2, 8, 10, 11}).Format(), "0-2,8,10-11");
  for (const char* bad : {"x", "4-", "-4", "7-4", "4,,5", "4,", "04", "4 ", "1-99999999", "2147483648"}) {
    Status s = ParseNodeRanks(bad, &ranks);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("e.g. \"4-7\""), std::string_view::npos) << s.ToString();
  }
}

// A rank's sources as the pulls take them: other nodes in the plan's order, each node's memory
// (arena, buddy copy) before its disk, an evicted node's copies after every other node's; a node
// with no endpoint is left out saying why; this node's copies and the remote directory's are
// listed apart, never pulled over the network.
TEST(ChooseSourcesTest, OtherNodesInPlanOrderMemoryFirstEvictedLast) {
  PrefetchPeers peers;
  peers.secret = "s3cret";
  for (const char* node : {"node-b", "node-c", "node-e"}) {
    peers.endpoints[node] = proto::TransferEndpoint{node, std::string("10.0.0.") + node[5], 7000, {"tcp"}, 0};
  }
  peers.evicted = {"node-c"};
  proto::RestoreRank line;
  line.rank = 4;
  line.digest = 0x1234;
  line.sources = {
      {4, "node-a", {"arena", "local"}},             // this node
      {6, "node-c", {"arena"}},                      // evicted: last
      {5, "node-b", {"local", "replica", "arena"}},  // memory before disk
      {7, "node-d", {"arena"}},                      // no endpoint
      {8, "node-e", {"remote"}},                     // the remote directory only
  };
  rdma::PullOptions pull;
  pull.connections = 3;
  const RankWork work = ChooseSources(line, 42, peers, "node-a", pull);
  EXPECT_EQ(work.rank, 4);
  EXPECT_EQ(work.digest, 0x1234u);
  EXPECT_EQ(work.pull.secret, "s3cret");
  EXPECT_EQ(work.pull.connections, 3);
  std::vector<std::string> order;
  for (const rdma::PullSource& source : work.sources) order.push_back(source.peer.node + " " + source.region);
  EXPECT_EQ(order, (std::vector<std::string>{
                       "node-b " + FormatRegionName(CopyPlace::kArena, 42, 5),
                       "node-b " + FormatRegionName(CopyPlace::kReplica, 42, 5),
                       "node-b " + FormatRegionName(CopyPlace::kLocal, 42, 5),
                       "node-c " + FormatRegionName(CopyPlace::kArena, 42, 6),
                   }));
  EXPECT_EQ(work.sources[0].peer.port, 7000);
  ASSERT_EQ(work.left_out.size(), 1u);
  EXPECT_NE(work.left_out[0].find("node-d"), std::string::npos) << work.left_out[0];
  EXPECT_EQ(work.same_node_ranks, (std::vector<int>{4}));
  EXPECT_TRUE(work.same_node_replicas.empty());
  EXPECT_EQ(work.remote_ranks, (std::vector<int>{8}));
}

// Two plans need the same pulls exactly when this node's ranks' lines name the same step and
// digests: another version, another node's rank, another source list change nothing.
TEST(PlanKeyTest, TheStepAndThisNodesDigestsOnly) {
  proto::RestorePlan plan;
  plan.version = 3;
  plan.step = 100;
  plan.ranks = {{4, 0xaa, {{4, "node-b", {"arena"}}}}, {5, 0xbb, {}}, {9, 0xcc, {}}};
  const std::vector<int> ranks = {4, 5};
  const std::string key = PlanKey(plan, ranks);
  EXPECT_FALSE(key.empty());
  proto::RestorePlan other = plan;
  other.version = 4;
  other.ranks[0].sources.clear();
  other.ranks[2].digest = 0xdd;
  EXPECT_EQ(PlanKey(other, ranks), key);
  other.ranks[1].digest = 0xbc;
  EXPECT_NE(PlanKey(other, ranks), key);
  other = plan;
  other.step = 101;
  EXPECT_NE(PlanKey(other, ranks), key);
  other.step = -1;
  EXPECT_EQ(PlanKey(other, ranks), "");
  EXPECT_EQ(PlanKey(plan, {6, 7}), "");
}

// A sharded rank's only other copy is the buddy copy node0 keeps (replica/<step>/<rank>). While
// its own arena holds the step nothing is pulled; once that arena is gone (the rank died and
// its memory with it) and the plan no longer lists a copy here, the same step is pulled from
// the buddy copy.
TEST_F(PrefetcherTest, ARankWhoseCopyHereWentIsPulledFromItsBuddyCopy) {
  const ckpt::Manifest own = SaveArena(here_dir_, 4, 0x44);
  const uint64_t digest = ckpt::ContentDigest(own);
  {
    const std::string elsewhere = tmp_.Sub("elsewhere");
    SaveArena(elsewhere, 4, 0x44);
    ASSERT_EQ(std::rename(ckpt::Arena::PathFor(elsewhere, job_, 4).c_str(),
                          ckpt::Arena::ReplicaPathFor(node0_dir_, job_, 4).c_str()),
              0);
  }
  proto::RestorePlan plan;
  plan.version = 1;
  plan.step = kStep;
  plan.ranks.push_back({4, digest, {{4, "node2", {"arena"}}, {4, "node0", {"replica"}}}});
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(plan, store_);
  prefetcher.WaitIdle();
  proto::PrefetchReport report = prefetcher.report();
  ASSERT_NE(Result(report, 4), nullptr);
  EXPECT_EQ(Result(report, 4)->outcome, proto::PrefetchOutcome::kLocal);
  EXPECT_TRUE(engine_->stats().empty());

  ASSERT_EQ(std::remove(ckpt::Arena::PathFor(here_dir_, job_, 4).c_str()), 0);
  plan.version = 2;
  plan.ranks[0].sources.erase(plan.ranks[0].sources.begin());
  prefetcher.OnPlan(plan, store_);
  prefetcher.WaitIdle();
  report = prefetcher.report();
  const proto::PrefetchRank* r = Result(report, 4);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome, proto::PrefetchOutcome::kPulled) << r->error;
  EXPECT_EQ(r->source, "node0");
  EXPECT_EQ(engine_->stats(), std::vector<std::string>{"node0:replica/40/4"});
  ExpectPrefetched(4, 0x44);
}

TEST_F(PrefetcherTest, PullsEachRanksShardFromTheFirstLiveSourceWhileThePlanIsWithheld) {
  SaveReplicas();
  Prefetcher prefetcher(options_);
  engine_->Hold();
  prefetcher.OnPlan(Plan(), store_);
  bool written = true;
  Shaped(prefetcher, &written);
  EXPECT_FALSE(written) << "the plan file waits for the pulls";
  EXPECT_TRUE(prefetcher.busy());
  engine_->Release();
  prefetcher.WaitIdle();

  ExpectPrefetched(4, 0x44);
  ExpectPrefetched(5, 0x55);
  ckpt::NodePlan plan = Shaped(prefetcher, &written);
  ASSERT_TRUE(written);
  // The prefetched copy first; the master's sources after it, unchanged.
  EXPECT_EQ(plan.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
  EXPECT_EQ(plan.Find(4)->sources.size(), 4u);
  EXPECT_EQ(plan.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));
  EXPECT_EQ(plan.Find(0)->sources.size(), 1u) << "rank 0 is not this node's";
  ckpt::NodePlan parsed;
  ASSERT_TRUE(ckpt::ParseNodePlan(ckpt::EncodeNodePlan(plan), &parsed).ok()) << "a plan the file accepts";

  // The evicted node1 was never asked; node0 answered first for both.
  EXPECT_EQ(engine_->stats().size(), 2u);
  for (const std::string& stat : engine_->stats()) EXPECT_EQ(stat.rfind("node0:arena/40/", 0), 0u) << stat;
  for (const std::string& secret : engine_->secrets()) EXPECT_EQ(secret, std::string(64, 'a'));

  proto::PrefetchReport report = prefetcher.report();
  EXPECT_EQ(report.state, proto::PrefetchState::kDone);
  EXPECT_EQ(report.step, kStep);
  EXPECT_GT(report.done_unix_ms, 0);
  EXPECT_GE(report.done_unix_ms, report.started_unix_ms);
  ASSERT_NE(Result(report, 4), nullptr);
  EXPECT_EQ(Result(report, 4)->outcome, proto::PrefetchOutcome::kPulled);
  EXPECT_TRUE(Result(report, 4)->ok);
  EXPECT_EQ(Result(report, 4)->source, "node0");
  EXPECT_EQ(Result(report, 4)->source_rank, 0);
  EXPECT_EQ(Result(report, 4)->transport, "tcp");
  EXPECT_EQ(Result(report, 4)->bytes, (kBytes + 4095) / 4096 * 4096);  // the manifest's data bytes
  EXPECT_EQ(Result(report, 5)->source_rank, 1);
}

// Without FT_NODE_RANKS (a relaunch in place): the ranks the worker saw on its node have their
// planned copies pulled when none is here — also a rank first seen after the plan came.
TEST_F(PrefetcherTest, RanksSeenOnTheNodeArePulledWithoutNodeRanks) {
  SaveReplicas();
  options_.ranks.clear();
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  EXPECT_TRUE(engine_->stats().empty()) << "no rank of this node known yet";
  prefetcher.AddRanks({4});
  EXPECT_TRUE(prefetcher.busy()) << "the copy of a rank new to the node waits to be pulled";
  bool written = true;
  Shaped(prefetcher, &written);
  EXPECT_FALSE(written) << "the plan file waits for the pull";
  prefetcher.Tick(1, 1, &store_);
  prefetcher.WaitIdle();
  ExpectPrefetched(4, 0x44);
  EXPECT_FALSE(PrefetchFileExists(5)) << "rank 5 was never seen here";
  ckpt::NodePlan plan = Shaped(prefetcher, &written);
  ASSERT_TRUE(written);
  EXPECT_EQ(plan.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
  EXPECT_EQ(plan.Find(5)->sources.front().node, "node1") << "the master's plan, unchanged";
  prefetcher.AddRanks({4});
  EXPECT_FALSE(prefetcher.busy()) << "a rank already in the set pulls nothing again";
  EXPECT_EQ(prefetcher.ranks(), std::vector<int>{4});
}

TEST_F(PrefetcherTest, RanksThatHoldTheirCopyOnThisNodeAreNotPulled) {
  SaveReplicas();
  SaveArena(here_dir_, 4, 0x44);  // rank 4 ran here before: its own arena holds the step
  // Rank 5's copy in this node's local tier.
  options_.local_dir = tmp_.Sub("local");
  ckpt::Manifest m5 = SaveArena(tmp_.Sub("scratch"), 5, 0x55);
  {
    ckpt::Arena a;
    ASSERT_TRUE(ckpt::Arena::OpenForRead(ckpt::Arena::PathFor(tmp_.Sub("scratch"), job_, 5), &a).ok());
    ckpt::Manifest committed;
    uint64_t generation = 0;
    ASSERT_TRUE(a.ReadCommitted(&committed, &generation).ok());
    ASSERT_TRUE(ckpt::PersistCopy(ckpt::TierKind::kLocal, options_.local_dir, m5, a.data(generation), nullptr, nullptr).ok());
  }
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  EXPECT_TRUE(engine_->stats().empty()) << "nothing asked of any peer";
  EXPECT_FALSE(PrefetchFileExists(4));
  EXPECT_FALSE(PrefetchFileExists(5));
  proto::PrefetchReport report = prefetcher.report();
  EXPECT_EQ(Result(report, 4)->outcome, proto::PrefetchOutcome::kLocal);
  EXPECT_EQ(Result(report, 5)->outcome, proto::PrefetchOutcome::kLocal);
  bool written = false;
  ckpt::NodePlan plan = Shaped(prefetcher, &written);
  EXPECT_TRUE(written);
  EXPECT_EQ(plan.Find(4)->sources.front().node, "node1") << "the master's plan, unchanged";
}

// A FIFO planted at the path of a rank's copy in this node's local tier: the prefetcher asks
// whether that copy is there and must not wait on the FIFO (a plain open waits for a writer
// forever, with the plan file withheld meanwhile); it pulls the rank's shard from a peer.
TEST_F(PrefetcherTest, AFifoAtALocalCopysPathIsRefusedNotWaitedOn) {
  SaveReplicas();
  options_.local_dir = tmp_.Sub("local");
  std::filesystem::create_directories(ckpt::StepDir(options_.local_dir, job_, kStep));
  const std::string fifo = ckpt::ManifestPath(options_.local_dir, job_, {kStep, 5});
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  auto idle = std::async(std::launch::async, [&] { prefetcher.WaitIdle(); });
  const bool blocked = idle.wait_for(std::chrono::seconds(30)) != std::future_status::ready;
  while (idle.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // wakes a blocked reader
    if (fd >= 0) ::close(fd);
  }
  EXPECT_FALSE(blocked) << "the prefetcher waited on a FIFO in the local tier";
  proto::PrefetchReport report = prefetcher.report();
  ASSERT_NE(Result(report, 5), nullptr);
  EXPECT_EQ(Result(report, 5)->outcome, proto::PrefetchOutcome::kPulled);
  EXPECT_TRUE(Result(report, 5)->ok);
}

// An arena under rank 4's file name that holds another job's copy (two jobs whose names an
// older rule spelled alike), of the planned step and with the planned content: its manifest
// names the other job, so it is not rank 4's copy, and the shard is pulled.
TEST_F(PrefetcherTest, AnotherJobsArenaUnderThisRanksNameIsNotItsCopy) {
  SaveReplicas();
  const std::string stranger_dir = tmp_.Sub("stranger");
  {
    FakeArena stranger(stranger_dir, "other-job", 4, kBytes);
    EXPECT_EQ(ckpt::ContentDigest(stranger.Save(kStep, 0x44)), digest4_);
  }
  std::filesystem::rename(ckpt::Arena::PathFor(stranger_dir, "other-job", 4), ckpt::Arena::PathFor(here_dir_, job_, 4));
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  proto::PrefetchReport report = prefetcher.report();
  ASSERT_NE(Result(report, 4), nullptr);
  EXPECT_EQ(Result(report, 4)->outcome, proto::PrefetchOutcome::kPulled);
  ExpectPrefetched(4, 0x44);
}

TEST_F(PrefetcherTest, SourcesOnEvictedUnreachableOrUnpublishedNodesAreSkippedAndTheNextUsed) {
  SaveReplicas();
  engine_->node("node0").unreachable = true;  // its worker died
  Prefetcher prefetcher(options_);
  test_util::LogCapture log;
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  // Rank 4: node0 refused the connection, node3 served it; node1 (evicted) was not needed.
  ExpectPrefetched(4, 0x44);
  proto::PrefetchReport report = prefetcher.report();
  EXPECT_EQ(Result(report, 4)->source, "node3");
  EXPECT_EQ(Result(report, 4)->source_rank, 6);
  // Rank 5: node0 was its only live replica.
  EXPECT_EQ(Result(report, 5)->outcome, proto::PrefetchOutcome::kFailed);
  EXPECT_FALSE(Result(report, 5)->ok);
  EXPECT_NE(Result(report, 5)->error.find("Connection refused"), std::string::npos) << Result(report, 5)->error;
  EXPECT_FALSE(PrefetchFileExists(5));
  // The evicted node comes last although the plan lists it first, and only for rank 5, which
  // had no other live replica (its worker is gone too: nobody answers there either).
  std::vector<std::string> rank5;
  for (const std::string& stat : engine_->stats()) {
    if (stat.find("arena/40/5") != std::string::npos || stat.find("arena/40/1") != std::string::npos) {
      rank5.push_back(stat);
    }
    EXPECT_NE(stat, "node1:arena/40/4");
  }
  EXPECT_EQ(rank5, (std::vector<std::string>{"node0:arena/40/1", "node1:arena/40/5"}));
  EXPECT_EQ(log.Count({"W ft[worker]", "rank 5: prefetching step 40 failed"}), 1u);

  bool written = false;
  ckpt::NodePlan plan = Shaped(prefetcher, &written);
  ASSERT_TRUE(written) << "a failed prefetch does not hold the plan back";
  EXPECT_EQ(plan.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
  EXPECT_EQ(plan.Find(5)->sources.front().node, "node1") << "rank 5 restores from what the master planned";
}

TEST_F(PrefetcherTest, AnEvictedNodeWhoseWorkerStillServesIsTheLastResort) {
  SaveReplicas();
  const std::string node1_dir = tmp_.Sub("node1");
  SaveArena(node1_dir, 5, 0x55);  // node1's worker still runs and serves rank 5's arena
  engine_->AddNode("node1", {node1_dir, "", false, {}});
  engine_->node("node0").unreachable = true;
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  ExpectPrefetched(5, 0x55);
  EXPECT_EQ(Result(prefetcher.report(), 5)->source, "node1");
  EXPECT_EQ(Result(prefetcher.report(), 4)->source, "node3") << "a healthy replica before the evicted node";
}

TEST_F(PrefetcherTest, ANodeWithoutAnEndpointIsNotAsked) {
  SaveReplicas();
  server_.Execute({"HDEL", keys_.Endpoints(), "node0"});
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  for (const std::string& stat : engine_->stats()) EXPECT_NE(stat.rfind("node0:", 0), 0u) << stat;
  proto::PrefetchReport report = prefetcher.report();
  EXPECT_EQ(Result(report, 4)->source, "node3");
  EXPECT_NE(Result(report, 5)->error.find("node0: its worker published no transfer endpoint"), std::string::npos)
      << Result(report, 5)->error;
}

TEST_F(PrefetcherTest, ACopyWhoseDigestDiffersFromThePlansIsRefused) {
  SaveReplicas();
  SaveArena(node0_dir_, 0, 0x45);  // node0 now holds other bytes under rank 0's step
  Prefetcher prefetcher(options_);
  test_util::LogCapture log;
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  ExpectPrefetched(4, 0x44);  // from node3, the next source
  EXPECT_EQ(Result(prefetcher.report(), 4)->source, "node3");
  EXPECT_EQ(log.Count({"rank 4: arena/40/0 on node0 refused: content digest", "differs from the verified"}), 1u);

  // With no other source: refused, nothing prefetched.
  SaveArena(node3_dir_, 6, 0x46);
  std::filesystem::remove(ckpt::Arena::PrefetchPathFor(here_dir_, job_, 4));
  Prefetcher again(options_);
  again.OnPlan(Plan(), store_);
  again.WaitIdle();
  EXPECT_EQ(Result(again.report(), 4)->outcome, proto::PrefetchOutcome::kFailed);
  EXPECT_NE(Result(again.report(), 4)->error.find("differs from the verified"), std::string::npos);
  EXPECT_FALSE(PrefetchFileExists(4));
}

TEST_F(PrefetcherTest, ACorruptedChunkIsFetchedFromTheNextSourceThenFromTheRemoteDirectory) {
  SaveReplicas();
  engine_->node("node0").corrupt_chunks = {1};
  engine_->node("node3").corrupt_chunks = {1};
  // Rank 4's own copy, persisted to the remote directory by node1's worker before it was evicted.
  ckpt::Manifest m4 = SaveArena(tmp_.Sub("node1"), 4, 0x44);
  {
    ckpt::Arena a;
    ASSERT_TRUE(ckpt::Arena::OpenForRead(ckpt::Arena::PathFor(tmp_.Sub("node1"), job_, 4), &a).ok());
    ckpt::Manifest committed;
    uint64_t generation = 0;
    ASSERT_TRUE(a.ReadCommitted(&committed, &generation).ok());
    ASSERT_TRUE(ckpt::PersistCopy(ckpt::TierKind::kRemote, remote_dir_, m4, a.data(generation), nullptr, nullptr).ok());
  }
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  ExpectPrefetched(4, 0x44);
  const proto::PrefetchReport report = prefetcher.report();
  const proto::PrefetchRank* r4 = Result(report, 4);
  EXPECT_EQ(r4->outcome, proto::PrefetchOutcome::kPulled);
  EXPECT_EQ(r4->source, "node0");
  EXPECT_EQ(r4->transport, "tcp+fallback");
  // Rank 5 has no remote copy: chunk 1 is bad on its only source, so the pull fails whole.
  EXPECT_EQ(Result(prefetcher.report(), 5)->outcome, proto::PrefetchOutcome::kFailed);
  EXPECT_FALSE(PrefetchFileExists(5));
}

TEST_F(PrefetcherTest, WithoutTheJobsSecretNothingIsPulled) {
  SaveReplicas();
  server_.Execute({"DEL", keys_.TransferSecret()});
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  prefetcher.WaitIdle();
  EXPECT_TRUE(engine_->stats().empty());
  EXPECT_NE(Result(prefetcher.report(), 4)->error.find("transfer secret is not in Redis"), std::string::npos);
}

// The ranks' peers restart with the job: when the prefetch starts, the secret is not written
// yet and node0's worker has not published its endpoint. The ranks are tried again with what
// Redis holds then, and the plan file waits for them.
TEST_F(PrefetcherTest, AFailedRankIsTriedAgainWithTheEndpointsAndSecretRedisHasThen) {
  SaveReplicas();
  server_.Execute({"DEL", keys_.TransferSecret()});
  server_.Execute({"HDEL", keys_.Endpoints(), "node0"});
  options_.retry_for = std::chrono::seconds(20);
  Prefetcher prefetcher(options_);
  prefetcher.OnPlan(Plan(), store_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  auto tick = [&] {
    prefetcher.Tick(MonoNs(), 1'700'000'000'000, &store_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  for (int i = 0; i < 30; ++i) tick();
  ASSERT_TRUE(prefetcher.busy()) << "the failed ranks wait to try again";
  bool written = true;
  (void)Shaped(prefetcher, &written);
  EXPECT_FALSE(written) << "the plan file waits for the retries";

  server_.Execute({"SET", keys_.TransferSecret(), std::string(64, 'a')});
  PublishEndpoint("node0", 7000);
  while (prefetcher.busy() && std::chrono::steady_clock::now() < deadline) tick();
  ASSERT_FALSE(prefetcher.busy());
  const proto::PrefetchReport report = prefetcher.report();
  for (int rank : {4, 5}) {
    const proto::PrefetchRank* r = Result(report, rank);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->outcome, proto::PrefetchOutcome::kPulled) << rank << ": " << r->error;
    EXPECT_EQ(r->source, "node0") << rank;
  }
  ExpectPrefetched(4, 0x44);
  ExpectPrefetched(5, 0x55);
  (void)Shaped(prefetcher, &written);
  EXPECT_TRUE(written);
}

// Tries again only within retry_for, then says how many attempts failed; a stopping worker
// does not wait for the next attempt.
TEST_F(PrefetcherTest, RetriesEndAtTheirDeadlineOrWhenTheWorkerStops) {
  SaveReplicas();
  server_.Execute({"DEL", keys_.TransferSecret()});
  options_.retry_for = std::chrono::milliseconds(1200);
  {
    Prefetcher prefetcher(options_);
    const auto start = std::chrono::steady_clock::now();
    prefetcher.OnPlan(Plan(), store_);
    while (prefetcher.busy() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
      prefetcher.Tick(MonoNs(), 1'700'000'000'000, &store_);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_FALSE(prefetcher.busy());
    // At 0 and 0.5 s; the next, 1 s later, would start after the 1.2 s.
    const proto::PrefetchReport report = prefetcher.report();
    const proto::PrefetchRank* r = Result(report, 4);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->outcome, proto::PrefetchOutcome::kFailed);
    EXPECT_NE(r->error.find("2 attempts, the last: "), std::string::npos) << r->error;
    EXPECT_NE(r->error.find("transfer secret is not in Redis"), std::string::npos) << r->error;
  }
  options_.retry_for = std::chrono::seconds(60);
  auto prefetcher = std::make_unique<Prefetcher>(options_);
  prefetcher->OnPlan(Plan(), store_);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(prefetcher->busy());
  const auto stopping = std::chrono::steady_clock::now();
  prefetcher.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5)) << "waited for the next attempt";
}

TEST_F(PrefetcherTest, ANewPlanVersionOfTheSameCopiesPullsNothingAgainAndARestartKeepsThePrefetch) {
  SaveReplicas();
  {
    Prefetcher prefetcher(options_);
    prefetcher.OnPlan(Plan(1), store_);
    prefetcher.WaitIdle();
    EXPECT_EQ(engine_->stats().size(), 2u);
    uint64_t generation = prefetcher.generation();
    prefetcher.OnPlan(Plan(2), store_);  // the master refreshed the tiers
    EXPECT_FALSE(prefetcher.busy());
    EXPECT_EQ(prefetcher.generation(), generation);
    EXPECT_EQ(engine_->stats().size(), 2u);
  }
  // A restarted worker finds the prefetched copies in place.
  Prefetcher restarted(options_);
  restarted.OnPlan(Plan(2), store_);
  restarted.WaitIdle();
  EXPECT_EQ(engine_->stats().size(), 2u);
  EXPECT_EQ(Result(restarted.report(), 4)->outcome, proto::PrefetchOutcome::kKept);
  bool written = false;
  ckpt::NodePlan plan = Shaped(restarted, &written);
  ASSERT_TRUE(written);
  EXPECT_EQ(plan.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));
}

TEST_F(PrefetcherTest, APlanWithNothingForThisNodeIsWrittenAtOnce) {
  Prefetcher prefetcher(options_);
  proto::RestorePlan none;
  prefetcher.OnPlan(none, store_);
  EXPECT_FALSE(prefetcher.busy());
  proto::RestorePlan others = Plan();
  others.ranks.erase(others.ranks.begin() + 1, others.ranks.end());  // rank 0 only
  prefetcher.OnPlan(others, store_);
  EXPECT_FALSE(prefetcher.busy());
  bool written = false;
  Shaped(prefetcher, &written);
  EXPECT_TRUE(written);
  EXPECT_TRUE(engine_->stats().empty());
}

TEST_F(PrefetcherTest, RedisAwayAtThePlanDefersTheStartAndWithholdsThePlan) {
  SaveReplicas();
  Prefetcher prefetcher(options_);
  store_.FailCommand("HGETALL", Status::Unavailable("connection reset"));
  prefetcher.OnPlan(Plan(), store_);
  EXPECT_TRUE(prefetcher.busy());
  bool written = true;
  Shaped(prefetcher, &written);
  EXPECT_FALSE(written);
  store_.ClearFaults();
  prefetcher.Tick(1 * kSec, 0, &store_);
  prefetcher.WaitIdle();
  ExpectPrefetched(4, 0x44);
}

// RestorePlanSync with the Prefetcher as its gate, through the daemon's calls: the file is
// withheld (an old one removed), written with the prefetched copies once they are in, and
// rewritten without them after the ranks restored; the report reaches Redis.
TEST_F(PrefetcherTest, ThePlanFileIsWithheldThenWrittenWithPrefetchedThenCleanedUp) {
  SaveReplicas();
  proto::RestorePlan plan = Plan();
  server_.Execute({"SET", keys_.Restore(), proto::Encode(plan)});
  server_.Execute({"SET", keys_.RestoreVersion(), "1"});
  RestorePlanSync sync(SyncOptions());
  Prefetcher prefetcher(options_);
  sync.SetGate(&prefetcher);
  // A stale file from an earlier worker on this node.
  ckpt::NodePlan stale = ToNodePlan(proto::RestorePlan{}, SyncOptions());
  ASSERT_TRUE(ckpt::WriteNodePlan(sync.path(), stale).ok());

  engine_->Hold();
  sync.Poll(1 * kSec, store_);
  EXPECT_TRUE(sync.withholding());
  EXPECT_FALSE(std::filesystem::exists(sync.path())) << "ft_restore waits instead of reading the stale plan";
  prefetcher.Tick(1 * kSec, 0, &store_);
  sync.Refresh();
  EXPECT_FALSE(std::filesystem::exists(sync.path()));
  redis::Reply running;
  ASSERT_TRUE(store_.Run({"HGET", keys_.Prefetch(), "node2"}, &running).ok());
  proto::PrefetchReport report;
  ASSERT_TRUE(proto::Decode(running.str(), &report).ok());
  EXPECT_EQ(report.state, proto::PrefetchState::kRunning);

  engine_->Release();
  prefetcher.WaitIdle();
  sync.Refresh();  // no Redis needed
  EXPECT_FALSE(sync.withholding());
  ckpt::NodePlan file;
  ASSERT_TRUE(ckpt::ReadNodePlan(sync.path(), &file).ok());
  EXPECT_EQ(file.version, 1);
  EXPECT_EQ(file.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
  EXPECT_EQ(file.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));
  prefetcher.Tick(2 * kSec, 0, &store_);
  redis::Reply done;
  ASSERT_TRUE(store_.Run({"HGET", keys_.Prefetch(), "node2"}, &done).ok());
  ASSERT_TRUE(proto::Decode(done.str(), &report).ok());
  EXPECT_EQ(report.state, proto::PrefetchState::kDone);
  EXPECT_EQ(report.ranks.size(), 2u);
  EXPECT_GE(report.pull_s, 0);

  // Rank 4 restored: its own arena holds the step, so its prefetched copy goes, and the
  // file no longer names it. Rank 5 has not restored yet.
  SaveArena(here_dir_, 4, 0x44);
  prefetcher.Tick(3 * kSec, 0, &store_);
  EXPECT_FALSE(PrefetchFileExists(4));
  EXPECT_TRUE(PrefetchFileExists(5));
  sync.Refresh();
  ASSERT_TRUE(ckpt::ReadNodePlan(sync.path(), &file).ok());
  EXPECT_EQ(file.Find(4)->sources.front().node, "node1");
  EXPECT_EQ(file.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));

  // The master then lists rank 4's own copy on node2: still one source per (rank, node).
  plan.version = 2;
  plan.ranks[1].sources.push_back({4, "node2", {"arena"}});
  plan.ranks[2].sources.push_back({5, "node2", {"arena"}});
  server_.Execute({"SET", keys_.Restore(), proto::Encode(plan)});
  server_.Execute({"SET", keys_.RestoreVersion(), "2"});
  sync.Poll(5 * kSec, store_);
  ASSERT_TRUE(ckpt::ReadNodePlan(sync.path(), &file).ok());
  EXPECT_EQ(file.version, 2);
  EXPECT_EQ(file.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"arena", "prefetched"}}));
  EXPECT_EQ(engine_->stats().size(), 2u) << "the same copies: nothing pulled again";
}

}  // namespace
}  // namespace ft::worker
