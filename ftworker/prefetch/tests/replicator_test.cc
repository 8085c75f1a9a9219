// Buddy copies (ftworker/prefetch/replicator.h): the ring that says which node copies whose ranks, the
// choice of the pulls, and the Replicator over the real transfer engine — an in-process
// rdma::Server on loopback serves "node0"'s arenas through the worker's own CopyProvider, and
// "node1"'s replicator pulls them into its replica arenas, reports them and serves them on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "ftworker/transfer/copy_server.h"
#include "ftworker/prefetch/replicator.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/checksum.h"
#include "proto/codec.h"
#include "proto/transfer_codec.h"
#include "redis/fake/fake_store.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

// ---- the ring ----------------------------------------------------------------------------------

TEST(BuddyRingTest, EachNodeIsGuardedByTheNextOneAroundTheSortedRing) {
  const std::vector<std::string> nodes = {"node2", "node0", "node3", "node1"};
  EXPECT_EQ(BuddyOf(nodes, "node0"), "node1");
  EXPECT_EQ(BuddyOf(nodes, "node3"), "node0");  // the ring closes
  EXPECT_EQ(GuardedBy(nodes, "node1"), "node0");
  EXPECT_EQ(GuardedBy(nodes, "node0"), "node3");
  // Spread: every node is guarded by exactly one node and guards exactly one, never itself.
  std::map<std::string, int> guarded_count;
  for (const std::string& n : nodes) {
    const std::string g = GuardedBy(nodes, n);
    EXPECT_NE(g, n);
    EXPECT_EQ(BuddyOf(nodes, g), n) << "the node " << n << " copies must have " << n << " as its buddy";
    ++guarded_count[g];
  }
  EXPECT_EQ(guarded_count.size(), nodes.size());
  for (const auto& [node, count] : guarded_count) EXPECT_EQ(count, 1) << node;
}

TEST(BuddyRingTest, AloneThereIsNoBuddyAndMembershipChangesMoveTheRing) {
  EXPECT_EQ(BuddyOf({}, "node0"), "");
  EXPECT_EQ(GuardedBy({"node0"}, "node0"), "");
  EXPECT_EQ(GuardedBy({"node0", "node0"}, "node0"), "");
  // A node not yet published counts itself in.
  EXPECT_EQ(GuardedBy({"node0", "node2"}, "node1"), "node0");
  EXPECT_EQ(BuddyOf({"node0", "node2"}, "node1"), "node2");
  // node1 lost: node2 now copies node0's ranks; its replacement node9 joins at the end.
  EXPECT_EQ(GuardedBy({"node0", "node1", "node2"}, "node2"), "node1");
  EXPECT_EQ(GuardedBy({"node0", "node2"}, "node2"), "node0");
  EXPECT_EQ(GuardedBy({"node0", "node2", "node9"}, "node0"), "node9");
  EXPECT_EQ(GuardedBy({"node0", "node2", "node9"}, "node9"), "node2");
}

// ---- which pulls -------------------------------------------------------------------------------

proto::CkptCopy Copy(int64_t step, int rank, const std::string& node, uint64_t digest,
                     std::vector<std::string> tiers = {"arena"}) {
  proto::CkptCopy c;
  c.step = step;
  c.rank = rank;
  c.node = node;
  c.digest = digest;
  c.tiers = std::move(tiers);
  return c;
}

TEST(ChooseReplicaPullsTest, TheNewestArenaCopyOfEachGuardedRankOnceItAdvancedByEvery) {
  std::vector<proto::CkptCopy> copies = {
      Copy(10, 0, "node0", 0xa), Copy(20, 0, "node0", 0xb), Copy(20, 1, "node0", 0xc),
      Copy(20, 2, "node5", 0xd),                   // another node's rank
      Copy(30, 1, "node0", 0xe, {"local"}),        // not in memory any more: not served from the arena
  };
  proto::CkptCopy torn = Copy(30, 0, "node0", 0xf);
  torn.torn = true;
  copies.push_back(torn);
  proto::CkptCopy buddy = Copy(40, 1, "node0", 0x1, {"replica"});
  buddy.buddy = true;  // node0's buddy copy of some other node's rank 1: never re-copied
  copies.push_back(buddy);

  EXPECT_EQ(ChooseReplicaPulls(copies, "node0", {}, 10),
            (std::vector<ReplicaWant>{{0, 20, 0xb}, {1, 20, 0xc}}));
  // Held at step 15: 20 is not 10 steps on; at step 10 it is.
  EXPECT_EQ(ChooseReplicaPulls(copies, "node0", {{0, 15}, {1, 10}}, 10), (std::vector<ReplicaWant>{{1, 20, 0xc}}));
  EXPECT_EQ(ChooseReplicaPulls(copies, "node0", {{0, 20}, {1, 20}}, 1), std::vector<ReplicaWant>{});
  EXPECT_EQ(ChooseReplicaPulls(copies, "node0", {}, 0), std::vector<ReplicaWant>{}) << "0 is off";
  EXPECT_EQ(ChooseReplicaPulls(copies, "", {}, 1), std::vector<ReplicaWant>{}) << "no guarded node";
}

