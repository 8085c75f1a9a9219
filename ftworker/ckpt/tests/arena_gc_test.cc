// DecideArenaGc: every keep and remove reason, and the order they are checked in.
#include "ftworker/ckpt/arena_gc.h"

#include <gtest/gtest.h>

namespace ft::worker {
namespace {

// A committed, untorn copy of step 10, persisted in both tiers, nobody holding it.
ArenaFacts Persisted(int64_t step = 10) {
  ArenaFacts a;
  a.path = "/dev/shm/ft-ckpt.j.3";
  a.has_copy = true;
  a.step = step;
  a.rank = 3;
  a.persisted_in = {"local", "remote"};
  return a;
}

// The job finished; its plan, newest complete and newest verified step are 20.
JobGcFacts Finished() {
  JobGcFacts j;
  j.known = true;
  j.finished = true;
  j.planned_step = 20;
  j.newest_complete = 20;
  j.newest_verified = 20;
  return j;
}

TEST(ArenaGcTest, FinishedJobsPersistedOlderCopyIsRemoved) {
  ArenaGcDecision d = DecideArenaGc(Persisted(), Finished());
  EXPECT_TRUE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kRemovePersisted);
  EXPECT_EQ(ArenaGcLine(Persisted(), d),
            "removed /dev/shm/ft-ckpt.j.3: step 10 persisted in local,remote, not planned/newest");
}

TEST(ArenaGcTest, RunningJobWhosePlanNamesANewerStepLetsGo) {
  JobGcFacts j = Finished();
  j.finished = false;
  ArenaGcDecision d = DecideArenaGc(Persisted(), j);
  EXPECT_TRUE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kRemovePersisted);
}

TEST(ArenaGcTest, RunningJobWithoutANewerPlanKeeps) {
  JobGcFacts j = Finished();
  j.finished = false;
  j.planned_step = 10;
  ArenaGcDecision d = DecideArenaGc(Persisted(12), j);
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepJobRunning);
  j.planned_step = -1;  // no plan yet
  EXPECT_EQ(DecideArenaGc(Persisted(12), j).reason, ArenaGcReason::kKeepJobRunning);
}

TEST(ArenaGcTest, PlannedNewestCompleteAndNewestVerifiedStepsAreKept) {
  JobGcFacts j = Finished();
  j.planned_step = 10;
  EXPECT_EQ(DecideArenaGc(Persisted(), j).reason, ArenaGcReason::kKeepPlanned);
  j = Finished();
  j.newest_complete = 10;
  EXPECT_EQ(DecideArenaGc(Persisted(), j).reason, ArenaGcReason::kKeepNewestComplete);
  j = Finished();
  j.newest_verified = 10;
  EXPECT_EQ(DecideArenaGc(Persisted(), j).reason, ArenaGcReason::kKeepNewestVerified);
  EXPECT_FALSE(DecideArenaGc(Persisted(), j).remove);
}

// `ftworker gc --release`: a finished job that will not be relaunched lets its planned and
// newest steps go too — once a tier holds them; a running job keeps them whatever was asked.
TEST(ArenaGcTest, AReleasedFinishedJobLetsItsPlannedStepGoOncePersisted) {
  JobGcFacts released = Finished();
  released.release = true;
  ArenaGcDecision d = DecideArenaGc(Persisted(20), released);
  EXPECT_TRUE(d.remove) << d.why;
  EXPECT_EQ(d.reason, ArenaGcReason::kRemovePersisted);
  EXPECT_NE(d.why.find("released"), std::string::npos) << d.why;
  ArenaFacts only_copy = Persisted(20);
  only_copy.persisted_in.clear();
  d = DecideArenaGc(only_copy, released);
  EXPECT_FALSE(d.remove) << d.why;
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepNotPersisted);
  JobGcFacts running = released;
  running.finished = false;
  d = DecideArenaGc(Persisted(20), running);
  EXPECT_FALSE(d.remove) << d.why;
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepJobRunning);
  EXPECT_FALSE(DecideArenaGc(Persisted(20), Finished()).remove) << "without --release the planned step stays";
}

TEST(ArenaGcTest, ACopyNoTierHoldsIsKept) {
  ArenaFacts a = Persisted();
  a.persisted_in.clear();
  ArenaGcDecision d = DecideArenaGc(a, Finished());
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepNotPersisted);
  EXPECT_EQ(ArenaGcLine(a, d).rfind("kept /dev/shm/ft-ckpt.j.3: ", 0), 0u) << ArenaGcLine(a, d);
  a.persisted_in = {"remote"};  // one tier is enough
  EXPECT_TRUE(DecideArenaGc(a, Finished()).remove);
}

TEST(ArenaGcTest, ALiveHolderKeepsItWhateverElseHolds) {
  ArenaFacts a = Persisted();
  a.held_by = "rank 3 (pid 412) runs on this node";
  ArenaGcDecision d = DecideArenaGc(a, Finished());
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepHeld);
  EXPECT_NE(d.why.find("pid 412"), std::string::npos) << d.why;
  a.has_copy = false;  // even an empty one: its writer is filling it
  EXPECT_EQ(DecideArenaGc(a, Finished()).reason, ArenaGcReason::kKeepHeld);
}

TEST(ArenaGcTest, EmptyAndTornArenasHoldNothing) {
  ArenaFacts a = Persisted();
  a.has_copy = false;
  a.persisted_in.clear();
  JobGcFacts unknown;  // no Redis: an empty arena needs no job state
  ArenaGcDecision d = DecideArenaGc(a, unknown);
  EXPECT_TRUE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kRemoveEmpty);
  a = Persisted();
  a.torn = true;
  a.persisted_in.clear();
  d = DecideArenaGc(a, unknown);
  EXPECT_TRUE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kRemoveTorn);
}

TEST(ArenaGcTest, WithoutTheJobsStateACopyIsKept) {
  JobGcFacts unknown;
  unknown.unknown_why = "FT_REDIS is not set";
  ArenaGcDecision d = DecideArenaGc(Persisted(), unknown);
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepJobUnknown);
  EXPECT_NE(d.why.find("FT_REDIS is not set"), std::string::npos) << d.why;
}

TEST(ArenaGcTest, UntrustedAndOtherJobsFilesAreLeftAlone) {
  ArenaFacts a = Persisted();
  a.trusted = false;
  a.untrusted_why = "owned by uid 0";
  ArenaGcDecision d = DecideArenaGc(a, Finished());
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepUntrusted);
  a = Persisted();
  a.other_job = true;
  a.copy_job = "other";
  d = DecideArenaGc(a, Finished());
  EXPECT_FALSE(d.remove);
  EXPECT_EQ(d.reason, ArenaGcReason::kKeepOtherJob);
}

TEST(ArenaGcTest, PrefetchArenasFollowTheSameRule) {
  ArenaFacts a = Persisted();
  a.prefetch = true;
  a.path = "/dev/shm/ft-prefetch.j.3";
  EXPECT_TRUE(DecideArenaGc(a, Finished()).remove);
  JobGcFacts j = Finished();
  j.planned_step = 10;
  EXPECT_EQ(DecideArenaGc(a, j).reason, ArenaGcReason::kKeepPlanned);
}

TEST(ArenaGcTest, ReasonsHaveNames) {
  EXPECT_STREQ(ArenaGcReasonName(ArenaGcReason::kRemovePersisted), "persisted");
  EXPECT_STREQ(ArenaGcReasonName(ArenaGcReason::kKeepHeld), "held");
  EXPECT_STREQ(ArenaGcReasonName(ArenaGcReason::kKeepNotPersisted), "not-persisted");
}

}  // namespace
}  // namespace ft::worker
