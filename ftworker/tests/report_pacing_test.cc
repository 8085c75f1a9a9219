#include "ftworker/report_pacing.h"

#include <gtest/gtest.h>

namespace ft::worker {
namespace {

constexpr int64_t kT0 = 1700000000000;
constexpr double kAttentionMs = 500;

proto::RankProgress Calm(int rank) {
  proto::RankProgress p;
  p.rank = rank;
  p.node = "n0";
  p.pid = 100 + rank;
  p.state = "running";
  p.busy = true;
  p.last_call_age_ms = 3;
  proto::CommRow row;
  row.comm_id = 0xabc;
  row.entered_seq = row.started_seq = row.completed_seq = 40;
  row.entered_age_ms = 12;
  p.comms.push_back(row);
  return p;
}

// A healthy rank's table changes at every report (its seqs and ages move): written once, then
// only at the refresh.
TEST(ProgressPacerTest, ACalmRankIsWrittenOnceAndThenAtTheRefresh) {
  ProgressPacer pacer(60000);
  proto::RankProgress p = Calm(3);
  EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, false, kT0));
  for (int64_t t = kT0 + 200; t < kT0 + 60000; t += 200) {
    p.comms[0].entered_seq = p.comms[0].started_seq = p.comms[0].completed_seq += 5;
    p.last_call_age_ms = static_cast<double>(t % 7);
    ASSERT_FALSE(pacer.ShouldWrite(p, kAttentionMs, false, t)) << t - kT0;
  }
  EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, false, kT0 + 60000));
}

TEST(ProgressPacerTest, AChangeOfStateIsWrittenAtOnce) {
  ProgressPacer pacer(60000);
  const proto::RankProgress calm = Calm(1);
  ASSERT_TRUE(pacer.ShouldWrite(calm, kAttentionMs, false, kT0));
  struct Change {
    const char* what;
    void (*apply)(proto::RankProgress*);
  };
  const Change changes[] = {
      {"state", [](proto::RankProgress* p) { p->state = "exited"; }},
      {"pid", [](proto::RankProgress* p) { p->pid = 999; }},
      {"incarnation", [](proto::RankProgress* p) { p->incarnation = 7; }},
      {"busy", [](proto::RankProgress* p) { p->busy = false; }},
      {"a new comm",
       [](proto::RankProgress* p) {
         proto::CommRow row;
         row.comm_id = 0xdef;
         p->comms.push_back(row);
       }},
  };
  int64_t t = kT0;
  for (const Change& c : changes) {
    proto::RankProgress p = calm;
    c.apply(&p);
    EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, false, t += 200)) << c.what;
    EXPECT_FALSE(pacer.ShouldWrite(p, kAttentionMs, false, t += 200)) << c.what << ", unchanged since";
    EXPECT_TRUE(pacer.ShouldWrite(calm, kAttentionMs, false, t += 200)) << c.what << ", back";
  }
}

