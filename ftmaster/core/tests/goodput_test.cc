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
    s_.incarnation = s_.oldest_incarnation = incarnation;
    s_.incident.clear();  // the action is over
    s_.restored_step = restored;
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

// The master sees the first ranks a while after they started (the membership is read as it
// comes): the job's time begins with its first process, whose start its incarnation is.
TEST(GoodputTest, TheJobsTimeBeginsWithItsFirstProcess) {
  GoodputLedger ledger;
  JobSample s;
  s.unix_ms = 1'763'800'000'000;
  s.state = JobState::kRunning;
  s.ranks_held = s.ranks_running = 4;
  s.incarnation = s.oldest_incarnation = static_cast<uint64_t>(s.unix_ms - 1500) * 1'000'000;
  ledger.Observe(s);
  EXPECT_EQ(ledger.state().since_unix_ms, s.unix_ms - 1500);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kStartup), 1.5, 1e-9);
  EXPECT_NEAR(RankS(ledger, GoodputCause::kStartup), 6.0, 1e-9);
}

// The pace first seen with ten steps done, in summaries written before the pass that read them:
// nine of the steps (the first is start-up's) and the time since the summaries were stepping
// while the ledger could not know it yet.
TEST(GoodputTest, StepsThePaceShowsLateAreNotStartup) {
  GoodputLedger ledger;
  JobSample s;
  s.unix_ms = 1'000'000;
  s.state = JobState::kRunning;
  s.ranks_held = s.ranks_running = 2;
  s.incarnation = s.oldest_incarnation = 1;
  ledger.Observe(s);
  s.unix_ms += 3000;
  ledger.Observe(s);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kStartup), 3.0, 1e-9);
  // The summaries were written 0.5 s before the pass that read them: 0.5 s more of stepping.
  s.pace = {.unix_ms = s.unix_ms, .incarnation = 1, .ranks = 2, .step = 10, .steps = 3, .step_ms = 200,
            .summary_unix_ms = s.unix_ms - 500};
  s.restored_step = -1;  // a fresh start: ten steps declared
  s.unix_ms += 100;
  ledger.Observe(s);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kStartup), 3.1 - 0.6 - 1.8, 1e-9);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kProductive), 0.6 + 1.8, 1e-9);
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
  // 4 s without a master, the job stopped meanwhile: the gap is what the job was doing when
  // the last master wrote (productive), the time after it the new master's own phase.
  const double productive = WallS(next, GoodputCause::kProductive);
  JobSample stopped;
  stopped.unix_ms = job.ledger.state().last_unix_ms + 4000;
  stopped.state = JobState::kStopped;
  stopped.ranks_held = 4;
  next.Observe(stopped);
  EXPECT_NEAR(WallS(next, GoodputCause::kProductive), productive + 4, 1e-9);
  stopped.unix_ms += 1000;
  next.Observe(stopped);
  EXPECT_NEAR(WallS(next, GoodputCause::kRelaunch), 1, 1e-9);
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

// A calm rank's summary is written every FT_SUMMARY_REFRESH: the pace may say step 4 when the
// job is at 37. The ranks' last steps as they end, and what the relaunch restored, are exact:
// the redone time is the steps between at the normal step time.
TEST(GoodputTest, RedoneIsTheStepsBetweenTheRestoreAndTheFurthestStepTheRanksEndedAt) {
  JobSample s;
  s.unix_ms = 1'000'000;
  s.state = JobState::kRunning;
  s.ranks_held = s.ranks_running = 2;
  s.incarnation = s.oldest_incarnation = 1;
  s.restored_step = -1;
  s.pace = {.unix_ms = 1'000'000, .incarnation = 1, .ranks = 2, .step = 4, .steps = 5, .step_ms = 200};
  GoodputLedger ledger;
  for (int i = 0; i < 70; ++i) {  // 7 s: the pace never moved past step 4
    s.unix_ms += 100;
    ledger.Observe(s);
  }
  EXPECT_EQ(ledger.state().furthest_step, 4);
  s.state = JobState::kStopped;  // the job crashed at step 37 and was stopped
  s.ranks_running = 0;
  s.ended_step = 37;
  s.unix_ms += 1000;
  ledger.Observe(s);
  EXPECT_EQ(ledger.state().furthest_step, 37);
  s.state = JobState::kRunning;  // relaunched: restores step 20, steps at once
  s.incarnation = 2;  // the relaunch's first ranks: the membership read as they register
  s.oldest_incarnation = 2;
  s.ranks_running = 1;
  s.restored_step = -2;
  s.unix_ms += 300;
  ledger.Observe(s);
  s.incarnation = 3;  // and the rest of them, its oldest still the same launch's
  s.ranks_running = 2;
  s.restored_step = 20;
  s.pace = {.unix_ms = s.unix_ms, .incarnation = 2, .ranks = 2, .step = 21, .steps = 1, .step_ms = 200};
  for (int i = 0; i < 60; ++i) {  // 6 s of stepping, the pace still at step 21
    s.unix_ms += 100;
    s.pace.unix_ms = s.unix_ms;
    ledger.Observe(s);
  }
  // 17 steps of 200 ms again, then productive: one launch, its budget granted once.
  EXPECT_EQ(ledger.state().launch_incarnation, 2u);
  EXPECT_EQ(ledger.state().incarnation, 3u);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kRedone), 3.4, 0.11);
  EXPECT_NEAR(WallS(ledger, GoodputCause::kProductive), 6.9 + 6.0 - 3.4, 0.11);
  EXPECT_EQ(ledger.state().phase, GoodputCause::kProductive);
}

