// DecideWindow (window_decision.h): what a closed window comes to — close, watch a busy rank,
// or act — as a value, from the window's state and its attribution alone.
#include "ftmaster/core/window_decision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ftmaster/core/tests/window_fixture.h"

namespace ft::master {
namespace {

using testing::Made;
using testing::Window;

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

// A node's earlier failures within the hour are evidence against it; older ones are forgotten,
// and the decision hands back the history the round persists with it.
TEST(WindowDecisionTest, AFailureWithinTheHourOfAnEarlierOneEvictsItsNode) {
  Topology topology;
  ASSERT_TRUE(Topology::Parse("tp=1,dp=2,pp=1", "", 0, &topology).ok());
  const int64_t now = 10 * kRepeatedFailureMs;
  const FailureHistory recent = {{"n1", {now - kRepeatedFailureMs / 2}}, {"n7", {now - 1000}}};
  WindowDecision d = DecideWindow({Made(proto::IncidentKind::kCrash, {1})}, "", Window(), now, now + 10, &topology,
                                  {}, false, 60000, nullptr, &recent);
  ASSERT_EQ(d.kind, WindowDecision::Kind::kAct);
  EXPECT_EQ(d.evict_nodes, std::vector<std::string>{"n1"}) << d.reason;
  ASSERT_EQ(d.evict_reasons.size(), 1u);
  EXPECT_NE(d.evict_reasons[0].find("repeated failures"), std::string::npos) << d.evict_reasons[0];
  EXPECT_EQ(d.failed_nodes, std::vector<std::string>{"n1"});
  ASSERT_EQ(d.failures.size(), 1u) << "only the failed node's history changes";
  EXPECT_EQ(d.failures.at("n1"), (std::vector<int64_t>{now - kRepeatedFailureMs / 2, now}));

  const FailureHistory old = {{"n1", {now - 2 * kRepeatedFailureMs}}};
  d = DecideWindow({Made(proto::IncidentKind::kCrash, {1})}, "", Window(), now, now + 10, &topology, {}, false,
                   60000, nullptr, &old);
  EXPECT_TRUE(d.evict_nodes.empty()) << "a failure two hours ago is no evidence: " << d.reason;
  EXPECT_EQ(d.failures.at("n1"), std::vector<int64_t>{now}) << "and is dropped from the history";
}

TEST(WindowDecisionTest, OnlyAnIncidentThatStopsTheJobNeedsTheTopology) {
  EXPECT_TRUE(WindowActs(std::vector<proto::Incident>{Made(proto::IncidentKind::kBusy, {0}),
                                                      Made(proto::IncidentKind::kHang, {1})}));
  EXPECT_FALSE(WindowActs(std::vector<proto::Incident>{Made(proto::IncidentKind::kBusy, {0})}));
  EXPECT_FALSE(WindowActs(std::vector<proto::Incident>{}));
}

}  // namespace
}  // namespace ft::master