// ---- the replicator over the real engine -------------------------------------------------------

constexpr uint64_t kBytes = (3u << 20) + 100;  // 4 chunks of 1 MiB
const std::string kSecret(64, 'b');

class PeerNode {
 public:
  PeerNode(const std::string& job, const std::string& dir)
      : provider_(CopyProviderOptions{
            .job = job,
            .local_dir = "",
            .arena_path_of = [job, dir](ckpt::CopyId id) { return ckpt::Arena::PathFor(dir, job, id.rank); },
            .arena_paths = {},
            .replica_path_of = {},
            .mapped = {},
            .unmapped = {}}) {
    rdma::ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    server_ = std::make_unique<rdma::Server>(options);
    Status s = server_->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  uint16_t port() const { return server_->port(); }

 private:
  CopyProvider provider_;
  std::unique_ptr<rdma::Server> server_;
};

class ReplicatorTest : public ::testing::Test {
 protected:
  ReplicatorTest() {
    node0_ = tmp_.Sub("node0");
    here_ = tmp_.Sub("node1");
    (void)store_.Ensure(redis::Store::Clock::now());
    server_.Execute({"SET", keys_.TransferSecret(), kSecret});
    Publish("node1", 1);  // this node: its own endpoint (never pulled from)
    Alive("node0", {0, 1});
  }

  void Publish(const std::string& node, uint16_t port) {
    proto::TransferEndpoint e{node, "127.0.0.1", port, {"tcp"}, 1};
    server_.Execute({"HSET", keys_.Endpoints(), node, proto::Encode(e)});
  }
  void Alive(const std::string& node, std::vector<int> ranks) {
    proto::WorkerHeartbeat beat;
    beat.node = node;
    beat.ranks = std::move(ranks);
    server_.Execute({"SET", keys_.WorkerHeartbeat(node), proto::Encode(beat)});
  }
  // node0's worker reports its rank's copy (tiers ["arena"]).
  void Report(const ckpt::Manifest& m, const std::string& node = "node0") {
    proto::CkptCopy c = Copy(m.step, m.rank, node, ckpt::ContentDigest(m));
    server_.Execute({"HSET", keys_.CkptStep(m.step), std::to_string(m.rank), proto::Encode(c)});
    server_.Execute({"ZADD", keys_.CkptSteps(), std::to_string(m.step), std::to_string(m.step)});
  }

  ReplicatorOptions Options(int64_t every = 1) {
    ReplicatorOptions o;
    o.job = job_;
    o.node = "node1";
    o.arena_dir = here_;
    o.every = every;
    o.engine = MakeTransferEngine();
    o.pull.connections = 1;
    o.pull.piece_bytes = 256 << 10;
    o.pull.connect_timeout = std::chrono::milliseconds(1000);
    o.pull.io_timeout = std::chrono::milliseconds(3000);
    o.poll_interval_ns = 0;  // every Tick polls
    return o;
  }

  // Ticks until the replicator is idle after a poll.
  void Round(Replicator& r) {
    r.Tick(MonoNs(), &store_);
    ASSERT_TRUE(r.WaitIdle(std::chrono::seconds(20)));
  }

  // The replica arena's committed copy of `rank`: step and bytes.
  bool Replica(int rank, ckpt::Manifest* m, std::vector<uint8_t>* bytes) {
    ckpt::Arena arena;
    if (!ckpt::Arena::OpenForRead(ckpt::Arena::ReplicaPathFor(here_, job_, rank), &arena).ok()) return false;
    uint64_t generation = 0;
    if (!arena.ReadCommitted(m, &generation).ok()) return false;
    bytes->assign(arena.data(generation), arena.data(generation) + m->data_bytes);
    return true;
  }