// A rank that turns attentive is written once then (what it waits on is in Redis before any
// window opens), not at every report: in a job-wide hang every rank is attentive. It is
// written again when it calms down, and every report only when a window asks for it.
TEST(ProgressPacerTest, AWaitingOrSilentOrFrozenRankIsWrittenOnceWhenItTurnsAttentive) {
  struct Case {
    const char* what;
    void (*apply)(proto::RankProgress*);
  };
  const Case cases[] = {
      {"an op entered 600 ms ago, not completed",
       [](proto::RankProgress* p) {
         p->comms[0].entered_seq = 41;
         p->comms[0].entered_age_ms = 600;
       }},
      {"blocked in a call for 600 ms", [](proto::RankProgress* p) { p->blocked_ms = 600; }},
      {"no call for 600 ms", [](proto::RankProgress* p) { p->last_call_age_ms = 600; }},
      {"frozen", [](proto::RankProgress* p) { p->frozen = true; }},
  };
  for (const Case& c : cases) {
    ProgressPacer pacer(60000);
    const proto::RankProgress calm = Calm(2);
    proto::RankProgress p = calm;
    c.apply(&p);
    ASSERT_TRUE(pacer.ShouldWrite(calm, kAttentionMs, false, kT0)) << c.what << ": the first";
    ASSERT_FALSE(pacer.ShouldWrite(calm, kAttentionMs, false, kT0 + 200)) << c.what;
    EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, false, kT0 + 400)) << c.what << ": turned attentive";
    for (int64_t t = kT0 + 600; t < kT0 + 3000; t += 200) {
      ASSERT_FALSE(pacer.ShouldWrite(p, kAttentionMs, false, t)) << c.what << " at " << t - kT0;
    }
    EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, true, kT0 + 3000)) << c.what << ": asked by a window";
    EXPECT_TRUE(pacer.ShouldWrite(calm, kAttentionMs, false, kT0 + 3200)) << c.what << ": calm again";
    // Below the attention age the same wait is calm.
    ProgressPacer relaxed(60000);
    ASSERT_TRUE(relaxed.ShouldWrite(p, 1000, false, kT0)) << c.what;
    if (!p.frozen) {
      EXPECT_FALSE(relaxed.ShouldWrite(p, 1000, false, kT0 + 200)) << c.what;
    }
  }
  // An op in flight but younger than the attention age is the normal case.
  proto::RankProgress young = Calm(2);
  young.comms[0].entered_seq = 41;
  young.comms[0].entered_age_ms = 100;
  EXPECT_FALSE(Attentive(young, kAttentionMs));
}

TEST(ProgressPacerTest, AnAskedTableIsWrittenAtEveryReportAndForgetStartsOver) {
  ProgressPacer pacer(60000);
  const proto::RankProgress p = Calm(4);
  for (int64_t t = kT0; t < kT0 + 1000; t += 200) EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, true, t));
  EXPECT_FALSE(pacer.ShouldWrite(p, kAttentionMs, false, kT0 + 1000));
  pacer.Forget();
  EXPECT_TRUE(pacer.ShouldWrite(p, kAttentionMs, false, kT0 + 1200));
}

proto::RankSummary Window(int rank, double compute_ms, double p50_ms, double p99_ms) {
  proto::RankSummary s;
  s.rank = rank;
  s.node = "n0";
  s.step_ms = s.step_p50_ms = compute_ms + p50_ms;
  s.compute_ms = compute_ms;
  s.comm_wait_ms = p50_ms;
  proto::OpSummary op;
  op.comm_id = 0xabc;
  op.op = proto::OpKind::kAllReduce;
  op.count = 50;
  op.p50_ms = p50_ms;
  op.p99_ms = op.max_ms = p99_ms;
  s.ops.push_back(op);
  return s;
}

TEST(SummaryPacerTest, SteadyWindowsAreWrittenOnlyAtTheRefresh) {
  SummaryPacer pacer(10000, 0.15);
  int written = 0;
  for (int k = 0; k < 30; ++k) {
    // ±8% around the same times: what a loaded host's healthy rank shows.
    const double wobble = (k % 3 == 0 ? 1.08 : k % 3 == 1 ? 0.92 : 1.0);
    proto::RankSummary s = Window(0, 25 * wobble, 12 / wobble, 20 * wobble);
    if (pacer.Next(&s, kT0 + k * 1000)) ++written;
  }
  EXPECT_EQ(written, 3);  // the first, then at 10 s and 20 s
}

TEST(SummaryPacerTest, AStragglersComputeIsWrittenWithinThreeWindows) {
  SummaryPacer pacer(10000, 0.15);
  for (int k = 0; k < 5; ++k) {
    proto::RankSummary s = Window(0, 25, 12, 20);
    pacer.Next(&s, kT0 + k * 1000);
  }
  int k = 5;
  proto::RankSummary s;
  for (; k < 10; ++k) {
    s = Window(0, 37.5, 2, 20);  // 1.5x the compute, arrives last: waits least
    if (pacer.Next(&s, kT0 + k * 1000)) break;
  }
  EXPECT_LE(k, 7) << "written only at window " << k;
  EXPECT_GT(s.compute_ms, 25 * 1.15);  // what goes out is the smoothed value, already moved
  EXPECT_LT(s.compute_ms, 37.5);
}

