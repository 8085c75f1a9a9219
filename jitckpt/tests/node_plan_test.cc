#include "jitckpt/node_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/job_name.h"
#include "jitckpt/tests/sample_node_plan.h"
#include "jitckpt/tests/temp_dir.h"

namespace ft::ckpt {
namespace {

using testing::SamplePlan;
using testing::TempDir;


Status Parse(std::string_view text) {
  NodePlan out;
  return ParseNodePlan(text, &out);
}

TEST(NodePlanTest, EncodesTheDocumentedFormat) {
  EXPECT_EQ(EncodeNodePlan(SamplePlan()),
            "ft-restore-plan 1\n"
            "job job-a\n"
            "node node-1.cluster\n"
            "version 12\n"
            "step 1200\n"
            "arena_dir /dev/shm\n"
            "local_dir /var/lib/ft ckpt\n"
            "remote_dir /mnt/shared/ckpt\n"
            "rank 0 0123456789abcdef 0:node-1.cluster:arena,local,remote 4:node-2:remote\n"
            "rank 3 fedcba9876543210 3:node-1.cluster:prefetched 7:node-2:arena\n"
            "rank 4 0123456789abcdef\n"
            "end\n");
}

TEST(NodePlanTest, RoundTrips) {
  NodePlan plan = SamplePlan();
  NodePlan back;
  ASSERT_TRUE(ParseNodePlan(EncodeNodePlan(plan), &back).ok());
  EXPECT_EQ(back, plan);

  NodePlan none;  // no verified checkpoint, no tiers, no ranks
  none.job = "j";
  none.node = "n";
  none.arena_dir = "/dev/shm";
  std::string text = EncodeNodePlan(none);
  EXPECT_NE(text.find("step none\n"), std::string::npos);
  EXPECT_EQ(text.find("local_dir"), std::string::npos);
  ASSERT_TRUE(ParseNodePlan(text, &back).ok());
  EXPECT_EQ(back, none);
  EXPECT_EQ(back.step, -1);
}

TEST(NodePlanTest, RanksComeOutSortedAndFindable) {
  NodePlan plan = SamplePlan();
  std::swap(plan.ranks[0], plan.ranks[2]);
  NodePlan back;
  ASSERT_TRUE(ParseNodePlan(EncodeNodePlan(plan), &back).ok());
  EXPECT_EQ(back, SamplePlan());
  ASSERT_NE(back.Find(3), nullptr);
  EXPECT_EQ(back.Find(3)->digest, 0xfedcba9876543210ull);
  EXPECT_EQ(back.Find(1), nullptr);
}

TEST(NodePlanTest, KeysMayComeInAnyOrderAndTheLastNewlineIsOptional) {
  NodePlan back;
  ASSERT_TRUE(ParseNodePlan("ft-restore-plan 1\nstep 5\narena_dir /a\nrank 2 0000000000000001 2:n:arena\n"
                            "version 3\nnode n\njob j\nend",
                            &back)
                  .ok());
  EXPECT_EQ(back.step, 5);
  EXPECT_EQ(back.version, 3);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].sources[0], (PlanSource{2, "n", {"arena"}}));
}

