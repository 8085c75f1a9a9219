// Retention of a tier shared by several nodes' workers, and what a power cut leaves of it.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "jitckpt/tests/fault_file_ops.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"
#include "jitckpt/tests/tier_test_util.h"
#include "jitckpt/tier.h"

namespace ft::ckpt {
namespace {

using testing::AlignedBytes;
using testing::AlignedCopy;
using testing::FaultFileOps;
using testing::SampleManifest;
using testing::TempDir;

constexpr int kWorld = 4;
// Two nodes of two ranks each, sharing the remote directory.
const std::vector<std::vector<int>> kNodes = {{0, 1}, {2, 3}};

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path() + "/remote";
    base_ = SampleManifest(&data_, {5000, 8192}, 4096);
    base_.world_size = kWorld;
    aligned_ = AlignedCopy(data_, 2 << 20);
  }
  Manifest Copy(int64_t step, int rank) const {
    Manifest m = base_;
    m.step = step;
    m.rank = rank;
    return m;
  }
  Status Persist(FileOps& ops, int64_t step, int rank) {
    return PersistCopy(ops, TierKind::kRemote, dir_, Copy(step, rank), aligned_.get(), nullptr, nullptr);
  }
  void PersistAll(int64_t step, const std::vector<int>& ranks) {
    for (int rank : ranks) ASSERT_TRUE(Persist(SystemFileOps(), step, rank).ok());
  }
  // What node `node`'s worker runs after its persists.
  Status RetainAs(FileOps& ops, int node, int keep, std::vector<int64_t> keep_also = {},
                  RetentionResult* result = nullptr) {
    RetentionRule rule;
    rule.keep_steps = keep;
    for (int rank = 0; rank < kWorld; ++rank) rule.expected_ranks.push_back(rank);
    rule.own_ranks = kNodes[static_cast<size_t>(node)];
    rule.keep_also = std::move(keep_also);
    return Retain(ops, dir_, base_.job, rule, result);
  }
  Status RetainAs(int node, int keep, std::vector<int64_t> keep_also = {}, RetentionResult* result = nullptr) {
    return RetainAs(SystemFileOps(), node, keep, std::move(keep_also), result);
  }
  std::set<int64_t> Steps() {
    std::set<int64_t> out;
    for (const CopyId& id : ListCommitted(dir_, base_.job)) out.insert(id.step);
    return out;
  }
  // Steps every rank has a committed copy of.
  std::set<int64_t> CompleteSteps() {
    std::map<int64_t, int> count;
    for (const CopyId& id : ListCommitted(dir_, base_.job)) ++count[id.step];
    std::set<int64_t> out;
    for (const auto& [step, n] : count) {
      if (n == kWorld) out.insert(step);
    }
    return out;
  }

  TempDir scratch_{"/tmp"};
  std::string dir_;
  std::vector<uint8_t> data_;
  Manifest base_;
  AlignedBytes aligned_;
};

// A tier still filling is not stuck: a new job's first complete step, then a just-in-time
// save the hung rank could not join (every healthy rank's copy, not the hung one's).
TEST_F(RetentionTest, ATierStillFillingIsNotStuck) {
  RetentionResult result;
  PersistAll(100, {0, 1, 2, 3});
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_EQ(result.steps_held, 1u);
  EXPECT_FALSE(result.Stuck(2));
  PersistAll(107, {0, 1, 3});
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_EQ(result.steps_held, 2u);
  EXPECT_EQ(result.complete_steps, (std::vector<int64_t>{100}));
  EXPECT_FALSE(result.Stuck(2));
  PersistAll(115, {0, 1, 3});  // a third step none can complete: now it grows
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_TRUE(result.Stuck(2));
}

