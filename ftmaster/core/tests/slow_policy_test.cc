#include "ftmaster/core/slow_policy.h"

#include <gtest/gtest.h>

#include <vector>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

SlowPolicy Evicting() {
  SlowPolicy p;
  p.action = SlowAction::kEvict;
  p.horizon_steps = 10000;
  p.recovery_estimate_s = 120;
  p.confirm_ms = 30000;
  p.evictions_per_hour = 1;
  p.min_nodes = 1;
  return p;
}

// Rank 5 on node1 computes 1.5x its peers (75 ms vs 50 ms), named 40 s ago, 2 nodes, none evicted.
SlowCase HalfAgainSlower() {
  SlowCase s;
  s.rank = 5;
  s.node = "node1";
  s.compute_ms = 75;
  s.median_compute_ms = 50;
  s.step_ms = 110;
  s.named_unix_ms = kT0 - 40000;
  return s;
}

SlowContext TwoNodes() {
  SlowContext c;
  c.now_unix_ms = kT0;
  c.job_nodes = 2;
  return c;
}

TEST(SlowPolicyTest, EvictsWhenKeepingCostsMoreThanReplacingAndTheArithmeticSaysWhy) {
  const SlowVerdict v = DecideSlow(HalfAgainSlower(), TwoNodes(), Evicting());
  EXPECT_TRUE(v.evict) << v.why;
  EXPECT_TRUE(v.confirmed);
  EXPECT_DOUBLE_EQ(v.excess_ms, 25);
  EXPECT_DOUBLE_EQ(v.keep_s, 250);              // 10000 steps x 25 ms
  EXPECT_NEAR(v.replace_s, 120.11, 1e-9);       // the estimate + one step of 110 ms
  EXPECT_NE(v.arithmetic.find("keep 250.0 s"), std::string::npos) << v.arithmetic;
  EXPECT_NE(v.arithmetic.find("FT_SLOW_RECOVERY_COST"), std::string::npos) << v.arithmetic;
  EXPECT_NE(v.why.find("evict node1"), std::string::npos) << v.why;
  EXPECT_FALSE(v.job_horizon);
  EXPECT_EQ(v.horizon_steps, 10000);
  EXPECT_NE(v.arithmetic.find("x horizon 10000 steps (FT_SLOW_HORIZON)"), std::string::npos) << v.arithmetic;
}

// The job says it runs 1000 steps and has done 150: 850 steps x 25 ms = 21.25 s to its end,
// less than a recovery. Over FT_SLOW_HORIZON (10000 steps, 250 s) the same rank is evicted.
TEST(SlowPolicyTest, AJobNearItsEndKeepsItsSlowRankAndSaysSo) {
  SlowCase s = HalfAgainSlower();
  s.job_step = 150;
  s.job_total_steps = 1000;
  const SlowVerdict v = DecideSlow(s, TwoNodes(), Evicting());
  EXPECT_FALSE(v.evict) << v.why;
  EXPECT_TRUE(v.job_horizon);
  EXPECT_EQ(v.horizon_steps, 850);
  EXPECT_DOUBLE_EQ(v.keep_s, 21.25);
  EXPECT_NE(v.arithmetic.find("x horizon 850 steps (the job's: 150 of 1000 done) = keep 21.2 s"),
            std::string::npos) << v.arithmetic;
  EXPECT_EQ(v.arithmetic.find("FT_SLOW_HORIZON"), std::string::npos) << v.arithmetic;
  EXPECT_EQ(v.why.rfind("report: the job ends in 850 steps (150 of 1000 done)", 0), 0u) << v.why;
  // Done with what it said it runs (or past it): nothing left to lose by keeping the rank.
  s.job_step = 1000;
  const SlowVerdict done = DecideSlow(s, TwoNodes(), Evicting());
  EXPECT_FALSE(done.evict);
  EXPECT_EQ(done.horizon_steps, 0);
  EXPECT_DOUBLE_EQ(done.keep_s, 0);
  EXPECT_NE(done.why.find("has done the 1000 steps it said it runs"), std::string::npos) << done.why;
  s.job_step = 1200;
  EXPECT_EQ(DecideSlow(s, TwoNodes(), Evicting()).horizon_steps, 0);
}