TEST(NodePlanTest, EveryErrorNamesItsLine) {
  const std::string head = "ft-restore-plan 1\njob j\nnode n\nversion 1\nstep 5\narena_dir /a\n";
  struct Case {
    std::string text;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"plan 1\n", "line 1: not a restore plan"},
      {"ft-restore-plan x\nend\n", "line 1: not a restore plan"},
      {"ft-restore-plan 0\nend\n", "line 1: not a restore plan"},
      {head + "colour blue\nend\n", "line 7: unknown key 'colour'"},
      {head + "\nend\n", "line 7: unknown key ''"},
      {head + "job k\nend\n", "line 7: 'job' twice"},
      {head + "local_dir\nend\n", "line 7: 'local_dir' without a value"},
      {head + "local_dir relative/dir\nend\n", "line 7: local_dir 'relative/dir' is not an absolute path"},
      {head + "remote_dir /a\tb\nend\n", "line 7: control character 0x09"},
      {head + "remote_dir /a\rb\nend\n", "line 7: control character 0x0d"},
      {head + "rank 1\nend\n", "line 7: rank line"},
      {head + "rank x 0000000000000001\nend\n", "line 7: bad rank 'x'"},
      {head + "rank -1 0000000000000001\nend\n", "line 7: bad rank '-1'"},
      {head + "rank 01 0000000000000001\nend\n", "line 7: bad rank '01'"},
      {head + "rank 99999999999 0000000000000001\nend\n", "line 7: bad rank"},
      {head + "rank 1 000000000000000G\nend\n", "line 7: bad digest"},
      {head + "rank 1 0000000000000001 2:n\nend\n", "line 7: source '2:n' is not"},
      {head + "rank 1 0000000000000001 2:n:disk\nend\n", "line 7: source '2:n:disk': unknown tier 'disk'"},
      {head + "rank 1 0000000000000001 2:n:arena,arena\nend\n", "tier 'arena' twice"},
      {head + "rank 1 0000000000000001 2:n:\nend\n", "unknown tier ''"},
      {head + "rank 1 0000000000000001 2:n/x:arena\nend\n", "bad node name 'n/x'"},
      {head + "rank 1 0000000000000001 2:..:arena\nend\n", "bad node name '..'"},
      {head + "rank 1 0000000000000001 x:n:arena\nend\n", "bad rank 'x'"},
      {head + "rank 1 0000000000000001 2:n:arena 2:n:local\nend\n", "source rank 2 on node n listed twice"},
      {head + "rank 1 0000000000000001  2:n:arena\nend\n", "source ''"},
      {head + "rank 1 0000000000000001\nrank 1 0000000000000002\nend\n", "line 8: rank 1 twice"},
      {head + "end\nrank 1 0000000000000001\n", "line 8: text after 'end'"},
      {head + "end\n\n", "line 8: text after 'end'"},
      {head + "end now\n", "line 7: 'end' takes no value"},
      {head, "truncated: no 'end' after line 6"},
      {"", "restore plan is empty"},
      {"ft-restore-plan 1\njob j\nnode n\nversion 1\narena_dir /a\nend\n", "lacks 'step'"},
      {"ft-restore-plan 1\njob j\nnode n\nstep 1\nversion 1\nend\n", "lacks 'arena_dir'"},
      {"ft-restore-plan 1\njob j\nnode n b\nend\n", "line 3: bad node name 'n b'"},
      {"ft-restore-plan 1\njob j\nversion -3\nend\n", "line 3: bad version '-3'"},
      {"ft-restore-plan 1\nstep -1\nend\n", "line 2: bad step '-1'"},
      {"ft-restore-plan 1\nstep 1.5\nend\n", "line 2: bad step '1.5'"},
      {"ft-restore-plan 1\nstep 99999999999999999999\nend\n", "line 2: bad step"},
      {"ft-restore-plan 1\njob " + std::string(300, 'j') + "\nend\n", "line 2: job name too long"},
  };
  for (const Case& c : cases) {
    NodePlan out;
    out.job = "untouched";
    Status s = ParseNodePlan(c.text, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << c.expect << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expect), std::string_view::npos) << "want '" << c.expect << "', got " << s.ToString();
    EXPECT_EQ(out.job, "untouched");
  }
}

// A replacement node's worker lists the copy it prefetched for rank 5 next to rank 5's own
// copy on the node it ran on before: one rank, two nodes, two sources.
TEST(NodePlanTest, TheSameRankOnTwoNodesIsTwoSources) {
  const std::string text =
      "ft-restore-plan 1\njob j\nnode n2\nversion 1\nstep 5\narena_dir /a\n"
      "rank 5 0000000000000001 5:n2:prefetched 5:n1:local,remote 1:n0:arena\nend\n";
  NodePlan plan;
  ASSERT_TRUE(ParseNodePlan(text, &plan).ok());
  ASSERT_EQ(plan.ranks.size(), 1u);
  ASSERT_EQ(plan.ranks[0].sources.size(), 3u);
  EXPECT_EQ(plan.ranks[0].sources[0], (PlanSource{5, "n2", {"prefetched"}}));
  EXPECT_EQ(plan.ranks[0].sources[1], (PlanSource{5, "n1", {"local", "remote"}}));
}

