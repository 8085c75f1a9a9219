// The Prefetcher over the real transfer engine: in-process rdma::Servers on loopback serve
// arena files of two "other nodes" (temporary directories standing for their /dev/shm) through
// the worker's own CopyProvider, with the job's secret; a third endpoint has nobody listening.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "ftworker/transfer/copy_server.h"
#include "ftworker/prefetch/prefetcher.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "proto/transfer_codec.h"
#include "redis/fake/fake_store.h"
#include "transfer_engine/tests/settled_stats.h"
#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/verbs_transport.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr int64_t kStep = 12;
constexpr uint64_t kBytes = (5u << 20) + 100;  // 6 chunks of 1 MiB
const std::string kSecret(64, 'c');

// One node's transfer server over the arenas in `dir`.
class PeerNode {
 public:
  PeerNode(const std::string& job, const std::string& dir, rdma::FastPathServer* fast_path = nullptr)
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
    options.fast_path = fast_path;
    server_ = std::make_unique<rdma::Server>(options);
    Status s = server_->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  uint16_t port() const { return server_->port(); }
  rdma::ServerStats stats() const { return server_->stats(); }

 private:
  CopyProvider provider_;
  std::unique_ptr<rdma::Server> server_;
};

class PrefetcherTransferTest : public ::testing::Test {
 protected:
  PrefetcherTransferTest() {
    here_ = tmp_.Sub("node2");
    node0_ = tmp_.Sub("node0");
    node3_ = tmp_.Sub("node3");
    (void)store_.Ensure(redis::Store::Clock::now());
    server_.Execute({"SET", keys_.TransferSecret(), kSecret});
  }

  void Publish(const std::string& node, uint16_t port, std::vector<std::string> transports = {"tcp"}) {
    proto::TransferEndpoint e{node, "127.0.0.1", port, std::move(transports), 1};
    server_.Execute({"HSET", keys_.Endpoints(), node, proto::Encode(e)});
  }

  ckpt::Manifest Save(const std::string& dir, int rank, uint8_t fill) {
    FakeArena arena(dir, job_, rank, kBytes);
    return arena.Save(kStep, fill);
  }

  PrefetcherOptions Options() {
    PrefetcherOptions o;
    o.job = job_;
    o.node = "node2";
    o.ranks = {4};
    o.arena_dir = here_;
    o.engine = MakeTransferEngine();
    o.pull.connections = 2;
    o.pull.piece_bytes = 256 << 10;
    o.pull.connect_timeout = std::chrono::milliseconds(1000);
    o.pull.io_timeout = std::chrono::milliseconds(3000);
    return o;
  }

  // Rank 4 (evicted node1) has DP replicas rank 0 on node0 and rank 6 on node3; node9 is gone.
  proto::RestorePlan Plan(uint64_t digest) {
    proto::RestorePlan plan;
    plan.version = 1;
    plan.step = kStep;
    plan.ranks.push_back({4, digest, {{9, "node9", {"arena"}}, {0, "node0", {"arena"}}, {6, "node3", {"arena"}}}});
    return plan;
  }

  std::vector<uint8_t> Prefetched(ckpt::Manifest* m) {
    ckpt::Arena arena;
    EXPECT_TRUE(ckpt::Arena::OpenForRead(ckpt::Arena::PrefetchPathFor(here_, job_, 4), &arena).ok());
    uint64_t generation = 0;
    EXPECT_TRUE(arena.ReadCommitted(m, &generation).ok());
    return std::vector<uint8_t>(arena.data(generation), arena.data(generation) + m->data_bytes);
  }

  std::string job_ = UniqueJob("pft");
  proto::Keys keys_{job_};
  TempDir tmp_{"prefetch-tcp"};
  std::string here_, node0_, node3_;
  redis::FakeRedis server_;
  redis::FakeStore store_{&server_, "worker"};
};