// The master counts a rank in a job-wide slowdown while its worker says it is slow: a change of
// that verdict goes out with the window it happened in, times steady or not.
TEST(SummaryPacerTest, TheWorkersSlowdownVerdictIsWrittenInTheWindowItChanged) {
  SummaryPacer pacer(10000, 0.15);
  // Steady times, one window a second, the verdict as given: whether that window is written.
  int64_t at = kT0;
  auto written = [&](int verdict) {
    proto::RankSummary s = Window(0, 25, 12, 20);
    s.slowdown = verdict;
    const bool out = pacer.Next(&s, at);
    at += 1000;
    EXPECT_EQ(s.slowdown, verdict);
    return out;
  };
  EXPECT_TRUE(written(0));  // the first
  EXPECT_FALSE(written(0));
  EXPECT_TRUE(written(1));
  EXPECT_FALSE(written(1));
  EXPECT_TRUE(written(0));
}

// A link that turned slow raises the op's fastest times (p10, what the slow-link detector
// compares) before its median moves much: that alone gets the summary written, smoothed.
TEST(SummaryPacerTest, AnOpsFastestTimesThatRoseAreWrittenWithinThreeWindows) {
  SummaryPacer pacer(10000, 0.15);
  auto window = [](double p10_ms) {
    proto::RankSummary s = Window(0, 25, 12, 20);
    s.ops.at(0).p10_ms = p10_ms;
    return s;
  };
  for (int k = 0; k < 5; ++k) {
    proto::RankSummary s = window(3);
    pacer.Next(&s, kT0 + k * 1000);
  }
  int k = 5;
  proto::RankSummary s;
  for (; k < 10; ++k) {
    s = window(9);
    if (pacer.Next(&s, kT0 + k * 1000)) break;
  }
  EXPECT_LE(k, 7) << "written only at window " << k;
  EXPECT_GT(s.ops.at(0).p10_ms, 3 * 1.15);
  EXPECT_LT(s.ops.at(0).p10_ms, 9);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p50_ms, 12);
}

// A start pays once (the first collectives connect): its first window is high, never low. The
// averages come down to the op's time within the settling windows, and a rank run again in place
// (its steps went back) settles again; a settled average still takes one high window at half.
TEST(SummaryPacerTest, AnAverageSeededByAStartsFirstWindowComesDownWhileItSettles) {
  SummaryPacer pacer(10000, 0.15);
  auto window = [](double ms, uint64_t steps) {
    proto::RankSummary s = Window(0, 25, ms, 40);
    s.ops.at(0).p10_ms = ms / 2;
    s.steps = steps;
    return s;
  };
  proto::RankSummary s = window(26, 0);
  pacer.Next(&s, kT0);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p50_ms, 26);
  s = window(2, 7);
  pacer.Next(&s, kT0 + 1000);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p50_ms, 2);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p10_ms, 1);
  s = window(2.2, 14);
  pacer.Next(&s, kT0 + 2000);
  EXPECT_NEAR(s.ops.at(0).p50_ms, 0.7 * 2 + 0.3 * 2.2, 0.001) << "settling: a higher window is mixed in";
  // Settled (three windows): one high window counts at most twice the average.
  s = window(2, 21);
  pacer.Next(&s, kT0 + 3000);
  const double settled = s.ops.at(0).p50_ms;
  s = window(26, 28);
  pacer.Next(&s, kT0 + 4000);
  EXPECT_NEAR(s.ops.at(0).p50_ms, 0.7 * settled + 0.3 * 2 * settled, 0.001);
  // Relaunched in place: steps start again, and so does settling.
  s = window(30, 0);
  pacer.Next(&s, kT0 + 5000);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p50_ms, 30);
  s = window(2, 7);
  pacer.Next(&s, kT0 + 6000);
  EXPECT_DOUBLE_EQ(s.ops.at(0).p50_ms, 2);
}