// The job's horizon replaces FT_SLOW_HORIZON both ways: a long job evicts where a short
// configured horizon would only report.
TEST(SlowPolicyTest, ALongJobsOwnHorizonOutweighsAShortConfiguredOne) {
  SlowPolicy p = Evicting();
  p.horizon_steps = 1000;  // 25 s of keeping: report
  EXPECT_FALSE(DecideSlow(HalfAgainSlower(), TwoNodes(), p).evict);
  SlowCase s = HalfAgainSlower();
  s.job_step = 100;
  s.job_total_steps = 20100;  // 20000 steps left: 500 s of keeping
  const SlowVerdict v = DecideSlow(s, TwoNodes(), p);
  EXPECT_TRUE(v.evict) << v.why;
  EXPECT_EQ(v.horizon_steps, 20000);
  EXPECT_DOUBLE_EQ(v.keep_s, 500);
  EXPECT_NE(v.arithmetic.find("horizon 20000 steps (the job's: 100 of 20100 done)"), std::string::npos)
      << v.arithmetic;
  // A total without a step done (the job does not mark its steps) is no horizon.
  s.job_step = -1;
  const SlowVerdict unmarked = DecideSlow(s, TwoNodes(), p);
  EXPECT_FALSE(unmarked.job_horizon);
  EXPECT_EQ(unmarked.horizon_steps, 1000);
}

TEST(SlowPolicyTest, ReportIsTheDefault) {
  const SlowVerdict v = DecideSlow(HalfAgainSlower(), TwoNodes(), SlowPolicy{});
  EXPECT_FALSE(v.evict);
  EXPECT_NE(v.why.find("FT_SLOW_ACTION=report"), std::string::npos) << v.why;
}

TEST(SlowPolicyTest, ACheapSlowdownIsKept) {
  SlowCase s = HalfAgainSlower();
  s.compute_ms = 55;  // 5 ms x 10000 steps = 50 s < 120 s
  const SlowVerdict v = DecideSlow(s, TwoNodes(), Evicting());
  EXPECT_FALSE(v.evict);
  EXPECT_DOUBLE_EQ(v.keep_s, 50);
  EXPECT_NE(v.why.find("keeping the rank costs 50.0 s"), std::string::npos) << v.why;
}

TEST(SlowPolicyTest, TheJobsOwnMeasuredRecoveryReplacesTheEstimate) {
  SlowContext c = TwoNodes();
  c.measured_recovery_s = 300;  // this job recovers slowly: 250 s of keeping is cheaper
  const SlowVerdict v = DecideSlow(HalfAgainSlower(), c, Evicting());
  EXPECT_FALSE(v.evict) << v.why;
  EXPECT_NEAR(v.replace_s, 300.11, 1e-9);
  EXPECT_NE(v.arithmetic.find("measured"), std::string::npos) << v.arithmetic;
  c.measured_recovery_s = 20;
  EXPECT_TRUE(DecideSlow(HalfAgainSlower(), c, Evicting()).evict);
}

TEST(SlowPolicyTest, NotBeforeTheConfirmationAndThenAtOnce) {
  SlowCase s = HalfAgainSlower();
  s.named_unix_ms = kT0 - 29999;
  SlowVerdict v = DecideSlow(s, TwoNodes(), Evicting());
  EXPECT_FALSE(v.evict);
  EXPECT_FALSE(v.confirmed);
  EXPECT_NE(v.why.find("FT_SLOW_CONFIRM"), std::string::npos) << v.why;
  s.named_unix_ms = kT0 - 30000;
  v = DecideSlow(s, TwoNodes(), Evicting());
  EXPECT_TRUE(v.evict) << v.why;
}

