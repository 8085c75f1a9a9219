#include "ftmaster/core/goodput.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

using proto::GoodputCause;
using proto::JobState;

double RankS(const GoodputLedger& l, GoodputCause c) { return l.state().rank_s[static_cast<size_t>(c)]; }
double WallS(const GoodputLedger& l, GoodputCause c) { return l.state().wall_s[static_cast<size_t>(c)]; }

// A job of `ranks` ranks driven tick by tick (100 ms): its state, window and pace as a master
// would see them. The ledger starts at the first tick (0.1 s after the driver's start); a
// launch's first step counts as start-up until it is done (a real first step compiles, warms
// up and connects: it is not the job's pace).
class Job {
 public:
  explicit Job(int ranks) {
    s_.unix_ms = 1'000'000;
    s_.ranks_held = ranks;
  }

  // `seconds` of ticks with the sample as it stands; the pace (when stepping) advances one step
  // every `step_s` seconds and is seen at every tick.
  void Run(double seconds) {
    const int64_t end = s_.unix_ms + static_cast<int64_t>(seconds * 1000);
    while (s_.unix_ms < end) {
      s_.unix_ms += 100;
      if (stepping_) {
        since_step_ms_ += 100;
        while (since_step_ms_ >= step_ms_) {
          since_step_ms_ -= step_ms_;
          ++s_.pace.step;
          ++s_.pace.steps;
        }
        s_.pace.step_ms = static_cast<double>(step_ms_);
        s_.pace.unix_ms = s_.unix_ms;
      }
      ledger.Observe(s_);
    }
  }
  // A launch of `incarnation` that starts at `restored` (its first step is restored + 1).
  void Launch(uint64_t incarnation, int64_t restored) {
    s_.state = JobState::kRunning;
    s_.ranks_running = s_.ranks_held;
    s_.incarnation = incarnation;
    s_.incident.clear();  // the action is over
    s_.pace = {};
    s_.pace.incarnation = incarnation;
    s_.pace.ranks = s_.ranks_held;
    s_.pace.unix_ms = s_.unix_ms;
    next_step_ = restored;
    stepping_ = false;
  }
  void Step(int64_t step_ms) {
    if (!stepping_) s_.pace.step = next_step_;
    stepping_ = true;
    step_ms_ = step_ms;
  }
  void Hang() { stepping_ = false; }
  void OpenWindow(int64_t fault_ms) {
    s_.window_open = true;
    s_.fault_unix_ms = fault_ms;
  }
  void Decide(const std::string& incident) {
    s_.window_open = false;
    s_.state = JobState::kStopping;
    s_.incident = incident;
  }
  void Stopped() {
    s_.state = JobState::kStopped;
    s_.ranks_running = 0;
  }
  void Finish() { s_.state = JobState::kFinished; }
  int64_t now() const { return s_.unix_ms; }
  int64_t step() const { return s_.pace.step; }

  GoodputLedger ledger;

 private:
  JobSample s_;
  bool stepping_ = false;
  int64_t step_ms_ = 1000;
  int64_t since_step_ms_ = 0;
  int64_t next_step_ = 0;
};

TEST(GoodputTest, NothingIsAccountedBeforeARankIsUp) {
  GoodputLedger ledger;
  JobSample s;
  s.unix_ms = 1000;
  s.ranks_held = 8;
  ledger.Observe(s);
  s.unix_ms = 60'000;
  ledger.Observe(s);
  EXPECT_EQ(GoodputLedger::TotalOf(ledger.state().rank_s), 0);
  EXPECT_EQ(ledger.Ettr(), 1.0);
}

TEST(GoodputTest, AHealthyJobIsStartupThenProductive) {
  Job job(4);
  job.Launch(1, -1);
  job.Run(3);  // initializing
  job.Step(500);
  job.Run(20);
  // 2.9 s before the first step, 0.4 s until the first step was seen done.
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kStartup), 3.3, 0.05);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kProductive), 19.6, 0.05);
  EXPECT_NEAR(RankS(job.ledger, GoodputCause::kProductive), 4 * 19.6, 0.2);
  EXPECT_EQ(WallS(job.ledger, GoodputCause::kSlowed), 0);
  EXPECT_NEAR(job.ledger.Ettr(), 19.6 / 22.9, 0.005);
  EXPECT_TRUE(job.ledger.state().incidents.empty());
}

