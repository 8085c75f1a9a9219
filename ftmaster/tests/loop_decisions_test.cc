// The master loop's decisions as values, with no Redis and no clock: an action phase's commands
// (action_runner.h), and what they make of a closed window's decision (core/window_decision.h,
// tested on its own in core/tests/window_decision_test.cc). The loop around them is
// master_loop_test's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ftmaster/action_runner.h"
#include "ftmaster/core/tests/window_fixture.h"
#include "ftmaster/core/window_decision.h"
#include "proto/codec.h"
#include "proto/keys.h"

namespace ft::master {
namespace {

using testing::Made;
using testing::Window;

TEST(CommandBatchTest, SaveAsksEveryTargetWithANodeAndStoresTheActionWithThem) {
  const proto::Keys keys("j");
  Action a;
  a.incident = "1000-crash";
  a.phase = proto::ActionPhase::kSave;
  a.save = {{0, "n0"}, {1, ""}, {2, "n2"}};
  CommandBatch b = SaveBatch(a, "7-0", 5000, keys, 30000, {});
  EXPECT_EQ(b.commands, 2u);
  EXPECT_EQ(b.nodeless, std::vector<int>{1});
  ASSERT_EQ(b.writes.size(), 3u) << "two XADDs, then the action";
  EXPECT_EQ(b.writes[0][1], keys.Commands("n0"));
  EXPECT_EQ(b.writes[1][1], keys.Commands("n2"));
  EXPECT_EQ(b.writes[2][0], "HSET");
  EXPECT_TRUE(b.next.sent);
  EXPECT_EQ(b.next.acks_from, "7-0");
  EXPECT_EQ(b.next.deadline_unix_ms, 35000);
  EXPECT_FALSE(a.sent) << "the action as stored changes only when the runner takes `next`";
}

TEST(CommandBatchTest, StopCommandsEveryNodeInOrderWithTheGraceInTheDeadline) {
  const proto::Keys keys("j");
  Action a;
  a.incident = "1000-crash";
  a.phase = proto::ActionPhase::kStop;
  CommandBatch b = StopBatch(a, "9-0", {"nb", "na"}, 5000, keys, 10, {});
  EXPECT_EQ(b.next.nodes, (std::vector<std::string>{"na", "nb"}));
  EXPECT_EQ(b.commands, 2u);
  ASSERT_EQ(b.writes.size(), 3u);
  EXPECT_EQ(b.writes[0][1], keys.Commands("na"));
  EXPECT_EQ(b.next.deadline_unix_ms, 5000 + 10 * 1000 + 5000);
  EXPECT_TRUE(b.next.sent);
}

// A group restarted in place while the window was open (torchrun at once after a crash): the
// stop decided for the failed run names none of the new processes, and the workers refuse it
// for them (a seeded campaign schedule: the restarted job was killed by the old incident's stop).
TEST(WindowDecisionTest, AGroupRestartedWhileTheWindowWasOpenIsNotCommanded) {
  Topology topology;
  ASSERT_TRUE(Topology::Parse("tp=1,dp=2,pp=1", "", 0, &topology).ok());
  WindowDecision d = DecideWindow({Made(proto::IncidentKind::kCrash, {1})}, "", Window(), 3700, 3710,
                                  &topology, {}, false, 60000);
  ASSERT_EQ(d.kind, WindowDecision::Kind::kAct);
  proto::Membership relaunched;
  relaunched.rank = 0;
  relaunched.node = "n0";
  relaunched.incarnation = 2000 * 1000000ull;  // started 1 s after the window opened
  const std::vector<proto::Membership> members = {relaunched};
  d.action.phase = proto::ActionPhase::kStop;
  CommandBatch stop = StopBatch(d.action, "9-0", {"n0"}, 3800, proto::Keys("j"), 10, members);
  proto::Command c;
  ASSERT_TRUE(proto::Decode(stop.writes[0].back(), &c).ok());
  EXPECT_TRUE(c.incarnations.empty()) << "the new process is not the one the stop was decided for";
  EXPECT_LT(c.decided_unix_ms, 2000) << "its worker refuses the stop for a process started after it";
}

// Each command names the processes it was decided for: the members that had started by the
// decision; a rank relaunched since is not named (its worker refuses it the command).
TEST(CommandBatchTest, CommandsNameTheIncarnationsTheyWereDecidedFor) {
  const proto::Keys keys("j");
  auto member = [](int rank, const char* node, uint64_t incarnation) {
    proto::Membership m;
    m.rank = rank;
    m.node = node;
    m.incarnation = incarnation;
    return m;
  };
  const std::vector<proto::Membership> members = {
      member(0, "na", 4000 * 1000000ull), member(1, "na", 4500 * 1000000ull),
      member(2, "nb", 4800 * 1000000ull), member(3, "nb", 5200 * 1000000ull)};  // 3: relaunched
  Action a;
  a.incident = "1000-crash";
  a.decided_unix_ms = 5000;
  a.phase = proto::ActionPhase::kSave;
  a.save = {{1, "na"}, {3, "nb"}};
  auto command_of = [](const redis::Argv& xadd) {
    proto::Command c;
    EXPECT_TRUE(proto::Decode(xadd.back(), &c).ok());
    return c;
  };
  CommandBatch save = SaveBatch(a, "7-0", 6000, keys, 30000, members);
  ASSERT_EQ(save.writes.size(), 3u);
  proto::Command c = command_of(save.writes[0]);
  EXPECT_EQ(c.decided_unix_ms, 5000);
  EXPECT_EQ(c.incarnations, (std::vector<proto::RankIncarnation>{{1, 4500 * 1000000ull}}));
  EXPECT_TRUE(command_of(save.writes[1]).incarnations.empty()) << "rank 3 started after the decision";

  a.phase = proto::ActionPhase::kStop;
  CommandBatch stop = StopBatch(a, "9-0", {"na", "nb"}, 7000, keys, 10, members);
  ASSERT_EQ(stop.writes.size(), 3u);
  EXPECT_EQ(command_of(stop.writes[0]).incarnations,
            (std::vector<proto::RankIncarnation>{{0, 4000 * 1000000ull}, {1, 4500 * 1000000ull}}));
  EXPECT_EQ(command_of(stop.writes[1]).incarnations,
            (std::vector<proto::RankIncarnation>{{2, 4800 * 1000000ull}}));
  EXPECT_EQ(command_of(stop.writes[1]).decided_unix_ms, 5000);
}

}  // namespace
}  // namespace ft::master