TEST(SlowPolicyTest, TheHourlyBudgetCountsOnlyTheLastHour) {
  std::vector<int64_t> evictions = {kT0 - 3600 * 1000 - 1};  // just over an hour ago
  SlowContext c = TwoNodes();
  c.recent_evictions_unix_ms = evictions;
  EXPECT_TRUE(DecideSlow(HalfAgainSlower(), c, Evicting()).evict);
  evictions.push_back(kT0 - 60000);
  c.recent_evictions_unix_ms = evictions;
  const SlowVerdict v = DecideSlow(HalfAgainSlower(), c, Evicting());
  EXPECT_FALSE(v.evict);
  EXPECT_NE(v.why.find("FT_SLOW_EVICTIONS_PER_HOUR=1"), std::string::npos) << v.why;
}

TEST(SlowPolicyTest, NeverBelowTheMinimumOfHealthyNodes) {
  SlowContext c = TwoNodes();
  c.evicted_job_nodes = 1;  // the other node is evicted already: evicting node1 leaves none
  SlowVerdict v = DecideSlow(HalfAgainSlower(), c, Evicting());
  EXPECT_FALSE(v.evict);
  EXPECT_NE(v.why.find("FT_SLOW_MIN_NODES=1"), std::string::npos) << v.why;
  c.evicted_job_nodes = 0;
  SlowPolicy p = Evicting();
  p.min_nodes = 2;
  EXPECT_FALSE(DecideSlow(HalfAgainSlower(), c, p).evict);
}

TEST(SlowPolicyTest, AJobSlowedAsAWholeEvictsNobody) {
  SlowContext c = TwoNodes();
  c.job_slow = true;
  const SlowVerdict v = DecideSlow(HalfAgainSlower(), c, Evicting());
  EXPECT_FALSE(v.evict);
  EXPECT_NE(v.why.find("job-slow"), std::string::npos) << v.why;
}

TEST(SlowPolicyTest, ParsesOnlyItsTwoActions) {
  EXPECT_EQ(ParseSlowAction("report"), SlowAction::kReport);
  EXPECT_EQ(ParseSlowAction("evict"), SlowAction::kEvict);
  EXPECT_FALSE(ParseSlowAction("Evict").has_value());
  EXPECT_FALSE(ParseSlowAction("").has_value());
}

TEST(SlowPolicyTest, MeasuresTheRankAgainstThePeersItSharesACommunicatorWith) {
  testing::Job job(2, 2, 2, 4);  // tp=2 dp=2 pp=2 on 2 nodes: rank 5 is t1 d0 s1
  std::vector<proto::RankSummary> summaries;
  for (int r = 0; r < job.world(); ++r) {
    proto::RankSummary s;
    s.rank = r;
    s.node = job.membership[static_cast<size_t>(r)].node;
    // Stage 0 computes 40 ms, stage 1 60 ms: rank 5 is compared with its stage's ranks only.
    s.compute_ms = r < 4 ? 40 : 60;
    s.step_p50_ms = 120;
    summaries.push_back(s);
  }
  summaries[5].compute_ms = 90;
  summaries[5].step_p50_ms = 150;
  summaries[4].compute_ms = 58;
  const std::optional<SlowCase> c = MeasureSlow(5, summaries, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->node, "n1");
  EXPECT_DOUBLE_EQ(c->compute_ms, 90);
  // Peers: tp peer 4 (60), dp peer 7 (60); not pp peer 1 (40, another stage's work, p2p).
  EXPECT_DOUBLE_EQ(c->median_compute_ms, 59);
  EXPECT_DOUBLE_EQ(c->step_ms, 120);
  EXPECT_FALSE(MeasureSlow(9, summaries, job.membership).has_value());
}