// An op seen complete at the poller's first look takes 0 ms: an average of 0 is a time, not
// "nothing yet", and one slow window moves it by at most the noise floor's share.
TEST(SummaryPacerTest, AnOpsAverageOfZeroIsATime) {
  SummaryPacer pacer(10000, 0.15);
  proto::RankSummary s;
  for (int k = 0; k < 4; ++k) {
    s = Window(0, 25, 0, 5);
    s.ops.at(0).p10_ms = 0;
    pacer.Next(&s, kT0 + k * 1000);
  }
  s = Window(0, 25, 9, 20);
  s.ops.at(0).p10_ms = 8.5;
  pacer.Next(&s, kT0 + 4000);
  EXPECT_LE(s.ops.at(0).p10_ms, 0.3 * 0.5 + 1e-9);
  EXPECT_LE(s.ops.at(0).p50_ms, 0.3 * 0.5 + 1e-9);
}

// One window that held a 20 s host pause (its median compute 200x the rank's) must not leave
// the rank looking 20% slower than its peers for the straggler's 10 summaries in a row; a
// lasting 2x slowdown is still followed within a few windows.
TEST(SummaryPacerTest, OneOutlierWindowMovesTheTypicalTimeOnceALastingChangeIsFollowed) {
  SummaryPacer pacer(10000, 0.15);
  int64_t t = kT0;
  proto::RankSummary s;
  for (int k = 0; k < 5; ++k) {
    s = Window(0, 100, 12, 20);
    pacer.Next(&s, t += 1000);
  }
  s = Window(0, 20000, 12, 20);
  pacer.Next(&s, t += 1000);
  EXPECT_LE(s.compute_ms, 130.001) << "one window moves the average by at most 30%";
  int above = 0;
  for (int k = 0; k < 10; ++k) {
    s = Window(0, 100, 12, 20);
    pacer.Next(&s, t += 1000);
    if (s.compute_ms >= 120) ++above;
  }
  EXPECT_LE(above, 2) << "windows after the outlier still 20% above: " << above;
  for (int k = 0; k < 8; ++k) {
    s = Window(0, 200, 12, 20);
    pacer.Next(&s, t += 1000);
  }
  EXPECT_GT(s.compute_ms, 180) << "a lasting 2x slowdown is followed";
}

// Windows that end no step (shorter than a step, a rank restoring or hung) leave the step's
// averages as they are: they used to pull them down 15% each.
TEST(SummaryPacerTest, AWindowWithoutAStepLeavesTheStepAveragesAlone) {
  SummaryPacer pacer(10000, 0.15);
  int64_t t = kT0;
  proto::RankSummary s;
  for (int k = 0; k < 5; ++k) {
    s = Window(0, 180, 20, 30);
    pacer.Next(&s, t += 200);
  }
  ASSERT_NEAR(s.step_p50_ms, 200, 0.01);
  for (int k = 0; k < 10; ++k) {
    s = Window(0, 0, 0, 30);  // no step ended: the medians of nothing
    s.step_ms = 200;          // the last step, as TakeSummary keeps it
    pacer.Next(&s, t += 200);
    EXPECT_NEAR(s.step_p50_ms, 200, 0.01) << "after " << k + 1 << " windows without a step";
    EXPECT_NEAR(s.compute_ms, 180, 0.01);
    EXPECT_NEAR(s.comm_wait_ms, 20, 0.01);
  }
  s = Window(0, 270, 30, 30);  // a step again, slower: followed as before
  pacer.Next(&s, t += 200);
  EXPECT_GT(s.step_p50_ms, 200);
}

