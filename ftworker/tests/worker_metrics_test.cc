// ftworker's metrics as the loop feeds them (worker_metrics.h): events by kind, summaries
// accumulated into counters, a copy counted once per tier it reaches, the persist seam.
#include "ftworker/worker_metrics.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ft::worker {
namespace {

class WorkerMetricsTest : public ::testing::Test {
 protected:
  WorkerMetricsTest() : m_(&registry_, "j", "n0", 1'000'000'000) {}
  double Value(const std::string& name, const metrics::LabelValues& labels) { return registry_.Value(name, labels); }
  static CkptReport Copy(int64_t step, int rank, std::vector<std::string> tiers, bool removed = false) {
    CkptReport r;
    r.copy.step = step;
    r.copy.rank = rank;
    r.copy.bytes = 1000;
    r.copy.tiers = std::move(tiers);
    r.removed = removed;
    return r;
  }
  metrics::Registry registry_;
  WorkerMetrics m_;
};

TEST_F(WorkerMetricsTest, EventsCountedByRankAndKind) {
  proto::Event e;
  e.rank = 3;
  e.kind = "timeout";
  m_.OnEvent(e);
  m_.OnEvent(e);
  e.kind = "exit";
  m_.OnEvent(e);
  EXPECT_EQ(Value("ft_worker_events_total", {"j", "n0", "3", "timeout"}), 2);
  EXPECT_EQ(Value("ft_worker_events_total", {"j", "n0", "3", "exit"}), 1);
}

TEST_F(WorkerMetricsTest, SummariesAccumulateOpsAndKeepTheLastWindowsFigures) {
  proto::RankSummary s;
  s.rank = 1;
  s.steps = 10;
  s.step_ms = 250;
  s.dropped = 2;
  proto::OpSummary op;
  op.comm_id = 0xabc;
  op.op = "allreduce";
  op.count = 5;
  op.p50_ms = 10;
  op.p99_ms = 40;
  op.max_ms = 50;
  s.ops = {op};
  m_.OnSummary(s);
  s.steps = 20;
  s.step_ms = 500;
  s.ops[0].count = 7;
  s.ops[0].p50_ms = 20;
  m_.OnSummary(s);
  const metrics::LabelValues comm = {"j", "n0", "1", "0000000000000abc", "allreduce"};
  EXPECT_EQ(Value("ft_worker_ops_total", comm), 12);
  auto q = comm;
  q.push_back("0.5");
  EXPECT_EQ(Value("ft_worker_op_duration_seconds", q), 0.02);
  EXPECT_EQ(Value("ft_worker_steps_total", {"j", "n0", "1"}), 20);
  EXPECT_EQ(Value("ft_worker_step_seconds", {"j", "n0", "1"}), 0.5);
  EXPECT_EQ(Value("ft_worker_ring_dropped_total", {"j", "n0", "1"}), 4);
}

TEST_F(WorkerMetricsTest, ACopyIsCountedOncePerTierItReaches) {
  m_.OnCkptReport(Copy(20, 0, {"arena"}), false);
  m_.OnCkptReport(Copy(20, 0, {"arena", "local"}), false);   // persisted: local is new
  m_.OnCkptReport(Copy(20, 0, {"arena", "local"}), false);   // reported again (ReportAll)
  m_.OnCkptReport(Copy(20, 1, {"arena"}), false);
  m_.OnCkptReport(Copy(20, 5, {"replica"}), true);           // a buddy copy
  EXPECT_EQ(Value("ft_worker_ckpt_copies_total", {"j", "n0", "arena"}), 2);
  EXPECT_EQ(Value("ft_worker_ckpt_copies_total", {"j", "n0", "local"}), 1);
  EXPECT_EQ(Value("ft_worker_ckpt_copies_total", {"j", "n0", "replica"}), 1);
  EXPECT_EQ(Value("ft_worker_ckpt_copy_bytes_total", {"j", "n0", "arena"}), 2000);
  EXPECT_EQ(Value("ft_worker_ckpt_newest_step", {"j", "n0", "0"}), 20);
  EXPECT_TRUE(std::isnan(Value("ft_worker_ckpt_newest_step", {"j", "n0", "5"})));  // not this node's rank
  // An older step reported later does not lower the newest; a torn copy is not counted.
  m_.OnCkptReport(Copy(10, 0, {"local"}), false);
  EXPECT_EQ(Value("ft_worker_ckpt_newest_step", {"j", "n0", "0"}), 20);
  CkptReport torn = Copy(30, 0, {"arena"});
  torn.copy.torn = true;
  m_.OnCkptReport(torn, false);
  EXPECT_EQ(Value("ft_worker_ckpt_copies_total", {"j", "n0", "arena"}), 2);
  // Removed and committed again (the same step saved anew): counted again.
  m_.OnCkptReport(Copy(20, 1, {}, true), false);
  m_.OnCkptReport(Copy(20, 1, {"arena"}), false);
  EXPECT_EQ(Value("ft_worker_ckpt_copies_total", {"j", "n0", "arena"}), 3);
}

TEST_F(WorkerMetricsTest, PersistsCountedByTierAndResult) {
  int calls = 0;
  PersistFn persist = m_.WrapPersist([&](ckpt::TierKind, std::string_view, const ckpt::Manifest&, const uint8_t*,
                                         const std::function<bool()>&, ckpt::PersistStats* stats) {
    ++calls;
    if (calls == 2) return Status::IoError("No space left on device");
    if (calls == 3) return Status::NotReady("overwritten");
    stats->bytes = 4096;
    stats->seconds = 0.5;
    return Status::Ok();
  });
  ckpt::Manifest m;
  ckpt::PersistStats stats;
  EXPECT_TRUE(persist(ckpt::TierKind::kLocal, "/x", m, nullptr, [] { return true; }, &stats).ok());
  EXPECT_FALSE(persist(ckpt::TierKind::kLocal, "/x", m, nullptr, [] { return true; }, &stats).ok());
  EXPECT_FALSE(persist(ckpt::TierKind::kRemote, "/x", m, nullptr, [] { return true; }, &stats).ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(Value("ft_worker_ckpt_persist_total", {"j", "n0", "local", "ok"}), 1);
  EXPECT_EQ(Value("ft_worker_ckpt_persist_total", {"j", "n0", "local", "error"}), 1);
  EXPECT_EQ(Value("ft_worker_ckpt_persist_total", {"j", "n0", "remote", "dropped"}), 1);
  EXPECT_EQ(Value("ft_worker_ckpt_persist_bytes_total", {"j", "n0", "local"}), 4096);
  EXPECT_EQ(Value("ft_worker_ckpt_persist_seconds_total", {"j", "n0", "local"}), 0.5);
}

}  // namespace
}  // namespace ft::worker