// The job's steps left come from the summaries that say them: the fewest left over every rank
// that says (one rank may declare for the job; a summary a window behind says more left).
TEST(SlowPolicyTest, MeasuresTheJobsStepsLeftFromTheSummariesThatSayThem) {
  testing::Job job(1, 4, 1, 4);
  std::vector<proto::RankSummary> summaries;
  for (int r = 0; r < 4; ++r) {
    proto::RankSummary s;
    s.rank = r;
    s.node = "n0";
    s.compute_ms = r == 1 ? 150 : 100;
    s.step_p50_ms = 170;
    summaries.push_back(s);
  }
  std::optional<SlowCase> c = MeasureSlow(1, summaries, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->job_total_steps, 0) << "nothing said";
  EXPECT_EQ(c->job_step, -1);
  summaries[2].total_steps = 1000;  // a total, but no step marked: says nothing of what is left
  c = MeasureSlow(1, summaries, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->job_total_steps, 0);
  // Rank 0 alone declares: its word is the job's, though rank 1 is the one named.
  summaries[0].declared_step = 150;
  summaries[0].total_steps = 1000;
  c = MeasureSlow(1, summaries, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->job_step, 150);
  EXPECT_EQ(c->job_total_steps, 1000);
  // Every rank says; rank 3's summary is a step ahead: the fewest steps left.
  for (proto::RankSummary& s : summaries) {
    s.declared_step = s.rank == 3 ? 151 : 150;
    s.total_steps = 1000;
  }
  c = MeasureSlow(1, summaries, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->job_step, 151);
  EXPECT_EQ(c->job_total_steps, 1000);
  const SlowVerdict v = DecideSlow(*c, TwoNodes(), Evicting());
  EXPECT_EQ(v.horizon_steps, 849);
}

// Rank 1 (dp=4) computes 1.5x its peers. Its sampled kernels tell where the time goes.
TEST(SlowPolicyTest, KernelSamplesTellItsGpuFromItsHost) {
  testing::Job job(1, 4, 1, 4);
  auto summaries = [&](double own_kernel_ms) {
    std::vector<proto::RankSummary> out;
    for (int r = 0; r < 4; ++r) {
      proto::RankSummary s;
      s.rank = r;
      s.node = "n0";
      s.compute_ms = r == 1 ? 150 : 100;
      s.step_p50_ms = 170;
      s.kernel_samples.push_back(proto::KernelSummary{"gemm", 4, r == 1 ? own_kernel_ms : 10, 12});
      s.kernel_samples.push_back(proto::KernelSummary{"softmax", 4, r == 1 ? own_kernel_ms / 5 : 2, 3});
      out.push_back(s);
    }
    return out;
  };
  std::optional<SlowCase> c = MeasureSlow(1, summaries(15), job.membership);  // kernels 1.5x
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->where, "gpu") << c->where_why;
  EXPECT_NE(c->where_why.find("1.50x"), std::string::npos) << c->where_why;
  c = MeasureSlow(1, summaries(10.2), job.membership);  // kernels as fast as the peers'
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->where, "host") << c->where_why;
  // Overlapped communication: its peers' compute hides in their all-reduce waits, so its own
  // looks 3.3x theirs while its kernels run 1.48x: still its GPU.
  std::vector<proto::RankSummary> overlapped = summaries(14.8);
  for (proto::RankSummary& s : overlapped) s.compute_ms = s.rank == 1 ? 62 : 19;
  c = MeasureSlow(1, overlapped, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->where, "gpu") << c->where_why;
  std::vector<proto::RankSummary> unsampled = summaries(10);
  for (proto::RankSummary& s : unsampled) s.kernel_samples.clear();
  c = MeasureSlow(1, unsampled, job.membership);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->where, "");
  EXPECT_NE(c->where_why.find("FT_KERNEL_SAMPLE"), std::string::npos) << c->where_why;
}

}  // namespace
}  // namespace ft::master
