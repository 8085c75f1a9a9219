#include "ftmaster/core/membership_gap.h"

#include <gtest/gtest.h>

#include <vector>

namespace ft::master {
namespace {

proto::Membership Member(int rank, int world_size = 4) {
  proto::Membership m;
  m.rank = rank;
  m.node = rank < 2 ? "n0" : "n1";
  m.world_size = world_size;
  return m;
}

proto::Event EventOf(int rank) {
  proto::Event e;
  e.kind = "exit";
  e.rank = rank;
  return e;
}

TEST(MembershipGapTest, AWholeMembershipHoldingTheEventsRanksLacksNothing) {
  const std::vector<proto::Membership> members = {Member(0), Member(1), Member(2), Member(3)};
  const std::vector<proto::Event> events = {EventOf(3), EventOf(1)};
  const MembershipGap gap = FindMembershipGap(members, events, 0);
  EXPECT_TRUE(gap.empty()) << gap.Text();
  EXPECT_EQ(gap.world, 4);
  EXPECT_EQ(gap.members, 4);
}

TEST(MembershipGapTest, ANodeWhoseRanksRedisLostIsMissingByTheWorldSize) {
  const std::vector<proto::Membership> members = {Member(2), Member(3)};  // n1 wrote its ranks again
  const std::vector<proto::Event> events = {EventOf(3)};
  const MembershipGap gap = FindMembershipGap(members, events, 0);
  EXPECT_FALSE(gap.empty());
  EXPECT_TRUE(gap.event_ranks.empty());
  EXPECT_EQ(gap.Text(), "2 of the job's 4 ranks known");
}

TEST(MembershipGapTest, NoMembershipAtAllLacksTheEventsRanksAndTheTopologysWorld) {
  const std::vector<proto::Event> events = {EventOf(0), EventOf(2), EventOf(0)};
  MembershipGap gap = FindMembershipGap({}, events, 0);
  EXPECT_FALSE(gap.empty());
  EXPECT_EQ(gap.event_ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(gap.Text(), "ranks 0, 2 of its events");
  gap = FindMembershipGap({}, events, 8);
  EXPECT_EQ(gap.Text(), "ranks 0, 2 of its events; 0 of the job's 8 ranks known");
}

TEST(MembershipGapTest, UnknownWorldSizesAndMoreMembersThanTheWorldLackNothing) {
  // Workers that could not tell the world size (-1): only the events' ranks count.
  EXPECT_TRUE(FindMembershipGap(std::vector<proto::Membership>{Member(0, -1), Member(5, -1)},
                                std::vector<proto::Event>{EventOf(5)}, 0).empty());
  // A run relaunched smaller: the earlier run's ranks 2 and 3 are still in the hash, with its
  // world size; nothing is missing.
  EXPECT_TRUE(FindMembershipGap(std::vector<proto::Membership>{Member(0, 2), Member(1, 2), Member(2, 4), Member(3, 4)},
                                std::vector<proto::Event>{}, 2).empty());
  // An event without a rank (a node's hardware event) needs none.
  EXPECT_TRUE(FindMembershipGap(std::vector<proto::Membership>{Member(0, 1)},
                                std::vector<proto::Event>{EventOf(-1)}, 0).empty());
}

}  // namespace
}  // namespace ft::master
