#include "ftmaster/core/gone_nodes.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

constexpr int64_t kAfter = GoneNodes::kGoneAfterMs;

TEST(GoneNodesTest, ANodeWithoutHeartbeatIsGoneOnlyAfterTheWholeWait) {
  GoneNodes g;
  g.Observe({{"node0", true}, {"node1", true}}, 0);
  const std::map<std::string, bool> lost{{"node0", true}, {"node1", false}};
  EXPECT_FALSE(g.Observe(lost, 1000));
  EXPECT_FALSE(g.Observe(lost, 1000 + kAfter - 1));
  EXPECT_TRUE(g.gone().empty());
  EXPECT_TRUE(g.Observe(lost, 1000 + kAfter));
  EXPECT_EQ(g.gone(), std::set<std::string>{"node1"});
  EXPECT_FALSE(g.Observe(lost, 1000 + 2 * kAfter));  // no change
}

TEST(GoneNodesTest, ANodeNeverSeenBeatingIsNeverJudged) {
  GoneNodes g;
  g.Observe({{"node1", false}}, 0);
  EXPECT_FALSE(g.Observe({{"node1", false}}, 10 * kAfter));
  EXPECT_TRUE(g.gone().empty());
}

TEST(GoneNodesTest, ANodeSeenAliveOtherwiseIsJudged) {
  GoneNodes g;
  g.SawAlive("node1");  // its worker registered ranks; the master never read its heartbeat
  g.Observe({{"node1", false}}, 0);
  EXPECT_TRUE(g.Observe({{"node1", false}}, kAfter));
}

TEST(GoneNodesTest, AHeartbeatSeenInBetweenStartsTheWaitAgain) {
  GoneNodes g;
  g.Observe({{"node1", true}}, -1);
  g.Observe({{"node1", false}}, 0);
  g.Observe({{"node1", true}}, kAfter / 2);  // a restarted worker beats again
  g.Observe({{"node1", false}}, kAfter / 2 + 1);
  EXPECT_FALSE(g.Observe({{"node1", false}}, kAfter + 1));
  EXPECT_TRUE(g.gone().empty());
  EXPECT_TRUE(g.Observe({{"node1", false}}, kAfter / 2 + 1 + kAfter));
}

TEST(GoneNodesTest, AGoneNodeComesBackWithItsHeartbeat) {
  GoneNodes g;
  g.Observe({{"node1", true}}, -1);
  g.Observe({{"node1", false}}, 0);
  ASSERT_TRUE(g.Observe({{"node1", false}}, kAfter));
  EXPECT_TRUE(g.Observe({{"node1", true}}, kAfter + 1));
  EXPECT_TRUE(g.gone().empty());
}

TEST(GoneNodesTest, ANodeNoLongerLookedAtIsForgotten) {
  GoneNodes g;
  g.Observe({{"node1", true}}, -1);
  g.Observe({{"node1", false}}, 0);
  ASSERT_TRUE(g.Observe({{"node1", false}}, kAfter));
  EXPECT_TRUE(g.Observe({}, kAfter + 1));
  EXPECT_TRUE(g.gone().empty());
  // Looked at again later: the wait starts over.
  EXPECT_FALSE(g.Observe({{"node1", false}}, kAfter + 2));
  EXPECT_FALSE(g.Observe({{"node1", false}}, 2 * kAfter + 1));
  EXPECT_TRUE(g.Observe({{"node1", false}}, 2 * kAfter + 2));
}

}  // namespace
}  // namespace ft::master