// A buddy copy (ftworker/prefetch/replicator.h): rank 5's bytes held on n3 under the tier "replica".
TEST(NodePlanTest, ABuddyCopyIsASourceWithTheReplicaTier) {
  const std::string text =
      "ft-restore-plan 1\njob j\nnode n3\nversion 1\nstep 5\narena_dir /a\n"
      "rank 5 0000000000000001 5:n1:arena 5:n3:replica\nend\n";
  NodePlan plan;
  Status s = ParseNodePlan(text, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(plan.ranks[0].sources.size(), 2u);
  EXPECT_EQ(plan.ranks[0].sources[1], (PlanSource{5, "n3", {"replica"}}));
  NodePlan again;
  ASSERT_TRUE(ParseNodePlan(EncodeNodePlan(plan), &again).ok());
  EXPECT_EQ(again.ranks[0].sources[1], (PlanSource{5, "n3", {"replica"}}));
}

TEST(NodePlanTest, NewerFormatIsRefusedByName) {
  Status s = Parse("ft-restore-plan 3\nsomething new\nend\n");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(), "restore plan format 3 is newer than this build's 2; upgrade ft");
}

TEST(NodePlanTest, ASettlingPlanIsFormatTwoAndAFinalOneStaysFormatOne) {
  NodePlan plan = SamplePlan();
  plan.settling = "rank 3 of this node ended (signal 9)";
  const std::string text = EncodeNodePlan(plan);
  EXPECT_EQ(text.substr(0, text.find("arena_dir")),
            "ft-restore-plan 2\n"
            "job job-a\n"
            "node node-1.cluster\n"
            "version 12\n"
            "step 1200\n"
            "settling rank 3 of this node ended (signal 9)\n");
  NodePlan back;
  ASSERT_TRUE(ParseNodePlan(text, &back).ok());
  EXPECT_EQ(back, plan);
  // Final: the format every reader since the first reads (EncodesTheDocumentedFormat pins it).
  plan.settling.clear();
  EXPECT_EQ(EncodeNodePlan(plan).substr(0, 18), "ft-restore-plan 1\n");
}

TEST(NodePlanTest, SettlingIsAFormatTwoKeyOnOneLine) {
  Status s = Parse("ft-restore-plan 1\njob j\nnode n\nversion 1\nstep none\nsettling x\narena_dir /a\nend\n");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("line 6: unknown key 'settling'"), std::string::npos) << s.message();
  EXPECT_FALSE(Parse("ft-restore-plan 2\njob j\nnode n\nversion 1\nstep none\nsettling\narena_dir /a\nend\n").ok());
  NodePlan plan;
  plan.job = "j";
  plan.node = "n";
  plan.arena_dir = "/a";
  plan.settling = "two\nlines";  // written as one: the reader takes one line
  NodePlan back;
  ASSERT_TRUE(ParseNodePlan(EncodeNodePlan(plan), &back).ok());
  EXPECT_EQ(back.settling, "two lines");
}

TEST(NodePlanTest, TruncationAtEveryLengthIsAnError) {
  std::string text = EncodeNodePlan(SamplePlan());
  for (size_t length = 0; length + 1 < text.size(); ++length) {
    // Every prefix lacks its 'end' line (the one without the final newline is complete).
    EXPECT_EQ(Parse(text.substr(0, length)).code(), StatusCode::kCorrupt) << length;
  }
  EXPECT_TRUE(Parse(text.substr(0, text.size() - 1)).ok());
}

TEST(NodePlanTest, PathSanitizesJobAndNode) {
  EXPECT_EQ(NodePlanPath("/dev/shm", "job-a", "node-1.cluster"), "/dev/shm/ft-plan.job-a.node-1.cluster");
  EXPECT_EQ(NodePlanPath("/dev/shm/", "a b", "../etc"), "/dev/shm/ft-plan." + JobToken("a b") + "..._etc");  // no '/': stays in the dir
  EXPECT_EQ(NodePlanPath("/dev/shm", "", ".."), "/dev/shm/ft-plan." + JobToken("") + ".__");
}

class NodePlanFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  TempDir dir_;
};

