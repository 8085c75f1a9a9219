// The daemon's hook of the prefetcher (ftworker/prefetch/): with FT_NODE_RANKS the worker
// withholds its plan file while its prefetch runs and writes it, with the prefetched copies, as
// soon as the pulls ended. The prefetcher's own tests are in prefetch/tests, whose set-up this
// shares.
#include <filesystem>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "ftworker/daemon.h"
#include "ftworker/prefetch/tests/prefetcher_fixture.h"
#include "jitckpt/node_plan.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

class IdleServer : public TransferServer {
 public:
  Status Start() override { return Status::Ok(); }
  uint16_t port() const override { return 45000; }
  void Stop() override {}
  rdma::ServerStats stats() const override { return {}; }
};

TEST_F(PrefetcherTest, TheDaemonWithNodeRanksWritesThePlanFileOnceThePullsEnded) {
  SaveReplicas();
  proto::RestorePlan plan = Plan();
  server_.Execute({"SET", keys_.Restore(), proto::Encode(plan)});
  server_.Execute({"SET", keys_.RestoreVersion(), "1"});
  FakeProbe probe;
  NodeMonitor monitor(MonitorOptions(job_, &probe, "node2"));
  DaemonOptions o;
  o.job = job_;
  o.node = "node2";
  o.host = "host-node2";
  o.config = Config::Defaults();
  o.config.ckpt_arena_dir = here_dir_;
  o.config.ckpt_remote_dir = remote_dir_;
  o.config.node_ranks = "4-5";
  o.config.pull_min_rate = 3 << 20;  // FT_PULL_MIN_RATE=3mb
  o.pull_engine = engine_;
  o.make_transfer_server = [](const rdma::ServerOptions&) { return std::make_unique<IdleServer>(); };
  Daemon daemon(o, &monitor, std::make_unique<redis::FakeStore>(&server_, "worker"));
  ASSERT_NE(daemon.prefetcher(), nullptr);
  const std::string path = daemon.plan_sync().path();

  engine_->Hold();
  uint64_t now = MonoNs();
  for (int i = 0; i < 20; ++i) daemon.Tick(now += 10 * kMs, 1'700'000'000'000);
  EXPECT_TRUE(daemon.prefetcher()->busy());
  EXPECT_FALSE(std::filesystem::exists(path)) << "withheld while the pulls run";
  engine_->Release();
  daemon.prefetcher()->WaitIdle();
  daemon.Tick(now += 10 * kMs, 1'700'000'000'000);
  ckpt::NodePlan file;
  Status s = ckpt::ReadNodePlan(path, &file);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(file.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}}));
  EXPECT_EQ(file.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));
  redis::Reply report;
  ASSERT_TRUE(store_.Run({"HGET", keys_.Prefetch(), "node2"}, &report).ok());
  proto::PrefetchReport decoded;
  ASSERT_TRUE(proto::Decode(report.str(), &decoded).ok()) << report.str();
  EXPECT_EQ(decoded.state, proto::PrefetchState::kDone);
  EXPECT_EQ(engine_->min_rates(), (std::vector<uint64_t>{3 << 20, 3 << 20})) << "FT_PULL_MIN_RATE reaches each pull";
}

}  // namespace
}  // namespace ft::worker
