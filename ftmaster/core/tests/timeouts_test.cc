#include "ftmaster/core/timeouts.h"

#include <gtest/gtest.h>

#include <random>

namespace ft::master {
namespace {

constexpr uint64_t kComm = 0x3fa2000000000001ULL;
constexpr int64_t kT0 = 1'700'000'000'000;

TimeoutOptions Options() {
  TimeoutOptions o;  // the configuration table's defaults
  o.floor_ms = 1000;
  o.ceiling_ms = 600000;
  o.warmup_ms = 50000;
  o.multiplier = 4;
  o.min_samples = 20;
  return o;
}

proto::RankSummary Summary(int rank, int64_t at, double max_ms, double step_ms, uint64_t count = 10) {
  proto::RankSummary s;
  s.rank = rank;
  s.node = "n0";
  s.unix_ms = at;
  s.step_ms = step_ms;
  s.step_p50_ms = step_ms;
  proto::OpSummary op;
  op.comm_id = kComm;
  op.op = proto::OpKind::kAllReduce;
  op.bucket = 2;
  op.count = count;
  op.p50_ms = max_ms / 4;
  op.p99_ms = max_ms * 0.9;
  op.max_ms = max_ms;
  s.ops.push_back(op);
  return s;
}

TEST(TimeoutsTest, OptionsComeFromTheConfigurationTable) {
  TimeoutOptions o = TimeoutOptions::FromConfig(Config::Defaults());
  EXPECT_DOUBLE_EQ(o.floor_ms, 1000);
  EXPECT_DOUBLE_EQ(o.ceiling_ms, 600000);
  EXPECT_DOUBLE_EQ(o.warmup_ms, 50000);  // FT_TIMEOUT_WARMUP: under a minute, not 10
  EXPECT_DOUBLE_EQ(o.multiplier, 4);
  EXPECT_EQ(o.min_samples, 20u);
}

TEST(TimeoutsTest, WarmUpPublishesTheWarmUpTimeoutAndNoEntries) {
  // Before any step is known the default is FT_TIMEOUT_WARMUP, so a hang in the first steps
  // is looked at within a minute; the 10-minute ceiling would hide it that long.
  TimeoutModel m(TimeoutOptions::FromConfig(Config::Defaults()));
  EXPECT_EQ(m.table().version, 0u);
  ASSERT_TRUE(m.Update(kT0));
  EXPECT_EQ(m.table().version, 1u);
  EXPECT_DOUBLE_EQ(m.table().default_ms, 50000);
  EXPECT_LT(m.table().default_ms, 60000);
  EXPECT_TRUE(m.table().entries.empty());
  EXPECT_EQ(m.table().unix_ms, kT0);
  // Ten samples (fewer than 20) and no step: nothing changes.
  m.Add(Summary(0, kT0 + 1000, 3000, 0, 10));
  EXPECT_FALSE(m.Update(kT0 + 1000));
  EXPECT_EQ(m.table().version, 1u);
  EXPECT_TRUE(m.table().entries.empty());
}

TEST(TimeoutsTest, WarmUpTimeoutIsClampedAndGivesWayToTheStep) {
  TimeoutOptions o = Options();
  o.warmup_ms = 200;  // below the floor
  TimeoutModel low(o);
  ASSERT_TRUE(low.Update(kT0));
  EXPECT_DOUBLE_EQ(low.table().default_ms, 1000);
  o.warmup_ms = 3'600'000;  // above the ceiling
  TimeoutModel high(o);
  ASSERT_TRUE(high.Update(kT0));
  EXPECT_DOUBLE_EQ(high.table().default_ms, 600000);
  // Once a step is known the default follows it (here above the warm-up value).
  TimeoutModel m(Options());
  ASSERT_TRUE(m.Update(kT0));
  m.Add(Summary(0, kT0 + 1000, 100, 20000, 1));
  ASSERT_TRUE(m.Update(kT0 + 1000));
  EXPECT_DOUBLE_EQ(m.table().default_ms, 80000);
}

TEST(TimeoutsTest, ConvergesToMultiplierTimesTail) {
  TimeoutModel m(Options());
  ASSERT_TRUE(m.Update(kT0));
  for (int i = 1; i <= 2; ++i) {  // two summaries of 10 ops: 20 samples
    for (int r = 0; r < 4; ++r) m.Add(Summary(r, kT0 + i * 1000, 2500 + r * 100, 500));
  }
  ASSERT_TRUE(m.Update(kT0 + 2000));
  const proto::TimeoutTable& t = m.table();
  EXPECT_EQ(t.version, 2u);
  EXPECT_DOUBLE_EQ(t.default_ms, 4 * 500);  // multiplier x step
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].comm_id, kComm);
  EXPECT_EQ(t.entries[0].op, proto::OpKind::kAllReduce);
  EXPECT_EQ(t.entries[0].bucket, 2);
  EXPECT_DOUBLE_EQ(t.entries[0].ms, 4 * 2800);  // multiplier x the largest max_ms
}