// The ranks say what they restored after they have stepped for a while (the membership is read
// as it is rewritten): the time the pace already showed as done again is not granted twice.
TEST(GoodputTest, ARestoredStepSaidLateDoesNotCountTheRedoneTimeTwice) {
  JobSample s;
  s.unix_ms = 1'000'000;
  s.state = JobState::kRunning;
  s.ranks_held = s.ranks_running = 2;
  s.incarnation = s.oldest_incarnation = 1;
  s.restored_step = -1;
  s.pace = {.unix_ms = 1'000'000, .incarnation = 1, .ranks = 2, .step = 30, .steps = 31, .step_ms = 200};
  GoodputLedger ledger;
  for (int i = 0; i < 10; ++i) {
    s.unix_ms += 100;
    ledger.Observe(s);
  }
  s.incarnation = s.oldest_incarnation = 2;  // relaunched from step 20 (10 steps: 2 s again)
  s.restored_step = -2;                      // not said yet
  s.pace = {.unix_ms = s.unix_ms, .incarnation = 2, .ranks = 2, .step = 21, .steps = 1, .step_ms = 200};
  for (int i = 0; i < 10; ++i) {  // 1 s: the pace says step 21 of 30, redone
    s.unix_ms += 100;
    s.pace.unix_ms = s.unix_ms;
    ledger.Observe(s);
  }
  EXPECT_NEAR(WallS(ledger, GoodputCause::kRedone), 1.0, 0.11);
  s.restored_step = 20;
  for (int i = 0; i < 30; ++i) {
    s.unix_ms += 100;
    s.pace.unix_ms = s.unix_ms;
    ledger.Observe(s);
  }
  EXPECT_NEAR(WallS(ledger, GoodputCause::kRedone), 2.0, 0.11);
}

// The pace is the running launch's: a summary its rank's previous process left, or a rank that
// ended, says nothing of it.
TEST(GoodputTest, PaceIsTheRunningLaunchsOwn) {
  auto member = [](int rank, const char* state, uint64_t incarnation, int64_t unix_ms) {
    proto::Membership m;
    m.rank = rank;
    m.state = state;
    m.incarnation = incarnation;
    m.unix_ms = unix_ms;
    return m;
  };
  auto summary = [](int rank, int64_t unix_ms, int64_t declared, uint64_t steps, double step_ms) {
    proto::RankSummary s;
    s.rank = rank;
    s.unix_ms = unix_ms;
    s.declared_step = declared;
    s.steps = steps;
    s.step_ms = 5 * step_ms;  // the last step alone (a periodic save's): not the pace
    s.step_p50_ms = step_ms;
    return s;
  };
  const std::vector<proto::Membership> members = {member(0, "running", 7, 5000), member(1, "running", 8, 5000),
                                                  member(2, "running", 8, 5000), member(3, "dead", 3, 1000)};
  std::vector<proto::RankSummary> summaries = {summary(0, 6000, 12, 4, 100), summary(1, 6000, 10, 2, 300),
                                               summary(2, 4000, 90, 80, 900),  // before rank 2 registered
                                               summary(3, 900, 95, 85, 50)};   // an ended rank
  JobPace pace = PaceOf(members, summaries, 7000);
  EXPECT_EQ(pace.unix_ms, 7000);
  EXPECT_EQ(pace.incarnation, 8u);
  EXPECT_EQ(pace.ranks, 2);
  EXPECT_EQ(pace.step, 10);
  EXPECT_EQ(pace.steps, 2u);
  EXPECT_EQ(pace.step_ms, 300);  // the upper median of 100 and 300
  summaries[0].declared_step = -1;  // a rank that does not declare its steps
  pace = PaceOf(members, summaries, 7000);
  EXPECT_EQ(pace.step, -1);
  EXPECT_EQ(pace.steps, 2u);
  EXPECT_EQ(PaceOf(members, {}, 7000).unix_ms, 0) << "no summary: no pace";
}

}  // namespace
}  // namespace ft::master