  std::string job_ = UniqueJob("rep");
  proto::Keys keys_{job_};
  TempDir tmp_{"replicator"};
  std::string node0_, here_;
  redis::FakeRedis server_;
  redis::FakeStore store_{&server_, "worker"};
};

TEST_F(ReplicatorTest, PullsTheGuardedNodesCopiesReportsAndServesThemAndReplacesThemOnlyOnceVerified) {
  FakeArena rank0(node0_, job_, 0, kBytes);
  FakeArena rank1(node0_, job_, 1, kBytes);
  const ckpt::Manifest m0 = rank0.Save(10, 0x10);
  const ckpt::Manifest m1 = rank1.Save(10, 0x11);
  PeerNode node0(job_, node0_);
  Publish("node0", node0.port());
  Report(m0);
  Report(m1);

  Replicator replicator(Options(/*every=*/5));
  Round(replicator);
  EXPECT_EQ(replicator.guarded(), "node0");
  for (const auto& [rank, fill] : {std::pair{0, 0x10}, std::pair{1, 0x11}}) {
    ckpt::Manifest m;
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(Replica(rank, &m, &bytes)) << "rank " << rank;
    EXPECT_EQ(m.step, 10);
    EXPECT_EQ(m.rank, rank);
    EXPECT_EQ(bytes, std::vector<uint8_t>(m0.data_bytes, static_cast<uint8_t>(fill))) << "rank " << rank;
  }
  std::vector<CkptReport> reports = replicator.TakeReports();
  ASSERT_EQ(reports.size(), 2u);
  for (const CkptReport& r : reports) {
    EXPECT_FALSE(r.removed);
    EXPECT_TRUE(r.copy.buddy);
    EXPECT_EQ(r.copy.node, "node1") << "the holder";
    EXPECT_EQ(r.copy.step, 10);
    EXPECT_EQ(r.copy.tiers, std::vector<std::string>{"replica"});
    EXPECT_EQ(r.copy.digest, ckpt::ContentDigest(r.copy.rank == 0 ? m0 : m1));
  }
  EXPECT_EQ(replicator.bytes_pulled(), m0.data_bytes + m1.data_bytes);

  // Served on as replica/<step>/<rank>, only the step held.
  CopyProvider served(CopyProviderOptions{.job = job_,
                                          .local_dir = "",
                                          .arena_path_of = {},
                                          .arena_paths = {},
                                          .replica_path_of = [&](ckpt::CopyId id) { return replicator.ReplicaPathOf(id); },
                                          .mapped = {},
                                          .unmapped = {}});
  std::shared_ptr<const rdma::Region> region;
  ASSERT_TRUE(served.Open("replica/10/1", &region).ok());
  EXPECT_EQ(region->size(), m1.data_bytes);
  EXPECT_EQ(served.Open("replica/11/1", &region).code(), StatusCode::kNotFound);
  EXPECT_EQ(served.Open("arena/10/1", &region).code(), StatusCode::kNotFound) << "not this node's rank";

  // Step 12 is not 5 steps on: nothing pulled.
  const ckpt::Manifest m0_12 = rank0.Save(12, 0x12);
  Report(m0_12);
  Round(replicator);
  EXPECT_TRUE(replicator.TakeReports().empty());

  // Step 15 reported with a digest node0 does not serve (a report of another save): the pull
  // is refused and the copy held stays committed and served.
  const ckpt::Manifest m0_15 = rank0.Save(15, 0x15);
  proto::CkptCopy wrong = Copy(15, 0, "node0", ckpt::ContentDigest(m0_15) ^ 1);
  server_.Execute({"HSET", keys_.CkptStep(15), "0", proto::Encode(wrong)});
  server_.Execute({"ZADD", keys_.CkptSteps(), "15", "15"});
  Round(replicator);
  EXPECT_TRUE(replicator.TakeReports().empty());
  {
    ckpt::Manifest m;
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(Replica(0, &m, &bytes));
    EXPECT_EQ(m.step, 10);
    EXPECT_EQ(bytes, std::vector<uint8_t>(m0.data_bytes, 0x10));
  }
  // The right report: pulled, the step-10 report of rank 0 removed.
  Report(m0_15);
  Round(replicator);
  reports = replicator.TakeReports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_TRUE(reports[0].removed);
  EXPECT_EQ(reports[0].copy.step, 10);
  EXPECT_FALSE(reports[1].removed);
  EXPECT_EQ(reports[1].copy.step, 15);
  EXPECT_EQ(replicator.ReplicaPathOf({10, 0}), "");
  EXPECT_NE(replicator.ReplicaPathOf({15, 0}), "");
  {
    ckpt::Manifest m;
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(Replica(0, &m, &bytes));
    EXPECT_EQ(m.step, 15);
    EXPECT_EQ(bytes, std::vector<uint8_t>(m0.data_bytes, 0x15));
  }
}

// FT_CKPT_REPLICATE_RATE: the pulls take no more than the cap. 2 ranks of ~3 MiB at 24 MiB/s take
// at least a quarter of a second however fast loopback is (a lower bound: a loaded machine only
// makes it slower).
TEST_F(ReplicatorTest, ThePullsKeepToTheRateCap) {
  FakeArena rank0(node0_, job_, 0, kBytes);
  FakeArena rank1(node0_, job_, 1, kBytes);
  const ckpt::Manifest m0 = rank0.Save(10, 0x10);
  const ckpt::Manifest m1 = rank1.Save(10, 0x11);
  PeerNode node0(job_, node0_);
  Publish("node0", node0.port());
  Report(m0);
  Report(m1);
  ReplicatorOptions options = Options();
  options.bytes_per_second = 24u << 20;
  options.pull.min_bytes_per_second = 0;
  Replicator replicator(options);
  const auto start = std::chrono::steady_clock::now();
  Round(replicator);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(replicator.TakeReports().size(), 2u);
  // Each pull is paced from its own start: at least (bytes - the first chunk) / rate each.
  const double floor_s = 2.0 * static_cast<double>(m0.data_bytes - m0.chunk_bytes) / options.bytes_per_second;
  EXPECT_GE(seconds, floor_s) << "pulled " << 2 * m0.data_bytes << " bytes in " << seconds << " s";
  EXPECT_GE(replicator.seconds_pulling(), floor_s);
}

// A rank the ring no longer gives this node keeps its buddy copy while a restore may still need
// it (its node may be the one that failed), and loses it once the plan is past its step: the
// node's memory does not grow with every move of the ring. A guarded rank's copy stays.
TEST_F(ReplicatorTest, ACopyOfARankNoLongerGuardedGoesOnceThePlanIsPastIt) {
  FakeArena rank0(node0_, job_, 0, kBytes);
  FakeArena rank1(node0_, job_, 1, kBytes);
  PeerNode node0(job_, node0_);
  Publish("node0", node0.port());
  Report(rank0.Save(10, 0x10));
  Report(rank1.Save(10, 0x11));
  Replicator replicator(Options(/*every=*/100));
  Round(replicator);
  ASSERT_EQ(replicator.TakeReports().size(), 2u);
  const std::string path0 = ckpt::Arena::ReplicaPathFor(here_, job_, 0);
  ASSERT_NE(replicator.ReplicaPathOf({10, 0}), "");
  Alive("node0", {1});  // rank 0 moved to another node (the ring guards it elsewhere)
  replicator.SetPlannedStep(10);
  Round(replicator);
  EXPECT_TRUE(replicator.TakeReports().empty()) << "the plan is at its step: still needed";
  EXPECT_NE(replicator.ReplicaPathOf({10, 0}), "");
  replicator.SetPlannedStep(12);
  Round(replicator);
  std::vector<CkptReport> reports = replicator.TakeReports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].removed);
  EXPECT_EQ(reports[0].copy.rank, 0);
  EXPECT_EQ(reports[0].copy.step, 10);
  EXPECT_EQ(replicator.ReplicaPathOf({10, 0}), "");
  EXPECT_NE(::access(path0.c_str(), F_OK), 0) << "the replica arena is gone";
  EXPECT_NE(replicator.ReplicaPathOf({10, 1}), "") << "rank 1 is still guarded: its copy stays";
}

