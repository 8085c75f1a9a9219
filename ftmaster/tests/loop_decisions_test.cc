// The master loop's decisions as values, with no Redis and no clock: what a closed window comes
// to (window_decision.h) and an action phase's commands (action_runner.h). The loop around them
// is master_loop_test's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ftmaster/action_runner.h"
#include "ftmaster/window_decision.h"
#include "proto/codec.h"
#include "proto/keys.h"

namespace ft::master {
namespace {

proto::Incident Made(proto::IncidentKind kind, std::vector<int> ranks) {
  proto::Incident i;
  i.kind = proto::IncidentKindName(kind);
  i.id = "0-" + i.kind;  // Attribute's ids: DecideWindow puts the window's first event in front
  for (int r : ranks) i.suspects.push_back(proto::Suspect{r, "n" + std::to_string(r), "why"});
  return i;
}

IncidentWindow Window() {
  IncidentWindow w;
  w.open = true;
  w.first_event_id = "1000-0";
  w.first_unix_ms = 1000;
  w.opened_unix_ms = 1005;
  return w;
}

TEST(WindowDecisionTest, NothingAttributedClosesTheWindow) {
  WindowDecision d = DecideWindow({}, "", Window(), 5000, 5010, nullptr, {}, false, 0);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kClose);
  EXPECT_TRUE(d.to_write.empty());
  EXPECT_FALSE(d.close_why.empty());
}

TEST(WindowDecisionTest, ABusyOutcomeIsWrittenOnlyWhenItChanges) {
  IncidentWindow w = Window();
  WindowDecision d = DecideWindow({Made(proto::IncidentKind::kBusy, {3, 5})}, "", w, 5000, 5010, nullptr, {}, false, 0);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kWatch);
  ASSERT_EQ(d.to_write.size(), 1u);
  EXPECT_EQ(d.to_write[0].id, "1000-busy") << "named by the window's first event";
  EXPECT_EQ(d.to_write[0].decided_unix_ms, 5010);
  EXPECT_EQ(d.to_write[0].decide_ms, 4010);
  EXPECT_EQ(d.busy_outcome, "busy:3,5");
  EXPECT_EQ(d.outcomes, 1);
  EXPECT_EQ(w.outcomes, 0) << "the window itself changes only when the round commits";

  w.outcomes = d.outcomes;
  w.last_outcome = d.last_outcome;
  d = DecideWindow({Made(proto::IncidentKind::kBusy, {3, 5})}, "", w, 6000, 6010, nullptr, {}, false, 0);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kWatch);
  EXPECT_TRUE(d.to_write.empty()) << "unchanged: written before";
  EXPECT_EQ(d.outcomes, 1);

  d = DecideWindow({Made(proto::IncidentKind::kBusy, {3})}, "", w, 7000, 7010, nullptr, {}, false, 0);
  ASSERT_EQ(d.to_write.size(), 1u);
  EXPECT_EQ(d.to_write[0].id, "1000-busy-2") << "the window's second busy outcome";
  EXPECT_EQ(d.last_outcome, "busy:3");
}

// A healthy job's host work (an all-reduce benchmark between sizes, a 20 s pause) holds its
// peers for seconds: watched, no incident; a rank that holds them for FT_BUSY_REPORT_AFTER is
// reported once.
TEST(WindowDecisionTest, ABusyRankIsReportedOnlyOnceItHeldTheJobLong) {
  IncidentWindow w = Window();  // first event at 1000
  WindowDecision d = DecideWindow({Made(proto::IncidentKind::kBusy, {3})}, "", w, 20000, 20010, nullptr, {}, false,
                                  60000);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kWatch);
  EXPECT_TRUE(d.to_write.empty());
  EXPECT_EQ(d.outcomes, 0);
  EXPECT_EQ(d.busy_outcome, "busy:3");
  EXPECT_EQ(d.busy_ranks, std::vector<int>{3}) << "the ranks the watch waits for";
  d = DecideWindow({Made(proto::IncidentKind::kBusy, {3})}, "", w, 60990, 61000, nullptr, {}, false, 60000);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kWatch);
  ASSERT_EQ(d.to_write.size(), 1u);
  EXPECT_EQ(d.to_write[0].id, "1000-busy");
  EXPECT_EQ(d.to_write[0].decide_ms, 60000);
}

TEST(WindowDecisionTest, ACrashIsActedOnWithTheTopology) {
  Topology topology;
  ASSERT_TRUE(Topology::Parse("tp=1,dp=2,pp=1", "", 0, &topology).ok());
  // The crashed rank's GPU fell off the bus just before (hw_evidence.h): its node goes.
  HwLog hardware;
  proto::HwSignal xid;
  xid.node = "n1";
  xid.source = "nvml";
  xid.device = "0000:2a:00.0";
  xid.kind = "xid";
  xid.value = 79;
  xid.critical = true;
  xid.ranks = {1};
  xid.unix_ms = 950;
  hardware.Add(xid);
  WindowDecision d = DecideWindow({Made(proto::IncidentKind::kCrash, {1}), Made(proto::IncidentKind::kBusy, {0})},
                                  "", Window(), 5000, 5010, &topology, {}, false, 60000, &hardware);
  EXPECT_EQ(d.kind, WindowDecision::Kind::kAct);
  ASSERT_EQ(d.to_write.size(), 2u);
  EXPECT_EQ(d.action.incident, "1000-crash") << "the acted incident names the action";
  EXPECT_EQ(d.action.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(d.action.phase, proto::ActionPhase::kSave);
  // For the processes that ran at the window's first event (1000; it opened at 1005): one that
  // started later is a relaunch, however late the master read the event.
  EXPECT_EQ(d.action.decided_unix_ms, 1000) << "for the processes that ran at the first event";
  ASSERT_EQ(d.action.save.size(), 1u);
  EXPECT_EQ(d.action.save[0].rank, 0) << "the crashed rank's healthy DP replica saves";
  EXPECT_EQ(d.evict_nodes, std::vector<std::string>{"n1"});
  ASSERT_EQ(d.evict_reasons.size(), 1u);
  EXPECT_NE(d.evict_reasons[0].find("Xid 79"), std::string::npos) << d.evict_reasons[0];
  EXPECT_EQ(d.to_write[0].decision, "save-then-stop") << "the incident carries the decision";
  ASSERT_EQ(d.to_write[0].hardware.size(), 1u) << "the incident carries its evidence";
  EXPECT_EQ(d.to_write[0].hardware[0].value, 79);

  // Without it, the crash is the software's: nothing evicted, the job restarts in place.
  const HwLog none;
  d = DecideWindow({Made(proto::IncidentKind::kCrash, {1})}, "", Window(), 5000, 5010, &topology, {}, false, 60000,
                   &none);
  EXPECT_TRUE(d.evict_nodes.empty());
  EXPECT_TRUE(d.to_write[0].hardware_checked);
}

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