TEST_F(NodePlanFileTest, WriteIsPrivateAtomicAndReadsBack) {
  std::string path = NodePlanPath(dir_.path(), "job-a", "n1");
  NodePlan plan = SamplePlan();
  ASSERT_TRUE(WriteNodePlan(path, plan).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  NodePlan back;
  ASSERT_TRUE(ReadNodePlan(path, &back).ok());
  EXPECT_EQ(back, plan);

  // A rewrite replaces the file whole (a new inode), leaving no temp file.
  plan.version = 13;
  plan.step = -1;
  ino_t before = st.st_ino;
  ASSERT_TRUE(WriteNodePlan(path, plan).ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before);
  ASSERT_TRUE(ReadNodePlan(path, &back).ok());
  EXPECT_EQ(back, plan);
  EXPECT_EQ(Files(), std::vector<std::string>{"ft-plan.job-a.n1"});
}

// A worker killed by SIGKILL leaves its plan file: a relaunch reading it would restore what was
// planned before the failure (or nothing) while its peers restore the plan of now (campaign
// seed 252). The lock tells a live worker's file from a dead one's.
TEST_F(NodePlanFileTest, APlanIsReadOnlyWhileItsWorkerHoldsTheLock) {
  const std::string path = NodePlanPath(dir_.path(), "job-a", "n1");
  NodePlan back;
  ASSERT_TRUE(WriteNodePlan(path, SamplePlan()).ok());
  EXPECT_TRUE(ReadLiveNodePlan(path, &back).ok()) << "no lock file: a worker from before the lock";

  auto dead = std::make_unique<PlanWriterLock>();
  ASSERT_TRUE(dead->Claim(path).ok());
  EXPECT_EQ(ReadLiveNodePlan(path, &back).code(), StatusCode::kNotFound) << "Claim removed the file left there";
  NodePlan plan = SamplePlan();
  plan.version = 21;
  ASSERT_TRUE(WriteNodePlan(path, plan).ok());
  ASSERT_TRUE(ReadLiveNodePlan(path, &back).ok());
  EXPECT_EQ(back.version, 21u);

  // A second worker of the node cannot claim while the first lives, and removes nothing.
  PlanWriterLock second;
  EXPECT_EQ(second.Claim(path).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ReadLiveNodePlan(path, &back).ok());

  dead.reset();  // SIGKILL: the kernel drops the lock; the files stay
  EXPECT_EQ(Files(), (std::vector<std::string>{"ft-plan.job-a.n1", "ft-planlock.job-a.n1"}));
  Status stale = ReadLiveNodePlan(path, &back);
  EXPECT_EQ(stale.code(), StatusCode::kNotFound);
  EXPECT_NE(stale.message().find("is gone"), std::string::npos) << stale.ToString();

  // The next worker: the dead one's plan goes before its lock is taken; its own plans are read.
  ASSERT_TRUE(second.Claim(path).ok());
  EXPECT_EQ(Files(), std::vector<std::string>{"ft-planlock.job-a.n1"});
  plan.version = 22;
  ASSERT_TRUE(WriteNodePlan(path, plan).ok());
  ASSERT_TRUE(ReadLiveNodePlan(path, &back).ok());
  EXPECT_EQ(back.version, 22u);
  // A clean stop removes the plan, then the lock file.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  second.Release();
  EXPECT_TRUE(Files().empty());
}

TEST_F(NodePlanFileTest, AnUnreadablePlanIsNeverWritten) {
  std::string path = dir_.File("plan");
  NodePlan plan = SamplePlan();
  plan.local_dir = "relative";
  Status s = WriteNodePlan(path, plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not an absolute path"), std::string_view::npos) << s.ToString();
  plan = SamplePlan();
  plan.job = "two\nlines";
  EXPECT_EQ(WriteNodePlan(path, plan).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Files().empty());
}

TEST_F(NodePlanFileTest, WriteIntoAMissingDirectoryFailsCleanly) {
  Status s = WriteNodePlan(dir_.File("absent/plan"), SamplePlan());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("absent/plan"), std::string_view::npos) << s.ToString();
}

TEST_F(NodePlanFileTest, ReadErrorsNameTheFile) {
  NodePlan out;
  EXPECT_EQ(ReadNodePlan(dir_.File("absent"), &out).code(), StatusCode::kNotFound);
  std::string path = dir_.File("damaged");
  std::ofstream(path) << "ft-restore-plan 1\njob j\n";
  Status s = ReadNodePlan(path, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("truncated"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(ReadNodePlan(dir_.path(), &out).code(), StatusCode::kCorrupt);  // a directory
}

TEST_F(NodePlanFileTest, ReadRefusesAnotherUsersPlan) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a file away needs root";
  std::string path = dir_.File("plan");
  ASSERT_TRUE(WriteNodePlan(path, SamplePlan()).ok());
  ASSERT_EQ(chown(path.c_str(), 4242, 4242), 0);
  NodePlan out;
  Status s = ReadNodePlan(path, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
}

}  // namespace
}  // namespace ft::ckpt