TEST_F(ReplicatorTest, ADeadGuardedWorkerIsSkippedARestartedWorkerReportsItsCopiesAgain) {
  FakeArena rank2(node0_, job_, 2, kBytes);
  const ckpt::Manifest m2 = rank2.Save(7, 0x27);
  PeerNode node0(job_, node0_);
  // Ring node0 < node1 < node5; node1 guards node0 while its heartbeat lives. node9 has an
  // endpoint but no heartbeat (a killed worker): not part of the ring.
  Publish("node0", node0.port());
  Publish("node9", 9);
  server_.Execute({"DEL", keys_.WorkerHeartbeat("node0")});
  Alive("node0", {2});
  Report(m2);
  {
    Replicator replicator(Options());
    Round(replicator);
    EXPECT_EQ(replicator.guarded(), "node0");
    ASSERT_EQ(replicator.TakeReports().size(), 1u);
  }
  // A new worker finds the replica arena and reports it before pulling anything.
  {
    Replicator replicator(Options());
    std::vector<CkptReport> reports = replicator.TakeReports();
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].copy.rank, 2);
    EXPECT_EQ(reports[0].copy.step, 7);
    EXPECT_TRUE(reports[0].copy.buddy);
    EXPECT_NE(replicator.ReplicaPathOf({7, 2}), "");
    // node0's worker gone: node1 guards no one (node9 is dead too), the copy stays served.
    server_.Execute({"DEL", keys_.WorkerHeartbeat("node0")});
    Round(replicator);
    EXPECT_EQ(replicator.guarded(), "");
    EXPECT_NE(replicator.ReplicaPathOf({7, 2}), "");
  }
}

}  // namespace
}  // namespace ft::worker
