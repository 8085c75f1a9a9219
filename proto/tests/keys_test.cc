#include "proto/keys.h"

#include <gtest/gtest.h>

#include <set>

#include "common/job_name.h"
#include "proto/messages.h"

namespace ft::proto {
namespace {

TEST(KeysTest, EveryKeyOfTheSchema) {
  Keys k("llama");
  EXPECT_EQ(k.prefix(), "ft:{llama}:");
  EXPECT_EQ(k.Events(), "ft:{llama}:events");
  EXPECT_EQ(k.Progress(3), "ft:{llama:g3}:progress");
  EXPECT_EQ(k.Summaries(15), "ft:{llama:g15}:summary");
  EXPECT_EQ(k.ProgressOf(35), "ft:{llama:g3}:progress");
  EXPECT_EQ(k.SummaryOf(35), "ft:{llama:g3}:summary");
  EXPECT_EQ(k.Ranks(), "ft:{llama}:ranks");
  EXPECT_EQ(k.Workers(), "ft:{llama}:workers");
  const std::string node1 = "ft:{llama:g" + std::to_string(Keys::GroupOfNode("node1")) + "}:";
  EXPECT_EQ(k.WorkerHeartbeat("node1"), node1 + "worker:node1");
  EXPECT_EQ(k.Timeouts(), "ft:{llama}:timeouts");
  EXPECT_EQ(k.TimeoutsVersion(), "ft:{llama}:timeouts:version");
  EXPECT_EQ(k.Commands("node1"), "ft:{llama}:cmd:node1");
  EXPECT_EQ(k.CommandCursor("node1"), "ft:{llama}:cmd:node1:cursor") << "in the stream's slot";
  EXPECT_EQ(k.LegacyCommandCursor("node1"), node1 + "cursor:node1");
  EXPECT_EQ(k.Acks(), "ft:{llama}:acks");
  EXPECT_EQ(k.Incidents(), "ft:{llama}:incidents");
  EXPECT_EQ(k.Evicted(), "ft:{llama}:evicted");
  EXPECT_EQ(k.Leader(), "ft:{llama}:leader");
  EXPECT_EQ(k.MasterState(), "ft:{llama}:master");
  EXPECT_EQ(k.Prefetch(), "ft:{llama}:prefetch");
  EXPECT_EQ(k.CkptRewinds(), "ft:{llama}:ckpt:rewinds") << "in the job's slot: written beside the plan";
}

TEST(KeysTest, NamesAreSanitized) {
  EXPECT_EQ(SanitizeName("a-b_c.D9"), "a-b_c.D9");
  EXPECT_EQ(SanitizeName("a b/c:{x}"), "a_b_c__x_");
  EXPECT_EQ(SanitizeName(""), "_");
  EXPECT_EQ(SanitizeName(std::string("a\0b", 3)), "a_b");
  EXPECT_EQ(SanitizeName("n\xc3\xa9"), "n__");
  // Braces in a job name must not break the cluster hash tag.
  Keys k("evil}job{");
  const std::string tag = JobToken("evil}job{");
  EXPECT_EQ(tag.substr(0, 10), "evil_job_-");
  EXPECT_EQ(k.prefix(), "ft:{" + tag + "}:");
  EXPECT_EQ(Keys("").Events(), "ft:{" + JobToken("") + "}:events");
  EXPECT_EQ(k.Commands("node 1:x"), "ft:{" + tag + "}:cmd:node_1_x");
  EXPECT_EQ(k.WorkerHeartbeat(""), "ft:{" + tag + ":g" + std::to_string(Keys::GroupOfNode("")) + "}:worker:_");
}

// The groups are part of the layout: a worker and a master built at different times must put
// a rank and a node in the same group. Pinned values (FNV-1a 64 of the sanitized node name).
TEST(KeysTest, GroupsArePinned) {
  EXPECT_EQ(Keys::kGroups, 16);
  EXPECT_EQ(Keys::GroupOfRank(0), 0);
  EXPECT_EQ(Keys::GroupOfRank(17), 1);
  EXPECT_EQ(Keys::GroupOfRank(131071), 15);
  EXPECT_EQ(Keys::GroupOfRank(-1), 15) << "never negative";
  EXPECT_EQ(Keys::GroupOfNode("node0"), Keys::GroupOfNode("node0"));
  EXPECT_EQ(Keys::GroupOfNode("node 1"), Keys::GroupOfNode("node_1")) << "the sanitized name";
  // FNV-1a 64 of "node0" and "node1", mod 16.
  EXPECT_EQ(Keys::GroupOfNode("node0"), 7);
  EXPECT_EQ(Keys::GroupOfNode("node1"), 4);
  // 64 node names fall in more than half of the groups (a spread, not one slot).
  std::set<int> groups;
  for (int i = 0; i < 64; ++i) groups.insert(Keys::GroupOfNode("host-" + std::to_string(i)));
  EXPECT_GT(groups.size(), 8u);
  // Group keys are the job's and only the job's.
  Keys k("j");
  EXPECT_EQ(k.GroupPrefix(4), "ft:{j:g4}:");
  EXPECT_EQ(k.AllGroups("progress"), "ft:{j:g*}:progress");
  EXPECT_EQ(k.AllProgress().size(), 16u);
  EXPECT_EQ(k.AllProgress()[7], k.Progress(7));
  EXPECT_EQ(k.AllSummaries()[2], k.Summaries(2));
}

// A job is named in Redis as in its files (common/job_name.h): jobs whose names differ never
// share a key.
TEST(KeysTest, JobsWhoseNamesDifferNeverShareKeys) {
  const std::string long_name(60, 'j');
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"a.b", "a_b"}, {"a/b", "a_b"}, {"a b", "a_b"}, {long_name + "1", long_name + "2"}}) {
    EXPECT_NE(Keys(a).prefix(), Keys(b).prefix()) << a << " and " << b;
    EXPECT_EQ(Keys(a).prefix(), "ft:{" + JobToken(a) + "}:");
  }
}

TEST(SizeBucketTest, Boundaries) {
  EXPECT_EQ(SizeBucket(0), 0);
  EXPECT_EQ(SizeBucket(64 * 1024 - 1), 0);
  EXPECT_EQ(SizeBucket(64 * 1024), 1);
  EXPECT_EQ(SizeBucket(1024 * 1024 - 1), 1);
  EXPECT_EQ(SizeBucket(1024 * 1024), 2);
  EXPECT_EQ(SizeBucket(16 * 1024 * 1024 - 1), 2);
  EXPECT_EQ(SizeBucket(16 * 1024 * 1024), 3);
  EXPECT_EQ(SizeBucket(256ULL * 1024 * 1024 - 1), 3);
  EXPECT_EQ(SizeBucket(256ULL * 1024 * 1024), 4);
  EXPECT_EQ(SizeBucket(~0ULL), 4);
}

}  // namespace
}  // namespace ft::proto
