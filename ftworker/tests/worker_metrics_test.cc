// ftworker's metrics as the loop feeds them (worker_metrics.h): events by kind, summaries
// accumulated into counters (ops and the time spent in them, from segments a NodeMonitor read),
// the failures libft.so counted in its segment, a copy counted once per tier it reaches, the
// persist seam.
#include "ftworker/worker_metrics.h"

#include <cmath>

#include <gtest/gtest.h>

#include "ftworker/monitor/op_names.h"
#include "ftworker/monitor/tests/test_util.h"
#include "shm/hook_failures.h"

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
  op.op = proto::OpKind::kAllReduce;
  op.count = 5;
  op.p10_ms = 4;
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
  q.back() = "0.1";
  EXPECT_EQ(Value("ft_worker_op_duration_seconds", q), 0.004);
  EXPECT_EQ(Value("ft_worker_steps_total", {"j", "n0", "1"}), 20);
  EXPECT_EQ(Value("ft_worker_step_seconds", {"j", "n0", "1"}), 0.5);
  EXPECT_EQ(Value("ft_worker_ring_dropped_total", {"j", "n0", "1"}), 4);

  // An op without a p10 (-1: not reported) has no 0.1 series.
  s.ops[0].comm_id = 0xdef;
  s.ops[0].p10_ms = -1;
  m_.OnSummary(s);
  EXPECT_TRUE(std::isnan(Value("ft_worker_op_duration_seconds", {"j", "n0", "1", "0000000000000def", "allreduce", "0.1"})));
  EXPECT_EQ(Value("ft_worker_op_duration_seconds", {"j", "n0", "1", "0000000000000def", "allreduce", "0.5"}), 0.02);
}

// Three allreduces of 1.5 ms as libft.so records them, read by the monitor and summarized:
// 4.5 ms in all; the next window's op adds to it.
TEST_F(WorkerMetricsTest, CollectiveSecondsAddUpTheCompletedOpsDurations) {
  using testing::kMs;
  testing::FakeProbe probe;
  const std::string job = testing::UniqueJob("collsec");
  NodeMonitor monitor(testing::MonitorOptions(job, &probe));
  testing::FakeRank rank(job, 2, 3'900'200);
  constexpr uint64_t kComm = 0x5eed;
  rank.CommInit(kComm, 0, 2);
  uint64_t t = testing::MonoNs();
  const uint32_t allreduce = testing::Op(shm::OpKind::kAllReduce);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    rank.Collective(kComm, seq, allreduce, 4096, t + seq * 10 * kMs, kMs / 10, 1'500'000);
  }
  std::vector<proto::Event> events;
  monitor.Tick(t + 100 * kMs, 1, &events);
  for (const proto::RankSummary& s : monitor.TakeSummaries(1)) m_.OnSummary(s);
  const metrics::LabelValues labels = {"j", "n0", "2", CommHex(kComm), "allreduce"};
  EXPECT_EQ(Value("ft_worker_ops_total", labels), 3);
  EXPECT_DOUBLE_EQ(Value("ft_worker_collective_seconds_total", labels), 0.0045);
  rank.Collective(kComm, 4, allreduce, 4096, t + 200 * kMs, kMs / 10, 2'000'000);
  monitor.Tick(t + 300 * kMs, 2, &events);
  for (const proto::RankSummary& s : monitor.TakeSummaries(2)) m_.OnSummary(s);
  EXPECT_EQ(Value("ft_worker_ops_total", labels), 4);
  EXPECT_DOUBLE_EQ(Value("ft_worker_collective_seconds_total", labels), 0.0065);
}

// What libft.so counted in the segment header, by place: counted once however often it is
// read, growth added, a restarted rank's failures added to its earlier ones, a place this
// build does not know named by its id.
TEST_F(WorkerMetricsTest, HookFailuresCountedByRankAndPlace) {
  using testing::kMs;
  testing::FakeProbe probe;
  const std::string job = testing::UniqueJob("hookfail");
  NodeMonitor monitor(testing::MonitorOptions(job, &probe));
  std::vector<proto::Event> events;
  uint64_t t = testing::MonoNs();
  auto read = [&] {
    t += 10 * kMs;
    monitor.Tick(t, 1, &events);
    m_.OnHookFailures(monitor.HookFailures());
  };
  auto pre_op = [](shm::SegmentHeader* h) {
    shm::CountHookFailure(h, static_cast<uint32_t>(shm::HookPlace::kNcclPreOp));
  };
  const metrics::LabelValues at_pre_op = {"j", "n0", "4", "nccl_pre_op"};
  {
    testing::FakeRank first(job, 4, 3'900'210);
    testing::FakeRank other(job, 5, 3'900'211);
    pre_op(first.header());
    pre_op(first.header());
    shm::CountHookFailure(first.header(), static_cast<uint32_t>(shm::HookPlace::kPoller));
    read();
    read();  // the same counts again: nothing new
    EXPECT_EQ(Value("ft_worker_hook_failures_total", at_pre_op), 2);
    EXPECT_EQ(Value("ft_worker_hook_failures_total", {"j", "n0", "4", "poller"}), 1);
    EXPECT_TRUE(std::isnan(Value("ft_worker_hook_failures_total", {"j", "n0", "5", "nccl_pre_op"})));
    pre_op(first.header());
    shm::CountHookFailure(other.header(), 77);  // a newer libft.so's place
    read();
    EXPECT_EQ(Value("ft_worker_hook_failures_total", at_pre_op), 3);
    EXPECT_EQ(Value("ft_worker_hook_failures_total", {"j", "n0", "5", "place_77"}), 1);
    probe.procs[3'900'210].exists = false;  // rank 4 dies; its segment is reclaimed
    read();
  }
  testing::FakeRank again(job, 4, 3'900'212);  // its restart counts from 0 in a new segment
  pre_op(again.header());
  read();
  read();
  EXPECT_EQ(Value("ft_worker_hook_failures_total", at_pre_op), 4);
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
