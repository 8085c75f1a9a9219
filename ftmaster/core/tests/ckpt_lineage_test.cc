#include "ftmaster/core/ckpt_lineage.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ft::master {
namespace {

proto::CkptCopy Copy(int64_t step, int64_t saved_ms, int64_t reported_ms = 0) {
  proto::CkptCopy c;
  c.step = step;
  c.rank = 0;
  c.node = "n0";
  c.saved_unix_ms = saved_ms;
  c.unix_ms = reported_ms > 0 ? reported_ms : saved_ms + 500;
  return c;
}

proto::CkptRewind Rewind(int64_t step, int64_t unix_ms) { return proto::CkptRewind{step, unix_ms, "test"}; }

// A relaunch at t=1000 that restored step 30: the left run's copies of later steps go, its
// copies up to the restored step stay (the new run continues from them), and every copy the new
// run saves stays, whatever its step.
TEST(CkptLineageTest, ARelaunchSupersedesTheLeftRunsLaterSteps) {
  const std::vector<proto::CkptRewind> rewinds = {Rewind(30, 1000)};
  EXPECT_NE(SupersededBy(Copy(35, 900), rewinds), nullptr) << "saved before, a later step";
  EXPECT_EQ(SupersededBy(Copy(30, 900), rewinds), nullptr) << "the restored step itself";
  EXPECT_EQ(SupersededBy(Copy(20, 900), rewinds), nullptr) << "an earlier step of the same history";
  EXPECT_EQ(SupersededBy(Copy(35, 1001), rewinds), nullptr) << "the new run's step 35";
  EXPECT_EQ(SupersededBy(Copy(31, 1000), rewinds), nullptr) << "saved at the relaunch's start: not before it";
}

// A finish then a launch from scratch: every copy from before it is of the finished run.
TEST(CkptLineageTest, AFinishSupersedesEveryEarlierCopy) {
  std::vector<proto::CkptRewind> rewinds = {Rewind(30, 1000), Rewind(-1, 5000)};
  EXPECT_EQ(SupersededBy(Copy(30, 4000), rewinds), &rewinds[1]);
  EXPECT_EQ(SupersededBy(Copy(0, 4000), rewinds), &rewinds[1]);
  EXPECT_EQ(SupersededBy(Copy(40, 900), rewinds), &rewinds[0]) << "the first rewind that applies";
  EXPECT_EQ(SupersededBy(Copy(10, 6000), rewinds), nullptr) << "the next run's copy";
}

// A worker from before saved_unix_ms: its report time stands in (later than the save).
TEST(CkptLineageTest, WithoutASaveTimeTheReportTimeStandsIn) {
  const std::vector<proto::CkptRewind> rewinds = {Rewind(30, 1000)};
  proto::CkptCopy c = Copy(35, 0, 999);
  EXPECT_EQ(SavedUnixMs(c), 999);
  EXPECT_NE(SupersededBy(c, rewinds), nullptr);
  c.unix_ms = 1200;  // re-reported after the relaunch (a restarted worker): taken as the new run's
  EXPECT_EQ(SupersededBy(c, rewinds), nullptr);
}

TEST(CkptLineageTest, ARewindThatAddsNothingIsNotAdded) {
  std::vector<proto::CkptRewind> rewinds;
  EXPECT_TRUE(AddRewind(&rewinds, Rewind(30, 1000)));
  EXPECT_FALSE(AddRewind(&rewinds, Rewind(30, 1000))) << "the same";
  EXPECT_FALSE(AddRewind(&rewinds, Rewind(40, 900))) << "went back less, earlier: covered";
  EXPECT_TRUE(AddRewind(&rewinds, Rewind(30, 2000))) << "later: supersedes copies saved in between";
  EXPECT_TRUE(AddRewind(&rewinds, Rewind(10, 1500))) << "further back";
  EXPECT_EQ(rewinds.size(), 3u);
}

TEST(CkptLineageTest, OnlyTheNewestRewindsAreKept) {
  std::vector<proto::CkptRewind> rewinds;
  for (int64_t k = 0; k < 40; ++k) ASSERT_TRUE(AddRewind(&rewinds, Rewind(k, 1000 + k)));
  ASSERT_EQ(rewinds.size(), proto::kMaxCkptRewinds);
  EXPECT_EQ(rewinds.front().step, 40 - static_cast<int64_t>(proto::kMaxCkptRewinds));
  EXPECT_EQ(rewinds.back().step, 39);
}

}  // namespace
}  // namespace ft::master