// The case: with FT_CKPT_KEEP=2 a fast node holding steps 300 and 400 of its ranks
// kept step 200 only while its own copies counted — and removed the only step every rank has.
TEST_F(RetentionTest, OnlyCompleteStepsCountAndANodeRemovesOnlyItsRanksCopies) {
  PersistAll(200, {0, 1, 2, 3});
  PersistAll(300, {0, 1});  // node 1's persists of 300 and 400 failed
  PersistAll(400, {0, 1});
  RetentionResult result;
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_TRUE(result.removed.empty());
  EXPECT_EQ(result.complete_steps, (std::vector<int64_t>{200}));
  EXPECT_EQ(result.steps_held, 3u);
  EXPECT_TRUE(result.Stuck(2));  // three steps, one complete: it grows and nothing can go
  EXPECT_EQ(Steps(), (std::set<int64_t>{200, 300, 400}));
  EXPECT_EQ(CompleteSteps(), (std::set<int64_t>{200}));

  PersistAll(300, {2, 3});  // node 1 catches up: 200 and 300 complete, 400 not yet
  ASSERT_TRUE(RetainAs(1, 2, {}, &result).ok());
  EXPECT_TRUE(result.removed.empty());
  PersistAll(400, {2, 3});
  // Node 0 removes its ranks' copies of 200, never node 1's.
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_EQ(result.removed, (std::vector<CopyId>{{200, 0}, {200, 1}}));
  EXPECT_EQ(result.complete_steps, (std::vector<int64_t>{200, 300, 400}));
  EXPECT_EQ(ListCommitted(dir_, base_.job).front(), (CopyId{200, 2}));
  EXPECT_EQ(CompleteSteps(), (std::set<int64_t>{300, 400}));
  // Node 1's worker removes the rest, and the step's directory with it.
  ASSERT_TRUE(RetainAs(1, 2, {}, &result).ok());
  EXPECT_EQ(result.removed, (std::vector<CopyId>{{200, 2}, {200, 3}}));
  EXPECT_FALSE(std::filesystem::exists(StepDir(dir_, base_.job, 200)));
  EXPECT_EQ(Steps(), (std::set<int64_t>{300, 400}));
}

// The planned step (the newest verified one) stays whatever FT_CKPT_KEEP says: newer steps that
// are untrusted or not yet verified must not push out the step a restore would read.
TEST_F(RetentionTest, ThePlannedStepIsKeptWhenNewerStepsAreNotVerified) {
  for (int64_t step : {100, 200, 300, 400}) PersistAll(step, {0, 1, 2, 3});
  RetentionResult result;
  ASSERT_TRUE(RetainAs(0, 2, /*keep_also=*/{100}, &result).ok());
  EXPECT_EQ(result.removed, (std::vector<CopyId>{{200, 0}, {200, 1}}));
  ASSERT_TRUE(RetainAs(1, 2, /*keep_also=*/{100}, &result).ok());
  EXPECT_EQ(Steps(), (std::set<int64_t>{100, 300, 400}));
  EXPECT_EQ(CompleteSteps(), (std::set<int64_t>{100, 300, 400}));
}

// A copy of another job in this job's directory (two jobs whose names the rule before spelled
// alike, "a.b" and "a_b") is read before anything is removed, and left.
TEST_F(RetentionTest, ACopyOfAnotherJobInThisJobsDirectoryIsLeft) {
  for (int64_t step : {100, 200, 300}) PersistAll(step, {0, 1, 2, 3});
  const std::string other_dir = scratch_.path() + "/other";
  Manifest stranger = Copy(100, 0);
  stranger.job = "a.b";
  ASSERT_TRUE(PersistCopy(TierKind::kRemote, other_dir, stranger, aligned_.get(), nullptr, nullptr).ok());
  const std::string planted = ManifestPath(dir_, base_.job, {100, 0});
  std::filesystem::copy_file(ManifestPath(other_dir, "a.b", {100, 0}), planted,
                             std::filesystem::copy_options::overwrite_existing);
  RetentionResult result;
  ASSERT_TRUE(RetainAs(0, 2, {}, &result).ok());
  EXPECT_EQ(result.removed, (std::vector<CopyId>{{100, 1}}));
  ASSERT_EQ(result.left.size(), 1u);
  EXPECT_NE(result.left[0].find(planted), std::string::npos) << result.left[0];
  EXPECT_NE(result.left[0].find("job 'a.b'"), std::string::npos) << result.left[0];
  EXPECT_TRUE(std::filesystem::exists(planted));
  EXPECT_TRUE(std::filesystem::exists(DataPath(dir_, base_.job, {100, 0})));
}

