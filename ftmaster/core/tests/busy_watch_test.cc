// WhyNotBack (busy_watch.h): when a rank watched as busy on the host is back in the job.
#include "ftmaster/core/busy_watch.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

constexpr uint64_t kDp = 0xd0;  // the data-parallel comm both ranks share
constexpr uint64_t kTp = 0x70;  // a comm the timed-out peer is no member of

proto::CommRow Row(uint64_t comm, uint64_t entered, double entered_age_ms) {
  proto::CommRow row;
  row.comm_id = comm;
  row.entered_seq = entered;
  row.entered_age_ms = entered_age_ms;
  return row;
}

proto::RankProgress Table(int64_t observed_unix_ms, std::vector<proto::CommRow> comms) {
  proto::RankProgress p;
  p.rank = 1;
  p.observed_unix_ms = observed_unix_ms;
  p.comms = std::move(comms);
  return p;
}

// A peer's timeout waiting in collective #seq of comm.
proto::Event Timeout(uint64_t comm, uint64_t seq, proto::OpKind op = proto::OpKind::kAllReduce) {
  proto::Event e;
  e.kind = proto::EventKindName(proto::EventKind::kTimeout);
  e.comm_id = comm;
  e.seq = seq;
  e.op = op;
  return e;
}

// The watch began at 10,000 with the rank at DP #5 and TP #7 (12 ops); a peer waits in DP #6.
const BusyWatchStart kStart{12, 10000};
const std::vector<proto::Event> kWindow{Timeout(kDp, 6)};

TEST(BusyWatchTest, ARankThatEnteredTheWaitedCollectiveSinceIsBack) {
  EXPECT_EQ(WhyNotBack(Table(12000, {Row(kDp, 6, 100), Row(kTp, 9, 50)}), kStart, kWindow), "");
}

TEST(BusyWatchTest, ARankThatEnteredNothingIsNotBack) {
  EXPECT_EQ(WhyNotBack(Table(12000, {Row(kDp, 5, 2500), Row(kTp, 7, 2400)}), kStart, kWindow),
            "no op entered since the watch began");
}

TEST(BusyWatchTest, OpsARestartedWorkerReadsFromBeforeTheWatchDoNotCount) {
  // The old worker's last table said DP #5, TP #5 (10 ops); the rank had entered TP #6 and #7
  // and DP #6 before the watch began and hung there. Its restarted worker reads that table: the
  // counts moved, but every op is older than the watch (seed 1121).
  const BusyWatchStart stale{10, 10000};
  const proto::RankProgress hung = Table(13000, {Row(kDp, 6, 3200), Row(kTp, 7, 3300)});
  EXPECT_EQ(WhyNotBack(hung, stale, kWindow), "its newest op was entered before the watch began");
  // One op entered a millisecond after the watch began counts.
  const proto::RankProgress resumed = Table(13000, {Row(kDp, 6, 3200), Row(kTp, 8, 2999)});
  EXPECT_EQ(WhyNotBack(resumed, stale, kWindow), "");
}

TEST(BusyWatchTest, AFrozenRankIsNeverBackWhateverItsCountsSay) {
  // Frozen by SIGSTOP, no member of the waited comm: the waited collectives say nothing of it
  // (seed 1030).
  proto::RankProgress frozen = Table(12000, {Row(kTp, 9, 10)});
  frozen.frozen = true;
  EXPECT_EQ(WhyNotBack(frozen, BusyWatchStart{7, 10000}, kWindow), "frozen");
  frozen.frozen = false;
  EXPECT_EQ(WhyNotBack(frozen, BusyWatchStart{7, 10000}, kWindow), "");
}

TEST(BusyWatchTest, ARankShortOfTheWaitedCollectiveIsNotBack) {
  // It entered TP ops since, but not DP #6 its peer waits in.
  EXPECT_EQ(WhyNotBack(Table(12000, {Row(kDp, 5, 2500), Row(kTp, 9, 10)}), kStart, kWindow),
            "not yet in the collectives its peers wait in");
}

TEST(BusyWatchTest, PointToPointCountsAreNotCompared) {
  // A peer's recv #40 on a p2p comm: the rank's own send count there is its own.
  proto::CommRow p2p = Row(0xee, 3, 10);
  p2p.p2p = true;
  const std::vector<proto::Event> window{Timeout(0xee, 40, proto::OpKind::kRecv)};
  EXPECT_EQ(WhyNotBack(Table(12000, {p2p, Row(kDp, 10, 20)}), kStart, window), "");
}

TEST(BusyWatchTest, LastEnteredIsTheYoungestEntryByTheNodesClock) {
  EXPECT_EQ(LastEnteredUnixMs(Table(5000, {Row(kDp, 1, 300.2), Row(kTp, 1, 40.5), Row(0x1, 0, -1)})), 4959);
  EXPECT_EQ(LastEnteredUnixMs(Table(5000, {Row(kDp, 0, -1)})), -1) << "never entered";
  EXPECT_EQ(EnteredOps(Table(5000, {Row(kDp, 4, 1), Row(kTp, 3, 1)})), 7u);
}

}  // namespace
}  // namespace ft::master
