#include "ftmaster/core/straggler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

constexpr int64_t kT0 = 1'700'000'000'000;

// The steps a rank has run by `at`: one every 100 ms from kT0.
uint64_t StepsAt(int64_t at) { return static_cast<uint64_t>(std::max<int64_t>(0, at - kT0) / 100); }

// One summary round of a dp=8 job: rank r computes compute[r] ms per step; in the gradient
// allreduce every rank waits for the slowest, so its collective time is the gap plus the
// transfer time. Each summary counts `steps` steps (by default StepsAt(at)).
void Round(const Job& job, StragglerDetector* d, int64_t at, const std::vector<double>& compute,
           std::mt19937* rng, double jitter, std::optional<uint64_t> steps = std::nullopt) {
  std::uniform_real_distribution<double> noise(1 - jitter, 1 + jitter);
  const double slowest = *std::max_element(compute.begin(), compute.end());
  for (int r = 0; r < job.world(); ++r) {
    proto::RankSummary s;
    s.rank = r;
    s.node = job.membership[static_cast<size_t>(r)].node;
    s.unix_ms = at;
    s.steps = steps.value_or(StepsAt(at));
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

// A job stalled (a 20 s host pause: the master's window open) writes no new summaries: the
// last ones stand, and they do not count as the rank running at their times any more. Its
// workers still rewrite each rank's summary now and then (summary_refresh: a new time, the same
// steps and times): those refreshes count nothing either.
TEST(StragglerTest, AStandingOrRefreshedSummaryOfAStalledJobCountsNothing) {
  Job job(1, 4, 1);
  StragglerDetector d(StragglerOptions{3, 0.2, 1000, 25000});
  d.SetMembership(job.membership);
  std::mt19937 rng(3);
  Round(job, &d, kT0, {100, 100, 160, 100}, &rng, 0);
  EXPECT_TRUE(d.Evaluate(kT0).empty());  // 1
  d.SetStalled(true);
  for (int64_t t = 1000; t <= 20000; t += 1000) {
    EXPECT_TRUE(d.Evaluate(kT0 + t).empty()) << "standing, " << t;
    Round(job, &d, kT0 + t + 500, {100, 100, 160, 100}, &rng, 0, StepsAt(kT0));  // a refresh
    EXPECT_TRUE(d.Evaluate(kT0 + t + 500).empty()) << "refreshed, " << t + 500;
  }
  EXPECT_TRUE(d.named().empty());
  d.SetStalled(false);  // the job runs again: the streak goes on where it stood
  EXPECT_TRUE(d.Evaluate(kT0 + 21000).empty());  // 2
  const std::vector<proto::Incident> named = d.Evaluate(kT0 + 22000);  // 3
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

// dp=2 tp=4 (Megatron order): four DP comms {t, t+4} of one role, one TP comm per DP index.
// Every rank computes compute[r]; in each DP all-reduce the members wait for the later one and
// then transfer for transfer[t] ms; the TP all-reduces take 3 ms plus the wait. `fastest`: the
// DP ops' p10 transfer per comm (what the host added least to); none: not reported (an older
// worker), the detector takes the p50.
void LinkRound(const Job& job, StragglerDetector* d, int64_t at, const std::vector<double>& compute,
               const std::vector<double>& transfer, std::optional<uint64_t> steps = std::nullopt,
               const std::vector<double>& fastest = {}) {
  for (int r = 0; r < job.world(); ++r) {
    const int t = r % 4, dp = r / 4;
    proto::RankSummary s;
    s.rank = r;
    s.node = job.membership[static_cast<size_t>(r)].node;
    s.unix_ms = at;
    s.steps = steps.value_or(StepsAt(at));
    s.compute_ms = compute[static_cast<size_t>(r)];
    const double later = std::max(compute[static_cast<size_t>(t)], compute[static_cast<size_t>(t + 4)]);
    proto::OpSummary dp_op;
    dp_op.comm_id = job.DpComm(t, 0);
    dp_op.op = proto::OpKind::kAllReduce;
    dp_op.bucket = 2;
    dp_op.count = 4;
    dp_op.p50_ms = later - s.compute_ms + transfer[static_cast<size_t>(t)];
    if (!fastest.empty()) dp_op.p10_ms = later - s.compute_ms + fastest[static_cast<size_t>(t)];
    s.ops.push_back(dp_op);
    proto::OpSummary tp_op;
    tp_op.comm_id = job.TpComm(dp, 0);
    tp_op.op = proto::OpKind::kAllReduce;
    tp_op.bucket = 0;
    tp_op.count = 8;
    double slowest = 0;
    for (int k = 0; k < 4; ++k) slowest = std::max(slowest, compute[static_cast<size_t>(dp * 4 + k)]);
    tp_op.p50_ms = slowest - s.compute_ms + 3;
    s.ops.push_back(tp_op);
    d->Add(s);
  }
}

TEST(StragglerTest, ASlowLinkNamesBothEndsAndNoComputeStraggler) {
  Job job(4, 2, 1, 4);  // ranks 0-3 on n0, 4-7 on n1
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  const std::vector<double> compute(8, 100);
  const std::vector<double> transfer = {5, 25, 5, 5};  // DP comm {1, 5} transfers 5x slower
  std::vector<proto::Incident> named;
  int round = 0;
  for (; round < 30 && named.empty(); ++round) {
    LinkRound(job, &d, kT0 + round * 1000, compute, transfer);
    named = d.Evaluate(kT0 + round * 1000);
  }
  EXPECT_EQ(round, 10);  // straggler_steps summaries in a row
  ASSERT_EQ(named.size(), 1u);
  const proto::Incident& i = named[0];
  EXPECT_EQ(i.kind, "slow-link");
  EXPECT_EQ(i.decision, "none");
  EXPECT_EQ(i.comm_id, job.DpComm(1, 0));
  ASSERT_EQ(i.suspects.size(), 2u);
  EXPECT_EQ(i.suspects[0].rank, 1);
  EXPECT_EQ(i.suspects[0].node, "n0");
  EXPECT_EQ(i.suspects[1].rank, 5);
  EXPECT_EQ(i.suspects[1].node, "n1");
  EXPECT_NE(i.message.find("n0 and n1"), std::string::npos) << i.message;
  EXPECT_NE(i.message.find("wait 25 ms for the transfer where their role's other comms wait 5 ms (5.00x)"),
            std::string::npos) << i.message;
  EXPECT_TRUE(d.named().empty()) << "a slow link is not a compute straggler";
  EXPECT_EQ(d.named_links().size(), 1u);
  for (int more = 0; more < 5; ++more) {
    LinkRound(job, &d, kT0 + (round + more) * 1000, compute, transfer);
    EXPECT_TRUE(d.Evaluate(kT0 + (round + more) * 1000).empty()) << "named once per episode";
  }
  // The link recovers: the episode ends.
  LinkRound(job, &d, kT0 + 60000, compute, {5, 5, 5, 5});
  EXPECT_TRUE(d.Evaluate(kT0 + 60000).empty());
  EXPECT_TRUE(d.named_links().empty());
}

// On an idle fabric (gpusim's, a node's NVLink) the other links' transfer is under the summaries'
// resolution: 0 ms. The slow one is named with both times and no ratio (once "infx").
TEST(StragglerTest, ASlowLinkBesideLinksOfNoMeasurableTimeIsNamedWithBothTimes) {
  Job job(4, 2, 1, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  const std::vector<double> compute(8, 40);
  std::vector<proto::Incident> named;
  for (int round = 0; round < 30 && named.empty(); ++round) {
    LinkRound(job, &d, kT0 + round * 1000, compute, {0, 20, 0, 0});
    named = d.Evaluate(kT0 + round * 1000);
  }
  ASSERT_EQ(named.size(), 1u);
  const proto::Incident& i = named[0];
  EXPECT_EQ(i.comm_id, job.DpComm(1, 0));
  EXPECT_NE(i.message.find("wait 20 ms for the transfer where their role's other comms wait 0 ms;"),
            std::string::npos) << i.message;
  for (const std::string& text : std::vector<std::string>{i.message, i.evidence.at(0), i.suspects.at(0).why}) {
    EXPECT_EQ(text.find("inf"), std::string::npos) << text;
    EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  }
  EXPECT_DOUBLE_EQ(i.confidence, 0.95);
}

// A pipeline stage whose all-reduce runs while the node's CPUs are busy: its medians stand a few
// ms above its role's for many summaries, its fastest ops keep pace. No slow link; a link that
// is slow slows the fastest ops too, and is named on them.
TEST(StragglerTest, ABusyHostsMediansAreNoSlowLinkWhileItsFastestOpsKeepPace) {
  Job job(4, 2, 1, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  const std::vector<double> compute(8, 100);
  for (int round = 0; round < 30; ++round) {
    LinkRound(job, &d, kT0 + round * 1000, compute, {4, 9, 4, 4}, std::nullopt, {3, 3.2, 3, 3});
    EXPECT_TRUE(d.Evaluate(kT0 + round * 1000).empty()) << round;
  }
  EXPECT_TRUE(d.named_links().empty());
  std::vector<proto::Incident> named;
  int round = 30;
  for (; round < 60 && named.empty(); ++round) {
    LinkRound(job, &d, kT0 + round * 1000, compute, {4, 25, 4, 4}, std::nullopt, {3, 23, 3, 3});
    named = d.Evaluate(kT0 + round * 1000);
  }
  EXPECT_EQ(round, 40);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].comm_id, job.DpComm(1, 0));
  EXPECT_NE(named[0].evidence.at(0).find("p10"), std::string::npos) << named[0].evidence[0];
  EXPECT_NE(named[0].evidence.at(0).find("23 ms against the median 3 ms"), std::string::npos) << named[0].evidence[0];
}

TEST(StragglerTest, AStalledJobsStandingSummariesNameNoSlowLink) {
  Job job(4, 2, 1, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  const std::vector<double> compute(8, 100);
  // The summaries as the stall found them: one comm's transfer, averaged under load, above its
  // role's; then 20 s of the job stalled, nothing new written.
  LinkRound(job, &d, kT0, compute, {5, 9, 5, 5});
  EXPECT_TRUE(d.Evaluate(kT0).empty());
  d.SetStalled(true);
  for (int64_t t = 1000; t <= 20000; t += 1000) EXPECT_TRUE(d.Evaluate(kT0 + t).empty()) << t;
  EXPECT_TRUE(d.named_links().empty());
  // Nor do the workers' refreshes of those summaries (a new time, the same steps).
  for (int64_t t = 1000; t <= 20000; t += 1000) {
    LinkRound(job, &d, kT0 + t, compute, {5, 25, 5, 5}, StepsAt(kT0));
    EXPECT_TRUE(d.Evaluate(kT0 + t).empty()) << t;
  }
  EXPECT_TRUE(d.named_links().empty());
  // New summaries of more steps still count while stalled: a link slow in each is named.
  std::vector<proto::Incident> named;
  int round = 1;
  for (; round < 30 && named.empty(); ++round) {
    LinkRound(job, &d, kT0 + 20000 + round * 1000, compute, {5, 25, 5, 5});
    named = d.Evaluate(kT0 + 20000 + round * 1000);
  }
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].comm_id, job.DpComm(1, 0));
}

TEST(StragglerTest, AComputeStragglerIsNoSlowLink) {
  Job job(4, 2, 1, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  std::vector<double> compute(8, 100);
  compute[5] = 150;  // rank 5 computes 1.5x: its DP peer 1 waits 50 ms more in their all-reduce
  std::vector<proto::Incident> all;
  for (int round = 0; round < 30; ++round) {
    LinkRound(job, &d, kT0 + round * 1000, compute, {5, 5, 5, 5});
    for (proto::Incident& i : d.Evaluate(kT0 + round * 1000)) all.push_back(std::move(i));
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, "straggler");
  EXPECT_EQ(all[0].suspects[0].rank, 5);
  EXPECT_TRUE(d.named_links().empty());
}

// Two pipeline stages (tp=2, dp=2, pp=2: stage 0 on n0, stage 1 on n1), one p2p comm per
// (tp, dp) pair of stages. Each stage sends one way at once (its receiver waits: the send's
// p50 is the transfer) and receives the other way after waiting for the other stage's work.
// `transfer`: per pp comm (t + 2 d); `wait_extra`: per rank, what its receive also waits.
void PipelineRound(const Job& job, StragglerDetector* d, int64_t at, const std::vector<double>& transfer,
                   const std::vector<double>& wait_extra) {
  for (int r = 0; r < job.world(); ++r) {
    const int t = r % 2, dp = (r / 2) % 2, stage = r / 4;
    proto::RankSummary s;
    s.rank = r;
    s.node = job.membership[static_cast<size_t>(r)].node;
    s.unix_ms = at;
    s.compute_ms = 100;
    const double link = transfer[static_cast<size_t>(t + 2 * dp)];
    proto::OpSummary send;
    send.comm_id = job.PpComm(t, dp);
    send.op = proto::OpKind::kSend;
    send.count = 10;
    send.p50_ms = link;
    s.ops.push_back(send);
    proto::OpSummary recv = send;
    recv.op = proto::OpKind::kRecv;
    recv.p50_ms = (stage == 0 ? 60 : 30) + wait_extra[static_cast<size_t>(r)] + link;
    s.ops.push_back(recv);
    proto::OpSummary tp_op;
    tp_op.comm_id = job.TpComm(dp, stage);
    tp_op.op = proto::OpKind::kAllReduce;
    tp_op.count = 10;
    tp_op.p50_ms = 3;
    s.ops.push_back(tp_op);
    d->Add(s);
  }
}

TEST(StragglerTest, ASlowPipelineLinkNamesItsTwoStages) {
  Job job(2, 2, 2, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  const std::vector<double> transfer = {0.5, 20.5, 0.6, 0.4};  // ranks 1 and 5's link
  std::vector<proto::Incident> all;
  for (int round = 0; round < 20; ++round) {
    PipelineRound(job, &d, kT0 + round * 1000, transfer, std::vector<double>(8, 0));
    for (proto::Incident& i : d.Evaluate(kT0 + round * 1000)) all.push_back(std::move(i));
  }
  ASSERT_EQ(all.size(), 1u);
  const proto::Incident& i = all[0];
  EXPECT_EQ(i.kind, "slow-link");
  EXPECT_EQ(i.comm_id, job.PpComm(1, 0));
  ASSERT_EQ(i.suspects.size(), 2u);
  EXPECT_EQ(i.suspects[0].rank, 1);
  EXPECT_EQ(i.suspects[0].node, "n0");
  EXPECT_EQ(i.suspects[1].rank, 5);
  EXPECT_EQ(i.suspects[1].node, "n1");
  EXPECT_NE(i.evidence[0].find("send/recv"), std::string::npos) << i.evidence[0];
  EXPECT_TRUE(d.named().empty());
}

// Stage 1's rank 5 computes 30 ms longer: rank 1 waits that much more for its gradients, but
// every message still has an end that waits for nobody: no slow link.
TEST(StragglerTest, ALateStageIsNoSlowPipelineLink) {
  Job job(2, 2, 2, 4);
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  std::vector<double> wait_extra(8, 0);
  wait_extra[1] = 30;
  for (int round = 0; round < 20; ++round) {
    PipelineRound(job, &d, kT0 + round * 1000, {0.5, 0.5, 0.6, 0.4}, wait_extra);
    for (const proto::Incident& i : d.Evaluate(kT0 + round * 1000)) ADD_FAILURE() << i.kind << ": " << i.message;
  }
  EXPECT_TRUE(d.named_links().empty());
}

TEST(StragglerTest, TwoCommsOfARoleCannotSayWhichLinkIsSlow) {
  Job job(2, 2, 1, 2);  // two DP comms only
  StragglerDetector d(StragglerOptions{});
  d.SetMembership(job.membership);
  for (int round = 0; round < 30; ++round) {
    for (int r = 0; r < 4; ++r) {
      proto::RankSummary s;
      s.rank = r;
      s.node = job.membership[static_cast<size_t>(r)].node;
      s.unix_ms = kT0 + round * 1000;
      s.compute_ms = 100;
      proto::OpSummary op;
      op.comm_id = job.DpComm(r % 2, 0);
      op.op = proto::OpKind::kAllReduce;
      op.count = 4;
      op.p50_ms = r % 2 == 1 ? 25 : 5;
      s.ops.push_back(op);
      d.Add(s);
    }
    EXPECT_TRUE(d.Evaluate(kT0 + round * 1000).empty()) << round;
  }
}

}  // namespace
}  // namespace ft::master
