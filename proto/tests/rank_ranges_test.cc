#include "proto/rank_ranges.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

namespace ft::proto {
namespace {

TEST(RankRangesTest, RunsOfRanksBecomeRangesInAscendingOrder) {
  const std::vector<int> ranks = {71, 64, 65, 66, 67, 68, 69, 70, 0, 1, 2, 2, 130, -1};
  EXPECT_EQ(RankRanges::Of(ranks).Format(), "0-2,64-71,130");
  EXPECT_EQ(RankRanges::Of(std::vector<int>{}).Format(), "");
  EXPECT_EQ(RankRanges::Of(std::vector<int>{5}).Format(), "5");
}

// Whatever set goes in, the text parses back to it and answers membership as the set does.
TEST(RankRangesTest, AnySetSurvivesItsTextAndAnswersMembership) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::set<int> set;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) set.insert(static_cast<int>(rng() % 200));
    const std::vector<int> ranks(set.begin(), set.end());
    const RankRanges made = RankRanges::Of(ranks);
    RankRanges back;
    ASSERT_TRUE(RankRanges::Parse(made.Format(), &back).ok()) << made.Format();
    ASSERT_EQ(back, made);
    for (int r = -1; r <= 201; ++r) ASSERT_EQ(back.Contains(r), set.count(r) == 1) << r << " in " << made.Format();
  }
}

TEST(RankRangesTest, AnythingButAscendingApartRangesIsRefusedByNameAndLeavesTheOutputAlone) {
  const RankRanges sentinel = RankRanges::Of(std::vector<int>{9});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a", "expected a rank"},
      {"-3", "expected a rank"},
      {"3-", "after '-'"},
      {"5-2", "ends before it starts"},
      {"1,1", "out of order"},
      {"4,2", "out of order"},
      {"1-5,3", "out of order"},
      {"1-5,6", "adjacent"},
      {"1;2", "expected ','"},
      {"1,", "trailing"},
      {"1073741824", "2^30-1"},
      {"99999999999999999999", "2^30-1"},
  };
  for (const auto& [text, names] : cases) {
    RankRanges out = sentinel;
    Status s = RankRanges::Parse(text, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << text;
    EXPECT_NE(s.message().find(names), std::string::npos) << text << ": " << s.message();
    EXPECT_EQ(out, sentinel) << text;
  }
  RankRanges empty = sentinel;
  ASSERT_TRUE(RankRanges::Parse("", &empty).ok());
  EXPECT_TRUE(empty.empty());
}

}  // namespace
}  // namespace ft::proto