TEST(TimeoutsTest, AnOpWithAHistoryIsTimedByItsOwnTailNotTheStep) {
  TimeoutModel m(Options());
  for (int i = 1; i <= 3; ++i) m.Add(Summary(0, kT0 + i * 1000, 400, 900));
  ASSERT_TRUE(m.Update(kT0 + 3000));
  // Ops never seen get multiplier x step; this one gets multiplier x its 400 ms tail, so a
  // 1 s-step job is not held to a 3.6 s timeout.
  EXPECT_DOUBLE_EQ(m.table().default_ms, 3600);
  ASSERT_EQ(m.table().entries.size(), 1u);
  EXPECT_DOUBLE_EQ(m.table().entries[0].ms, 1600);
}

TEST(TimeoutsTest, FloorAndCeiling) {
  TimeoutModel m(Options());
  for (int i = 1; i <= 3; ++i) {
    proto::RankSummary s = Summary(0, kT0 + i * 1000, 10, 100);  // 4 x 100 ms < floor
    proto::OpSummary big = s.ops[0];
    big.op = proto::OpKind::kAllGather;
    big.max_ms = 400000;  // 4 x 400 s > ceiling
    s.ops.push_back(big);
    m.Add(s);
  }
  ASSERT_TRUE(m.Update(kT0 + 3000));
  EXPECT_DOUBLE_EQ(m.table().default_ms, 1000);
  ASSERT_EQ(m.table().entries.size(), 1u);
  EXPECT_EQ(m.table().entries[0].op, proto::OpKind::kAllGather);
  EXPECT_DOUBLE_EQ(m.table().entries[0].ms, 600000);
}

TEST(TimeoutsTest, VersionChangesOnlyBeyondTenPercent) {
  TimeoutModel m(Options());
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.97, 1.03);
  int64_t at = kT0;
  for (int i = 0; i < 3; ++i) m.Add(Summary(0, at += 1000, 3000, 200));
  ASSERT_TRUE(m.Update(at));
  const uint64_t version = m.table().version;
  const double ms = m.table().entries.at(0).ms;
  EXPECT_DOUBLE_EQ(ms, 12000);
  // Small jitter (the window keeps the max, so it can only creep up by 3%): no new version.
  for (int i = 0; i < 100; ++i) {
    m.Add(Summary(0, at += 1000, 3000 * jitter(rng), 200 * jitter(rng)));
    EXPECT_FALSE(m.Update(at));
  }
  EXPECT_EQ(m.table().version, version);
  EXPECT_DOUBLE_EQ(m.table().entries.at(0).ms, ms);
  // A 50% longer tail: a new version at once.
  m.Add(Summary(0, at += 1000, 4500, 200));
  ASSERT_TRUE(m.Update(at));
  EXPECT_EQ(m.table().version, version + 1);
  EXPECT_DOUBLE_EQ(m.table().entries.at(0).ms, 18000);
  // Ten quiet minutes later the long tail has left the window: the timeout comes back down.
  for (int i = 0; i < 12; ++i) m.Add(Summary(0, at += 60000, 2000, 200));
  ASSERT_TRUE(m.Update(at));
  EXPECT_EQ(m.table().version, version + 2);
  EXPECT_DOUBLE_EQ(m.table().entries.at(0).ms, 8000);
}

TEST(TimeoutsTest, RepeatedSummariesAreCountedOnce) {
  TimeoutModel m(Options());
  proto::RankSummary s = Summary(0, kT0 + 1000, 3000, 0, 10);
  for (int i = 0; i < 5; ++i) m.Add(s);  // the same hash read five times
  ASSERT_TRUE(m.Update(kT0 + 1000));
  EXPECT_TRUE(m.table().entries.empty());  // still 10 samples
  // Several ranks reporting the same collectives do not add up either.
  for (int r = 1; r < 8; ++r) m.Add(Summary(r, kT0 + 1000, 3000, 0, 10));
  EXPECT_FALSE(m.Update(kT0 + 1000));
  m.Add(Summary(0, kT0 + 2000, 3000, 0, 10));
  ASSERT_TRUE(m.Update(kT0 + 2000));
  EXPECT_EQ(m.table().entries.size(), 1u);
}

TEST(TimeoutsTest, RestoredTableKeepsItsVersion) {
  TimeoutModel m(Options());
  proto::TimeoutTable published;
  published.version = 7;
  published.default_ms = 2000;
  m.Restore(published);
  // 10 samples, under min_samples: no entry of its own yet, only the default moves.
  for (int i = 1; i <= 2; ++i) m.Add(Summary(0, kT0 + i * 1000, 100, 520, 5));
  EXPECT_FALSE(m.Update(kT0 + 2000));  // 2080 ms is within 10% of 2000
  EXPECT_EQ(m.table().version, 7u);
  m.Add(Summary(0, kT0 + 3000, 100, 800));
  ASSERT_TRUE(m.Update(kT0 + 3000));
  EXPECT_EQ(m.table().version, 8u);
  EXPECT_DOUBLE_EQ(m.table().default_ms, 3200);
}

}  // namespace
}  // namespace ft::master
