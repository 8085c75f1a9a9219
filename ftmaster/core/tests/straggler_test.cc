#include "ftmaster/core/straggler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

constexpr int64_t kT0 = 1'700'000'000'000;

// One summary round of a dp=8 job: rank r computes compute[r] ms per step; in the gradient
// allreduce every rank waits for the slowest, so its collective time is the gap plus the
// transfer time.
void Round(const Job& job, StragglerDetector* d, int64_t at, const std::vector<double>& compute,
           std::mt19937* rng, double jitter) {
  std::uniform_real_distribution<double> noise(1 - jitter, 1 + jitter);
  const double slowest = *std::max_element(compute.begin(), compute.end());
  for (int r = 0; r < job.world(); ++r) {
    proto::RankSummary s;
    s.rank = r;
    s.node = job.membership[static_cast<size_t>(r)].node;
    s.unix_ms = at;
    s.compute_ms = compute[static_cast<size_t>(r)];
    proto::OpSummary op;
    op.comm_id = job.DpComm(0, 0);
    op.op = proto::OpKind::kAllReduce;
    op.count = 4;
    op.p50_ms = (slowest - compute[static_cast<size_t>(r)] + 20) * noise(*rng);
    s.ops.push_back(op);
    d->Add(s);
  }
}

TEST(StragglerTest, NamesARankOneAndAHalfTimesSlowerAfterKSummaries) {
  Job job(1, 8, 1);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  std::vector<proto::Incident> named;
  int round = 0;
  for (; round < 30 && named.empty(); ++round) {
    std::vector<double> compute(8);
    for (double& c : compute) c = 100 * noise(rng);
    compute[5] = 150 * noise(rng);
    Round(job, &d, kT0 + round * 1000, compute, &rng, 0.05);
    named = d.Evaluate(kT0 + round * 1000);
  }
  EXPECT_EQ(round, 10);  // straggler_steps summaries in a row, not fewer
  ASSERT_EQ(named.size(), 1u);
  const proto::Incident& i = named[0];
  EXPECT_EQ(i.kind, "straggler");
  EXPECT_EQ(i.decision, "none");
  ASSERT_EQ(i.suspects.size(), 1u);
  EXPECT_EQ(i.suspects[0].rank, 5);
  EXPECT_EQ(i.suspects[0].node, "n0");
  EXPECT_GT(i.confidence, 0.7);
  EXPECT_NE(i.evidence.at(0).find("10 summaries in a row"), std::string::npos) << i.evidence[0];
  // Named once while it stays slow.
  for (int k = 0; k < 5; ++k, ++round) {
    std::vector<double> compute(8, 100);
    compute[5] = 150;
    Round(job, &d, kT0 + round * 1000, compute, &rng, 0.05);
    EXPECT_TRUE(d.Evaluate(kT0 + round * 1000).empty());
  }
}

TEST(StragglerTest, HealthyJitterNamesNobody) {
  Job job(1, 8, 1);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (int round = 0; round < 500; ++round) {
    std::vector<double> compute(8);
    for (double& c : compute) c = 100 * noise(rng);
    Round(job, &d, kT0 + round * 1000, compute, &rng, 0.10);
    ASSERT_TRUE(d.Evaluate(kT0 + round * 1000).empty()) << "round " << round;
  }
}

TEST(StragglerTest, AnInterruptedStreakStartsOver) {
  Job job(1, 4, 1);
  StragglerDetector d(StragglerOptions{3, 0.2});
  d.SetMembership(job.membership);
  std::mt19937 rng(3);
  std::vector<double> slow = {100, 100, 160, 100};
  std::vector<double> even = {100, 100, 100, 100};
  int64_t at = kT0;
  Round(job, &d, at += 1000, slow, &rng, 0);
  EXPECT_TRUE(d.Evaluate(at).empty());
  EXPECT_TRUE(d.Evaluate(at).empty());  // no new summary: the streak does not advance
  Round(job, &d, at += 1000, slow, &rng, 0);
  EXPECT_TRUE(d.Evaluate(at).empty());
  Round(job, &d, at += 1000, even, &rng, 0);
  EXPECT_TRUE(d.Evaluate(at).empty());
  Round(job, &d, at += 1000, slow, &rng, 0);
  EXPECT_TRUE(d.Evaluate(at).empty());
  Round(job, &d, at += 1000, slow, &rng, 0);
  EXPECT_TRUE(d.Evaluate(at).empty());
  Round(job, &d, at += 1000, slow, &rng, 0);
  EXPECT_EQ(d.Evaluate(at).size(), 1u);
}

// Workers write a summary only when its times moved (ftworker/report_pacing.h): a straggler
// that stays as slow stands on one summary, which counts once per interval of the master's clock.
TEST(StragglerTest, AStandingSummaryCountsOncePerInterval) {
  Job job(1, 4, 1);
  StragglerDetector d(StragglerOptions{3, 0.2, 1000, 25000});
  d.SetMembership(job.membership);
  std::mt19937 rng(3);
  Round(job, &d, kT0, {100, 100, 160, 100}, &rng, 0);
  EXPECT_TRUE(d.Evaluate(kT0).empty());
  EXPECT_TRUE(d.Evaluate(kT0 + 500).empty());   // within the interval: not again
  EXPECT_TRUE(d.Evaluate(kT0 + 1000).empty());  // 2
  EXPECT_TRUE(d.Evaluate(kT0 + 1500).empty());
  const std::vector<proto::Incident> named = d.Evaluate(kT0 + 2000);  // 3
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].suspects.at(0).rank, 2);
}

TEST(StragglerTest, SummariesOlderThanStaleTakeNoPart) {
  Job job(1, 4, 1);
  StragglerDetector d(StragglerOptions{2, 0.2, 1000, 5000});
  d.SetMembership(job.membership);
  std::mt19937 rng(3);
  Round(job, &d, kT0, {100, 100, 160, 100}, &rng, 0);
  // Nobody rewrote anything for longer than stale_ms: the workers may be gone, the times
  // stand for nothing.
  for (int64_t now = kT0 + 6000; now < kT0 + 12000; now += 1000) {
    EXPECT_TRUE(d.Evaluate(now).empty()) << now - kT0;
  }
}

}  // namespace
}  // namespace ft::master