TEST_F(PrefetcherTransferTest, PullsOverTcpSkippingADeadNodeAndRefetchesACorruptedChunkFromTheNextReplica) {
  const ckpt::Manifest saved = Save(node0_, 0, 0x21);
  Save(node3_, 6, 0x21);
  // A bad page in node0's copy of chunk 3: node0 serves it as it is, the chunk fails its
  // checksum here and comes from node3 instead.
  {
    ckpt::Arena arena;
    ASSERT_TRUE(ckpt::Arena::OpenForWriteAt(ckpt::Arena::PathFor(node0_, job_, 0),
                                            ckpt::ManifestCapacity(saved.buffers, saved.data_bytes, saved.chunk_bytes),
                                            saved.data_bytes, 2, &arena)
                    .ok());
    ckpt::Manifest m;
    uint64_t generation = 0;
    ASSERT_TRUE(arena.ReadCommitted(&m, &generation).ok());
    const_cast<uint8_t*>(arena.data(generation))[saved.chunk_begin(3) + 77] ^= 0x01;
  }
  PeerNode node0(job_, node0_);
  PeerNode node3(job_, node3_);
  Publish("node0", node0.port());
  Publish("node3", node3.port());
  {
    PeerNode gone(job_, tmp_.Sub("node9"));
    Publish("node9", gone.port());
  }  // stopped: its port refuses connections now

  Prefetcher prefetcher(Options());
  prefetcher.OnPlan(Plan(ckpt::ContentDigest(saved)), store_);
  prefetcher.WaitIdle();

  const proto::PrefetchReport report = prefetcher.report();
  ASSERT_EQ(report.ranks.size(), 1u);
  const proto::PrefetchRank& r = report.ranks[0];
  ASSERT_EQ(r.outcome, proto::PrefetchOutcome::kPulled) << r.error;
  EXPECT_EQ(r.source, "node0");
  EXPECT_EQ(r.source_rank, 0);
  EXPECT_EQ(r.transport, "tcp");
  EXPECT_EQ(r.bytes, saved.data_bytes);
  ckpt::Manifest m;
  std::vector<uint8_t> bytes = Prefetched(&m);
  EXPECT_EQ(ckpt::ContentDigest(m), ckpt::ContentDigest(saved));
  EXPECT_EQ(bytes, std::vector<uint8_t>(saved.data_bytes, 0x21));
  EXPECT_GT(rdma::testing::StatsOnceSent(node3, 1).bytes_sent, 0u) << "the bad chunk came from node3";

  bool written = false;
  ckpt::NodePlan plan;
  plan.job = job_;
  plan.node = "node2";
  plan.step = kStep;
  plan.arena_dir = here_;
  plan.ranks.push_back({4, ckpt::ContentDigest(saved), {{0, "node0", {"arena"}}}});
  written = prefetcher.Shape(&plan);
  ASSERT_TRUE(written);
  EXPECT_EQ(plan.ranks[0].sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
}

// Both nodes have an RDMA device (two NICs of the fake fabric): the shard moves by RDMA READ
// straight into the prefetch arena, nothing over TCP, and the arena's registration is given
// back before the arena is unmapped, every time.
TEST_F(PrefetcherTransferTest, PullsOverRdmaWhereBothNodesHaveADeviceAndReleasesTheArenaEachTime) {
  rdma::testing::FakeVerbs fake;
  std::shared_ptr<rdma::VerbsDevice> nic0, nic2;
  rdma::VerbsOptions verbs;
  verbs.device = "fake0";
  ASSERT_TRUE(rdma::VerbsDevice::Open(fake.api(), verbs, &nic0).ok());
  rdma::VerbsServer serving(nic0, verbs);
  verbs.device = "fake1";
  ASSERT_TRUE(rdma::VerbsDevice::Open(fake.api(), verbs, &nic2).ok());
  rdma::VerbsClient pulling(nic2, verbs);

  FakeArena source(node0_, job_, 0, kBytes);
  PeerNode node0(job_, node0_, &serving);
  Publish("node0", node0.port(), {"verbs", "tcp"});
  PrefetcherOptions options = Options();
  options.pull.fast_path = &pulling;
  int registered = 0, released = 0;
  options.destination_mapped = [&](uint8_t* data, uint64_t bytes) {
    ++registered;
    EXPECT_TRUE(pulling.Register(data, bytes).ok());
  };
  options.destination_unmapped = [&](const uint8_t* data, uint64_t bytes) {
    ++released;
    pulling.Forget(data, bytes);
  };
  Prefetcher prefetcher(std::move(options));

  // Two relaunches in a row, each restoring a newer step into the same prefetch arena.
  for (int64_t step : {kStep, kStep + 1}) {
    const uint8_t fill = static_cast<uint8_t>(0x40 + step);
    const ckpt::Manifest saved = source.Save(step, fill);
    proto::RestorePlan plan;
    plan.version = static_cast<uint64_t>(step);
    plan.step = step;
    plan.ranks.push_back({4, ckpt::ContentDigest(saved), {{0, "node0", {"arena"}}}});
    prefetcher.OnPlan(plan, store_);
    prefetcher.WaitIdle();

    const proto::PrefetchReport report = prefetcher.report();
    ASSERT_EQ(report.ranks.size(), 1u);
    ASSERT_EQ(report.ranks[0].outcome, proto::PrefetchOutcome::kPulled) << report.ranks[0].error;
    EXPECT_EQ(report.ranks[0].transport, "verbs") << "step " << step;
    ckpt::Manifest m;
    EXPECT_EQ(Prefetched(&m), std::vector<uint8_t>(saved.data_bytes, fill)) << "step " << step;
    EXPECT_EQ(m.step, step);
    EXPECT_EQ(pulling.registrations(), 0u) << "the arena's registration outlived the pull";
  }
  EXPECT_EQ(registered, 2);
  EXPECT_EQ(released, 2);
  EXPECT_EQ(node0.stats().bytes_sent, 0u) << "no data over TCP";
  EXPECT_GT(fake.reads_executed(), 0u);
  EXPECT_EQ(fake.stale_reads(), 0u);
}

TEST_F(PrefetcherTransferTest, AWrongSecretGetsNothing) {
  const ckpt::Manifest saved = Save(node0_, 0, 0x33);
  PeerNode node0(job_, node0_);
  Publish("node0", node0.port());
  server_.Execute({"SET", keys_.TransferSecret(), std::string(64, 'd')});  // another job's
  Prefetcher prefetcher(Options());
  prefetcher.OnPlan(Plan(ckpt::ContentDigest(saved)), store_);
  prefetcher.WaitIdle();
  const proto::PrefetchReport report = prefetcher.report();
  ASSERT_EQ(report.ranks.size(), 1u);
  EXPECT_EQ(report.ranks[0].outcome, proto::PrefetchOutcome::kFailed);
  EXPECT_FALSE(std::filesystem::exists(ckpt::Arena::PrefetchPathFor(here_, job_, 4)));
  EXPECT_EQ(node0.stats().bytes_sent, 0u);
  EXPECT_GE(node0.stats().auth_refused, 1u);
}

}  // namespace
}  // namespace ft::worker