TEST_F(RetentionTest, BadRulesRemoveNothing) {
  for (int64_t step : {100, 200, 300}) PersistAll(step, {0, 1, 2, 3});
  EXPECT_EQ(RetainAs(0, 0).code(), StatusCode::kInvalidArgument);
  RetentionRule unknown_world;  // no expected ranks: no step can be called complete
  unknown_world.keep_steps = 1;
  unknown_world.own_ranks = {0, 1, 2, 3};
  RetentionResult result;
  ASSERT_TRUE(Retain(dir_, base_.job, unknown_world, &result).ok());
  EXPECT_TRUE(result.removed.empty());
  EXPECT_EQ(Steps(), (std::set<int64_t>{100, 200, 300}));
  ASSERT_TRUE(Retain(scratch_.path() + "/nowhere", base_.job, unknown_world, &result).ok());
}

// Two nodes persist steps 100..400 into the shared remote directory, each running retention
// after its own ranks' persists, as their workers do; the power goes at every point of it in
// turn. After the cut and a restart: every copy listed reads back intact, and the newest step
// whose every copy was acknowledged before the cut is still complete — never the case with
// retention that counts a step once any rank has it (node 0's retention removed the last
// complete step while node 1 had not yet persisted the next).
TEST_F(RetentionTest, APowerCutAnywhereLeavesTheNewestAcknowledgedCompleteStep) {
  const std::vector<int64_t> steps = {100, 200, 300, 400};
  auto run = [&](FaultFileOps& ops, int64_t* acknowledged) {
    *acknowledged = -1;
    for (int64_t step : steps) {
      int ok = 0;
      for (size_t node = 0; node < kNodes.size(); ++node) {
        for (int rank : kNodes[node]) ok += Persist(ops, step, rank).ok() ? 1 : 0;
        // Every rank's persist returned OK: the step is durable and complete from here on.
        if (ok == kWorld) *acknowledged = step;
        (void)RetainAs(ops, static_cast<int>(node), /*keep=*/1);
      }
    }
  };
  FaultFileOps counting;
  int64_t acknowledged = -1;
  run(counting, &acknowledged);
  ASSERT_EQ(acknowledged, 400);
  const int total = counting.mutations();
  ASSERT_GT(total, 40);
  for (int cut = 0; cut <= total; ++cut) {
    std::filesystem::remove_all(dir_);
    FaultFileOps ops;
    ops.CutPowerAfter(cut);
    run(ops, &acknowledged);
    ops.DropUnsynced();
    int removed = 0;
    ASSERT_TRUE(CleanUncommitted(dir_, base_.job, &removed).ok());
    for (const CopyId& id : ListCommitted(dir_, base_.job)) {
      Manifest m;
      Status s = ReadManifest(dir_, base_.job, id, &m);
      ASSERT_TRUE(s.ok()) << "cut after " << cut << ": " << s.ToString();
      std::vector<uint8_t> back(m.data_bytes);
      s = ReadData(dir_, base_.job, m, back.data(), back.size());
      ASSERT_TRUE(s.ok()) << "cut after " << cut << ": " << s.ToString();
      EXPECT_EQ(back, data_);
    }
    if (acknowledged >= 0) {
      EXPECT_TRUE(CompleteSteps().contains(acknowledged))
          << "cut after " << cut << " of " << total << " calls: step " << acknowledged
          << " was acknowledged by every rank and is no longer complete";
    }
  }
}

}  // namespace
}  // namespace ft::ckpt