// A rank's first windows often end no step (it starts, it restores): the first step's time is
// the average from there, not 30% of it climbing back (the goodput ledger took such a window's
// 61 ms for the normal step of a 200 ms job).
TEST(SummaryPacerTest, TheFirstStepAfterWindowsWithoutOneIsTheAverage) {
  SummaryPacer pacer(10000, 0.15);
  int64_t t = kT0;
  proto::RankSummary s = Window(0, 0, 0, 30);
  pacer.Next(&s, t += 200);
  EXPECT_EQ(s.step_p50_ms, 0) << "no step yet: nothing to say";
  s = Window(0, 180, 20, 30);
  pacer.Next(&s, t += 200);
  EXPECT_NEAR(s.step_p50_ms, 200, 0.01);
  EXPECT_NEAR(s.compute_ms, 180, 0.01);
}

TEST(SummaryPacerTest, ATailThatRoseByHalfIsWrittenAtOnceAndTimesAreRoundedToTheMicrosecond) {
  SummaryPacer pacer(10000, 0.15);
  proto::RankSummary s = Window(0, 25.123456789, 12, 20);
  ASSERT_TRUE(pacer.Next(&s, kT0));
  EXPECT_DOUBLE_EQ(s.compute_ms, 25.123);
  s = Window(0, 25.1, 12, 28);  // +40%: within the timeouts' margin
  EXPECT_FALSE(pacer.Next(&s, kT0 + 1000));
  s = Window(0, 25.1, 12, 31);  // +55%
  EXPECT_TRUE(pacer.Next(&s, kT0 + 2000));
  EXPECT_DOUBLE_EQ(s.ops.at(0).p99_ms, 31);  // tails go out as measured, not averaged
}

TEST(SummaryPacerTest, AWrittenSummaryCountsEveryOpAndTheLargestTailSinceTheLastOne) {
  SummaryPacer pacer(10000, 0.15);
  proto::RankSummary s = Window(0, 25, 12, 20);
  ASSERT_TRUE(pacer.Next(&s, kT0));
  EXPECT_EQ(s.ops.at(0).count, 50u);
  s = Window(0, 25, 12, 26);  // +30%: not written, but its tail is kept
  ASSERT_FALSE(pacer.Next(&s, kT0 + 1000));
  s = Window(0, 25, 12, 21);
  ASSERT_FALSE(pacer.Next(&s, kT0 + 2000));
  s = Window(0, 25, 12, 20);
  ASSERT_TRUE(pacer.Next(&s, kT0 + 10000));  // the refresh
  EXPECT_EQ(s.ops.at(0).count, 150u) << "the three windows since the last one written";
  EXPECT_DOUBLE_EQ(s.ops.at(0).p99_ms, 26);
  EXPECT_DOUBLE_EQ(s.ops.at(0).max_ms, 26);
  s = Window(0, 25, 12, 20);
  ASSERT_FALSE(pacer.Next(&s, kT0 + 11000));
  s = Window(0, 25, 12, 20);
  ASSERT_TRUE(pacer.Next(&s, kT0 + 20000));
  EXPECT_EQ(s.ops.at(0).count, 100u) << "counted from the last one written, not again";
}

TEST(SummaryPacerTest, ANewOpOrSampledKernelsAreWrittenAtOnce) {
  SummaryPacer pacer(10000, 0.15);
  proto::RankSummary s = Window(0, 25, 12, 20);
  ASSERT_TRUE(pacer.Next(&s, kT0));
  s = Window(0, 25, 12, 20);
  proto::OpSummary send;
  send.comm_id = 0xdef;
  send.op = proto::OpKind::kSend;
  s.ops.push_back(send);
  EXPECT_TRUE(pacer.Next(&s, kT0 + 1000));
  s = Window(0, 25, 12, 20);
  s.kernel_samples.push_back(proto::KernelSummary{});
  EXPECT_TRUE(pacer.Next(&s, kT0 + 2000));
}

}  // namespace
}  // namespace ft::worker