// The whole life of an incident: a hang at a known time, its window opening 5 s later, a
// decision, saves, the stop, 4 s until the relaunch is up, its restore, the steps done again,
// then productive time again. Each cause is what the test timed.
TEST(GoodputTest, AHangIsChargedFromItsFaultToTheJobTrainingPastItsStepAgain) {
  Job job(8);
  job.Launch(1, -1);
  job.Step(1000);
  job.Run(30.05);  // 30 steps
  const int64_t reached = job.step();
  const int64_t fault_ms = job.now();
  job.Hang();
  job.Run(5);  // nobody knows yet: productive for now
  // The first step (0.9 s seen) was start-up.
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kProductive), 35.05 - 0.9, 0.15);
  job.OpenWindow(fault_ms);
  job.Run(1);
  // The 5 s before the window moved to detection, and the window's own second.
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kDetection), 6.0, 0.15);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kProductive), 30.05 - 0.9, 0.15);
  job.Decide("123-hang");
  job.Run(2);
  job.Stopped();
  job.Run(4);
  job.Launch(2, reached - 10);  // the restore takes it 10 steps back
  job.Run(3);
  job.Step(1000);
  job.Run(15.05);  // 10 steps redone, 5 productive

  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kSaveStop), 2.0, 0.15);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kRelaunch), 4.0, 0.15);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kStartup), 0.9 + 3.0, 0.15);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kRedone), 10.0, 1.05);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kProductive), 30.05 - 0.9 + 5.05, 1.05);
  ASSERT_EQ(job.ledger.state().incidents.size(), 1u);
  const proto::GoodputIncident& incident = job.ledger.state().incidents[0];
  EXPECT_EQ(incident.id, "123-hang");
  EXPECT_EQ(incident.fault_unix_ms, fault_ms);
  EXPECT_FALSE(incident.open) << "the job trains past its step again";
  EXPECT_NEAR(incident.rank_s[static_cast<size_t>(GoodputCause::kDetection)], 8 * 6.0, 1.2);
  EXPECT_NEAR(incident.rank_s[static_cast<size_t>(GoodputCause::kRedone)], 8 * 10.0, 8.5);
  EXPECT_NEAR(GoodputLedger::TotalOf(incident.rank_s), 8 * (6 + 2 + 4 + 3 + 10.0), 9);
  EXPECT_EQ(job.ledger.state().furthest_step, job.step());
}

TEST(GoodputTest, SlowStepsLoseTheirExcessOverTheNormalStepTime) {
  Job job(2);
  job.Launch(1, -1);
  job.Step(500);
  job.Run(10);
  job.Step(1000);  // twice as slow: half of each step is lost
  job.Run(10);
  job.Step(500);
  job.Run(10);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kSlowed), 5.0, 0.2);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kProductive), 25.0 - 0.4, 0.2);
  EXPECT_NEAR(job.ledger.state().normal_step_ms, 500, 1e-9);
}

TEST(GoodputTest, NoiseBelowTheThresholdIsNotSlowed) {
  Job job(2);
  job.Launch(1, -1);
  job.Step(500);
  job.Run(5);
  job.Step(600);  // 1.2x: under kSlowedAbove
  job.Run(10);
  EXPECT_EQ(WallS(job.ledger, GoodputCause::kSlowed), 0);
}

TEST(GoodputTest, NoRankUpIsIdleAndAFinishedJobStopsCounting) {
  Job job(2);
  job.Launch(1, -1);
  job.Step(500);
  job.Run(5);
  JobSample gone;  // every rank ended without an incident, the job not yet finished
  gone.unix_ms = job.now() + 3000;
  gone.state = JobState::kRunning;
  gone.ranks_held = 2;
  gone.incarnation = 1;
  job.ledger.Observe(gone);
  EXPECT_NEAR(WallS(job.ledger, GoodputCause::kIdle), 3.0, 1e-9);
  const double before = GoodputLedger::TotalOf(job.ledger.state().wall_s);
  gone.state = JobState::kFinished;
  gone.unix_ms += 60'000;
  job.ledger.Observe(gone);
  EXPECT_EQ(GoodputLedger::TotalOf(job.ledger.state().wall_s), before);
}

TEST(GoodputTest, ANextMasterContinuesTheAccounting) {
  Job job(4);
  job.Launch(1, -1);
  job.Step(500);
  job.Run(10);
  GoodputLedger next(job.ledger.state());
  EXPECT_EQ(next.state(), job.ledger.state());
  EXPECT_NEAR(next.Ettr(), job.ledger.Ettr(), 1e-12);
}

TEST(GoodputTest, OnlyTheNewestIncidentsAreKept) {
  Job job(2);
  job.Launch(1, -1);
  job.Step(200);
  job.Run(1);
  for (int i = 0; i < 20; ++i) {
    job.OpenWindow(job.now());
    job.Run(0.5);
    job.Decide("incident-" + std::to_string(i));
    job.Run(0.5);
    job.Stopped();
    job.Run(0.5);
    job.Launch(2 + i, job.step());
    job.Step(200);
    job.Run(1);
  }
  const auto& incidents = job.ledger.state().incidents;
  ASSERT_EQ(incidents.size(), proto::Goodput::kMaxIncidents);
  EXPECT_EQ(incidents.back().id, "incident-19");
  EXPECT_EQ(incidents.front().id, "incident-4");
}

}  // namespace
}  // namespace ft::master
