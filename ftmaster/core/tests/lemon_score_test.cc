#include "ftmaster/core/lemon_score.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ft::master {
namespace {

using Kind = proto::NodeRecordKind;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kDay = 86'400'000;

proto::NodeRecord R(Kind kind, const char* job, const char* incident, int64_t unix_ms, int nodes = 1,
                    const char* detail = "") {
  proto::NodeRecord r;
  r.kind = kind;
  r.node = "n1";
  r.job = job;
  r.incident = incident;
  r.incident_kind = kind == Kind::kCrash ? "crash" : "hang";
  r.unix_ms = unix_ms;
  r.nodes = nodes;
  r.detail = detail;
  return r;
}

LemonOptions Week() { return LemonOptions{.half_life_ms = 7 * kDay}; }

TEST(LemonScoreTest, RecentEventsWeighMoreOneHalfLifeHalves) {
  const double today = LemonScore({R(Kind::kEvicted, "a", "i1", kNow)}, kNow, Week());
  const double week_ago = LemonScore({R(Kind::kEvicted, "a", "i1", kNow - 7 * kDay)}, kNow, Week());
  const double month_ago = LemonScore({R(Kind::kEvicted, "a", "i1", kNow - 28 * kDay)}, kNow, Week());
  EXPECT_DOUBLE_EQ(today, 4.0);
  EXPECT_NEAR(week_ago, 2.0, 1e-9);
  EXPECT_NEAR(month_ago, 0.25, 1e-9);
  // Another host's clock ahead: counts as now, never more.
  EXPECT_DOUBLE_EQ(LemonScore({R(Kind::kEvicted, "a", "i1", kNow + kDay)}, kNow, Week()), 4.0);
}

TEST(LemonScoreTest, EvictionsAndHardwareWeighMoreThanOneSuspectAmongMany) {
  const double evicted = LemonScore({R(Kind::kEvicted, "a", "i1", kNow)}, kNow, Week());
  const double hardware = LemonScore({R(Kind::kHardware, "a", "i1", kNow)}, kNow, Week());
  const double sole_suspect = LemonScore({R(Kind::kSuspect, "a", "i1", kNow, 1)}, kNow, Week());
  const double one_of_many = LemonScore({R(Kind::kSuspect, "a", "i1", kNow, 200)}, kNow, Week());
  EXPECT_GT(evicted, hardware);
  EXPECT_GT(hardware, sole_suspect);
  EXPECT_GT(sole_suspect, one_of_many);
  EXPECT_LT(one_of_many, 0.01);
  // Even three incidents as one suspect among a few weigh less than one eviction.
  EXPECT_LT(LemonScore({R(Kind::kSuspect, "a", "i1", kNow, 4), R(Kind::kSuspect, "b", "i2", kNow, 4),
                        R(Kind::kSuspect, "c", "i3", kNow, 4)},
                       kNow, Week()),
            evicted);
}

TEST(LemonScoreTest, DistinctJobsCountMoreThanRepeatsInOneJob) {
  const std::vector<proto::NodeRecord> one_job = {R(Kind::kCrash, "a", "i1", kNow), R(Kind::kCrash, "a", "i2", kNow),
                                                  R(Kind::kCrash, "a", "i3", kNow)};
  const std::vector<proto::NodeRecord> three_jobs = {R(Kind::kCrash, "a", "i1", kNow), R(Kind::kCrash, "b", "i2", kNow),
                                                     R(Kind::kCrash, "c", "i3", kNow)};
  const double repeats = LemonScore(one_job, kNow, Week());
  const double distinct = LemonScore(three_jobs, kNow, Week());
  EXPECT_NEAR(repeats, 2.0 + 1.0 + 2.0 / 3, 1e-9);  // each repeat adds less
  EXPECT_NEAR(distinct, 6.0, 1e-9);
  EXPECT_GT(distinct, repeats);
}

TEST(LemonScoreTest, OneIncidentCountsEachKindOnceAndDuplicatesNotAtAll) {
  // A hang that evicted, its rewrite after a takeover, and two signals of one incident.
  const std::vector<proto::NodeRecord> records = {
      R(Kind::kSuspect, "a", "i1", kNow), R(Kind::kEvicted, "a", "i1", kNow, 1, "a hang suspect"),
      R(Kind::kSuspect, "a", "i1", kNow), R(Kind::kEvicted, "a", "i1", kNow, 1, "a hang suspect"),
      R(Kind::kHardware, "a", "i1", kNow, 1, "Xid 79"), R(Kind::kHardware, "a", "i1", kNow, 1, "Xid 48")};
  EXPECT_NEAR(LemonScore(records, kNow, Week()), 1.5 + 4 + 3, 1e-9);
  const NodeStanding s = Assess("n1", records, kNow, Week());
  EXPECT_EQ(s.duplicates, 2u);
  EXPECT_EQ(s.records.size(), 4u);
  EXPECT_EQ(s.counts[static_cast<size_t>(Kind::kEvicted)], 1u);
  EXPECT_EQ(s.counts[static_cast<size_t>(Kind::kHardware)], 2u);
}

TEST(LemonScoreTest, OneSignalCarriedByTwoIncidentsCountsOnce) {
  // A critical Xid reported as a `hardware` incident, then the crash it explains, evicted.
  const std::vector<proto::NodeRecord> records = {
      R(Kind::kHardware, "b", "hw-1", kNow - 1000, 1, "critical Xid 79 on GPU 0000:2a:00.0 (rank 5)"),
      R(Kind::kCrash, "b", "crash-1", kNow), R(Kind::kEvicted, "b", "crash-1", kNow, 1, "a crash with hardware evidence"),
      R(Kind::kHardware, "b", "crash-1", kNow, 1, "critical Xid 79 on GPU 0000:2a:00.0 (rank 5)")};
  EXPECT_NEAR(LemonScore(records, kNow, Week()), 2 + 4 + 3, 1e-6);
  // Another signal is another piece of evidence.
  std::vector<proto::NodeRecord> two = records;
  two.push_back(R(Kind::kHardware, "b", "hw-2", kNow, 1, "critical Xid 48 on GPU 0000:2a:00.0 (rank 5)"));
  EXPECT_NEAR(LemonScore(two, kNow, Week()), 2 + 4 + 3 + 3.0 / 2, 1e-6);
  // And the same signal in another job counts there too.
  std::vector<proto::NodeRecord> other_job = records;
  other_job.push_back(R(Kind::kHardware, "c", "hw-9", kNow, 1, "critical Xid 79 on GPU 0000:2a:00.0 (rank 5)"));
  EXPECT_NEAR(LemonScore(other_job, kNow, Week()), 2 + 4 + 3 + 3, 1e-6);
}

TEST(LemonScoreTest, CordonsWeighNothing) {
  proto::NodeRecord cordon = R(Kind::kCordon, "", "", kNow, 1, "flaky NVLink");
  EXPECT_DOUBLE_EQ(LemonScore({cordon}, kNow, Week()), 0.0);
  const NodeStanding s = Assess("n1", {cordon}, kNow, Week());
  EXPECT_TRUE(s.jobs.empty());
  ASSERT_TRUE(s.last.has_value());
  EXPECT_EQ(s.last->kind, Kind::kCordon);
}

TEST(LemonScoreTest, AssessSaysWhyNewestFirstAndWhetherItIsALemon) {
  const NodeStanding s = Assess("n1",
                                {R(Kind::kSuspect, "a", "i1", kNow - 2 * kDay), R(Kind::kEvicted, "a", "i1", kNow - 2 * kDay),
                                 R(Kind::kCrash, "b", "i2", kNow - kDay), R(Kind::kEvicted, "b", "i2", kNow - kDay)},
                                kNow, Week());
  EXPECT_EQ(s.jobs, (std::vector<std::string>{"b", "a"}));
  ASSERT_TRUE(s.last.has_value());
  EXPECT_EQ(s.last->job, "b");
  EXPECT_EQ(s.records.front().unix_ms, kNow - kDay);
  EXPECT_TRUE(s.lemon) << s.score;  // evicted in two jobs this week
  const NodeStanding once = Assess("n2", {R(Kind::kSuspect, "a", "i1", kNow), R(Kind::kEvicted, "a", "i1", kNow)}, kNow, Week());
  EXPECT_FALSE(once.lemon) << once.score;  // one hang's eviction alone is not
}

TEST(LemonScoreTest, WorstFirstByScoreThenNewestThenName) {
  std::vector<NodeStanding> nodes = {
      Assess("quiet", {R(Kind::kCordon, "", "", kNow)}, kNow, Week()),
      Assess("bad", {R(Kind::kEvicted, "a", "i1", kNow - kDay)}, kNow, Week()),
      Assess("worse", {R(Kind::kEvicted, "a", "i1", kNow), R(Kind::kHardware, "a", "i1", kNow)}, kNow, Week()),
      Assess("old", {R(Kind::kCordon, "", "", kNow - kDay)}, kNow, Week()),
  };
  SortWorstFirst(&nodes);
  std::vector<std::string> order;
  for (const NodeStanding& n : nodes) order.push_back(n.node);
  EXPECT_EQ(order, (std::vector<std::string>{"worse", "bad", "quiet", "old"}));
}

}  // namespace
}  // namespace ft::master
