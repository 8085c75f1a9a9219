// Jobs whose names differ never share an arena, a plan file or a tier directory, and one job's
// retention or restore never touches another's copies — also copies of another job left in
// this job's directory by the rule before (names cut at 48 characters, '.' spelled '_').
#include <gtest/gtest.h>

#include <filesystem>

#include "common/job_name.h"
#include "jitckpt/arena.h"
#include "jitckpt/node_plan.h"
#include "jitckpt/safe_name.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"
#include "jitckpt/tests/tier_test_util.h"
#include "jitckpt/tier.h"

namespace ft::ckpt {
namespace {

using testing::AlignedBytes;
using testing::AlignedCopy;
using testing::SampleManifest;
using testing::TempDir;

const std::string kLong(60, 'j');
const std::vector<std::pair<std::string, std::string>> kLookAlikes = {
    {"a.b", "a_b"}, {"a/b", "a_b"}, {kLong + "-1", kLong + "-2"}, {std::string(48, 'j'), kLong}};

TEST(JobPathsTest, JobsWhoseNamesDifferGetTheirOwnFiles) {
  for (const auto& [a, b] : kLookAlikes) {
    EXPECT_NE(Arena::PathFor("/d", a, 0), Arena::PathFor("/d", b, 0)) << a << " and " << b;
    EXPECT_NE(Arena::PrefetchPathFor("/d", a, 0), Arena::PrefetchPathFor("/d", b, 0)) << a << " and " << b;
    EXPECT_NE(NodePlanPath("/d", a, "n"), NodePlanPath("/d", b, "n")) << a << " and " << b;
    EXPECT_NE(StepDir("/d", a, 1), StepDir("/d", b, 1)) << a << " and " << b;
    // The job part of a file name stays one that RankOf recognizes.
    EXPECT_EQ(Arena::RankOf(Arena::PathFor("/d", a, 12)), 12) << a;
    EXPECT_EQ(SafeJobName(SafeJobName(a)), SafeJobName(a));
    EXPECT_EQ(SafeJobName(a), JobToken(a));
  }
}

class JobTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path() + "/ckpt";
    base_ = SampleManifest(&data_, {5000, 8192}, 4096);
    aligned_ = AlignedCopy(data_, 2 << 20);
  }
  Status Persist(const std::string& job, int64_t step, int rank) {
    Manifest m = base_;
    m.job = job;
    m.step = step;
    m.rank = rank;
    m.world_size = 1;
    return PersistCopy(TierKind::kRemote, dir_, m, aligned_.get(), nullptr, nullptr);
  }

  TempDir scratch_{"/tmp"};
  std::string dir_;
  std::vector<uint8_t> data_;
  Manifest base_;
  AlignedBytes aligned_;
};

TEST_F(JobTierTest, OneJobsRetentionNeverRemovesTheOthersSteps) {
  for (const auto& [a, b] : kLookAlikes) {
    ASSERT_TRUE(Persist(a, 100, 0).ok());
    ASSERT_TRUE(Persist(b, 100, 0).ok());
    ASSERT_TRUE(Persist(b, 200, 0).ok());
    EXPECT_EQ(ListCommitted(dir_, a), (std::vector<CopyId>{{100, 0}})) << a;
    RetentionRule rule;
    rule.keep_steps = 1;
    rule.expected_ranks = rule.own_ranks = {0};
    ASSERT_TRUE(Retain(dir_, b, rule, nullptr).ok());
    EXPECT_EQ(ListCommitted(dir_, b), (std::vector<CopyId>{{200, 0}})) << b;
    EXPECT_EQ(ListCommitted(dir_, a), (std::vector<CopyId>{{100, 0}})) << a << " lost its step to " << b;
    Manifest m;
    EXPECT_TRUE(ReadManifest(dir_, a, {100, 0}, &m).ok()) << a;
    std::filesystem::remove_all(dir_);
  }
}

}  // namespace
}  // namespace ft::ckpt
