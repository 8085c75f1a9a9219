#include "ftmaster/core/save_outcome.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

std::vector<SaveTarget> Targets() { return {{0, "n1"}, {2, "n1"}, {4, "n2"}, {6, ""}}; }

TEST(SaveOutcomeTest, NothingSavedSaysSo) {
  SaveOutcome o = CountSaveOutcome(Targets(), {{0, "not_supported"}, {2, "not_supported"}, {4, "failed"}});
  EXPECT_EQ(o.shards, 4);
  EXPECT_EQ(o.ranks, 4);
  EXPECT_EQ(o.saved, 0);
  EXPECT_EQ(o.not_supported, 2);
  EXPECT_EQ(o.failed, 1);
  EXPECT_EQ(o.unreachable, 1);
  EXPECT_EQ(o.unanswered, 0);
  EXPECT_EQ(Conclude(o), SaveConclusion::kNoCheckpoint) << "not only nothing_registered: no ft_register hint";
  // What a person reads: the counts with their meaning, and the consequence.
  EXPECT_EQ(DescribeSaveOutcome(o),
            "saved 0 of 4 shards (2 answered not_supported: this libft.so cannot checkpoint; 1 failed; 1 "
            "never asked: no node is known for the rank (no membership in Redis)); the job is stopped "
            "without a checkpoint");
  EXPECT_EQ(EncodeSaveOutcome("inc-1", o),
            R"({"v":1,"incident":"inc-1","shards":4,"saved":0,"verified":0,"step":-1,"verdict":"",)"
            R"("ranks":4,"done":0,"not_supported":2,"nothing_registered":0,"failed":1,"unreachable":1,"unanswered":0})");
  SaveOutcome back;
  ASSERT_TRUE(DecodeSaveOutcome(EncodeSaveOutcome("inc-1", o), &back));
  EXPECT_EQ(back, o);
  EXPECT_FALSE(DecodeSaveOutcome(R"({"v":1,"saved":"two"})", &back));
  EXPECT_FALSE(DecodeSaveOutcome("not json", &back));
  EXPECT_FALSE(DecodeSaveOutcome(R"({"v":2})", &back));
}

TEST(SaveOutcomeTest, NothingRegisteredSaysCallFtRegister) {
  SaveOutcome o = CountSaveOutcome(Targets(), {{0, "nothing_registered"}, {2, "nothing_registered"},
                                               {4, "nothing_registered"}});
  EXPECT_EQ(o.nothing_registered, 3);
  EXPECT_EQ(o.failed, 0);
  EXPECT_EQ(Conclude(o), SaveConclusion::kNothingRegistered);
  EXPECT_EQ(DescribeSaveOutcome(o),
            "saved 0 of 4 shards (3 answered nothing_registered; 1 never asked: no node is known for "
            "the rank (no membership in Redis)); the job is stopped without a checkpoint: nothing "
            "is registered — call ft_register");
}

TEST(SaveOutcomeTest, NoTargetReachableIsNotASave) {
  std::vector<SaveTarget> none_known = {{0, ""}, {1, ""}};
  SaveOutcome o = CountSaveOutcome(none_known, {});
  EXPECT_EQ(o.saved, 0);
  EXPECT_EQ(o.unreachable, 2);
  EXPECT_EQ(Conclude(o), SaveConclusion::kNoCheckpoint) << DescribeSaveOutcome(o);
}

TEST(SaveOutcomeTest, PartialAndCompleteSaves) {
  SaveOutcome partial = CountSaveOutcome(Targets(), {{0, "done"}, {2, "done"}});
  EXPECT_EQ(partial.saved, 2);
  EXPECT_EQ(partial.unanswered, 1);
  EXPECT_EQ(Conclude(partial), SaveConclusion::kIncomplete) << DescribeSaveOutcome(partial);
  EXPECT_EQ(DescribeSaveOutcome(partial).rfind("saved 2 of 4 shards", 0), 0u) << DescribeSaveOutcome(partial);
  std::vector<SaveTarget> all = {{0, "n1"}};
  SaveOutcome complete = CountSaveOutcome(all, {{0, "done"}});
  EXPECT_EQ(Conclude(complete), SaveConclusion::kComplete);
  EXPECT_EQ(DescribeSaveOutcome(complete), "saved 1 of 1 shard; the checkpoint is complete");
}

// Replicas of one shard count once; the verification's step and verdict join the outcome.
TEST(SaveOutcomeTest, ReplicasCountAsOneShardAndVerificationIsAdded) {
  std::vector<SaveTarget> targets = {{0, "n0"}, {1, "n0"}, {2, "n1"}, {3, "n1"}};
  auto shard_of = [](int rank) { return ShardId{rank % 2, 0, -1}; };  // tp=2, dp=2
  SaveOutcome o = CountSaveOutcome(targets, {{0, "done"}, {1, "done"}, {2, "done"}, {3, "failed"}}, shard_of);
  EXPECT_EQ(o.shards, 2);
  EXPECT_EQ(o.saved, 2);
  EXPECT_EQ(o.done, 3);
  EXPECT_EQ(o.failed, 1);
  StepJudgement j;
  j.verdict.step = 120;
  j.verdict.state = proto::VerdictState::kVerified;
  j.verdict.verified_shards = 2;
  AddVerification(j, &o);
  EXPECT_EQ(Conclude(o), SaveConclusion::kVerified);
  EXPECT_EQ(DescribeSaveOutcome(o),
            "saved 2 of 2 shards (3 ranks answered done; 1 failed), verified 2 at step 120 "
            "(verified); the checkpoint is complete and verified");
  j.verdict.state = proto::VerdictState::kUntrusted;
  j.verdict.verified_shards = 1;
  AddVerification(j, &o);
  EXPECT_EQ(Conclude(o), SaveConclusion::kNotVerified) << DescribeSaveOutcome(o);
}

}  // namespace
}  // namespace ft::master
