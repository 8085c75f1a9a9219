// `ftworker gc` as a job's epilogue runs it: the real binary against a real redis-server and
// real arena files, written by processes that have exited (a rank that ended) and by this live
// process (a rank still running). Checks the removed/kept line of each arena and which files
// are left.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/tier.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "redis/client.h"
#include "redis/tests/redis_test.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;
using namespace std::chrono_literals;

class GcCommandTest : public redis::testing::RedisClientTest {
 protected:
  // A rank that saved `step` (or nothing, step < 0) and exited: its arena's writer is dead.
  std::string ExitedRank(int rank, int64_t step) {
    pid_t pid = fork();
    if (pid == 0) {
      FakeArena arena(arena_dir_, job_, rank, 8192);
      if (step >= 0) arena.Save(step, static_cast<uint8_t>(rank + 1));
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return ckpt::Arena::PathFor(arena_dir_, job_, rank);
  }

  // Writes the arena's committed copy to the local tier, as the worker would have.
  void Persist(const std::string& path) {
    ckpt::Arena arena;
    ckpt::Manifest m;
    uint64_t generation = 0;
    ASSERT_TRUE(ckpt::Arena::OpenForRead(path, &arena).ok());
    ASSERT_TRUE(arena.ReadCommitted(&m, &generation).ok());
    ckpt::PersistStats stats;
    Status s = ckpt::PersistCopy(ckpt::TierKind::kLocal, local_, m, arena.data(generation),
                                 [] { return true; }, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // The master's word: finished, step 20 planned and verified.
  void JobFinishedWithPlan(int64_t step) {
    redis::Reply r;
    ASSERT_TRUE(client_.Run({"HSET", keys_.MasterState(), "job_state", "finished"}, &r).ok());
    proto::RestorePlan plan;
    plan.version = 1;
    plan.step = step;
    plan.unix_ms = 1;
    ASSERT_TRUE(client_.Run({"SET", keys_.Restore(), proto::Encode(plan)}, &r).ok());
    proto::StepVerdict v;
    v.step = step;
    v.state = proto::VerdictState::kVerified;
    v.shards = v.verified_shards = v.copies = 1;
    v.unix_ms = 1;
    ASSERT_TRUE(client_.Run({"HSET", keys_.CkptVerdicts(), std::to_string(step), proto::Encode(v)}, &r).ok());
  }

  // Runs `ftworker gc ...` with the environment; its exit status, stdout in *out, stderr in *err.
  int RunGc(const std::vector<std::string>& args, bool with_redis, std::string* out, std::string* err) {
    const std::string out_path = tmp_.path() + "/gc.out", err_path = tmp_.path() + "/gc.err";
    pid_t pid = fork();
    if (pid == 0) {
      int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(o, 1);
      dup2(e, 2);
      clearenv();
      setenv("FT_CKPT_DIR", local_.c_str(), 1);
      setenv("FT_CKPT_ARENA_DIR", "/nonexistent-arena-dir", 1);  // --arena-dir must win
      if (with_redis) {
        setenv("FT_REDIS", server_.url().c_str(), 1);
        setenv("FT_REDIS_PASSWORD", server_.password().c_str(), 1);
      }
      std::vector<char*> argv{const_cast<char*>(FTWORKER_BIN), const_cast<char*>("gc")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(FTWORKER_BIN, argv.data());
      _exit(127);
    }
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    auto slurp = [](const std::string& p) {
      std::ifstream f(p);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    *out = slurp(out_path);
    *err = slurp(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static bool HasLine(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }

  std::string job_ = UniqueJob("gc");
  proto::Keys keys_{job_};
  TempDir tmp_{"gc-cmd"};
  std::string arena_dir_ = tmp_.Sub("shm");
  std::string local_ = tmp_.Sub("local");
};

TEST_F(GcCommandTest, RemovesWhatIsPersistedAndSaysWhyItKeepsTheRest) {
  const std::string persisted = ExitedRank(0, 10);
  const std::string planned = ExitedRank(1, 20);
  const std::string unpersisted = ExitedRank(2, 10);
  const std::string empty = ExitedRank(4, -1);
  FakeArena running(arena_dir_, job_, 3, 8192);  // this process is rank 3, still alive
  running.Save(10, 9);
  Persist(persisted);
  Persist(planned);
  Persist(running.path());
  JobFinishedWithPlan(20);

  std::string out, err;
  // A dry run says the same and removes nothing.
  ASSERT_EQ(RunGc({"--job", job_, "--arena-dir", arena_dir_, "--dry-run"}, true, &out, &err), 0) << err;
  EXPECT_TRUE(HasLine(out, "would remove " + persisted + ": step 10 persisted in local, not planned/newest")) << out;
  EXPECT_TRUE(std::filesystem::exists(persisted));
  EXPECT_TRUE(std::filesystem::exists(empty));

  ASSERT_EQ(RunGc({"--job", job_, "--arena-dir", arena_dir_}, true, &out, &err), 0) << err;
  EXPECT_TRUE(HasLine(out, "removed " + persisted + ": step 10 persisted in local, not planned/newest")) << out;
  EXPECT_TRUE(HasLine(out, "kept " + planned + ": step 20 is the planned step")) << out;
  EXPECT_TRUE(HasLine(out, "kept " + unpersisted + ": step 10 of rank 2 is in no tier")) << out;
  EXPECT_TRUE(HasLine(out, "kept " + running.path() + ": its writer, pid " + std::to_string(getpid()) +
                               ", is alive")) << out;
  EXPECT_TRUE(HasLine(out, "removed " + empty + ": no committed copy")) << out;
  EXPECT_TRUE(HasLine(out, "gc of job " + job_ + " in " + arena_dir_ + ": removed 2 arenas")) << out;
  EXPECT_EQ(out.find("RESULT"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(persisted));
  EXPECT_FALSE(std::filesystem::exists(empty));
  for (const std::string& p : {planned, unpersisted, running.path()}) EXPECT_TRUE(std::filesystem::exists(p)) << p;

  // The job will not be relaunched: --release lets the planned step go too, once persisted;
  // the copy no tier holds and the live rank's arena stay.
  ASSERT_EQ(RunGc({"--job", job_, "--arena-dir", arena_dir_, "--release"}, true, &out, &err), 0) << err;
  EXPECT_TRUE(HasLine(out, "removed " + planned + ": step 20 persisted in local, the finished job released")) << out;
  EXPECT_TRUE(HasLine(out, "kept " + unpersisted + ": step 10 of rank 2 is in no tier")) << out;
  EXPECT_FALSE(std::filesystem::exists(planned));
  for (const std::string& p : {unpersisted, running.path()}) EXPECT_TRUE(std::filesystem::exists(p)) << p;
}

// Buddy copies this node's worker kept of another node's ranks (ft-replica.<job>.<rank>) go by
// the same rule once that worker is gone: persisted and not needed, removed; in no tier, kept.
TEST_F(GcCommandTest, BuddyCopiesFollowTheSameRule) {
  // Written by a worker that has exited: saved as arenas elsewhere, moved to the replica names.
  const std::string elsewhere = tmp_.Sub("elsewhere");
  std::vector<std::string> replicas;
  for (const auto& [rank, step] : {std::pair{6, 10}, std::pair{7, 10}}) {
    pid_t pid = fork();
    if (pid == 0) {
      FakeArena arena(elsewhere, job_, rank, 8192);
      arena.Save(step, static_cast<uint8_t>(rank));
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    replicas.push_back(ckpt::Arena::ReplicaPathFor(arena_dir_, job_, rank));
    ASSERT_EQ(std::rename(ckpt::Arena::PathFor(elsewhere, job_, rank).c_str(), replicas.back().c_str()), 0);
  }
  Persist(replicas[0]);  // rank 6's own worker persisted its copy; rank 7's nowhere reachable
  JobFinishedWithPlan(20);
  std::string out, err;
  ASSERT_EQ(RunGc({"--job", job_, "--arena-dir", arena_dir_}, true, &out, &err), 0) << err;
  EXPECT_TRUE(HasLine(out, "removed " + replicas[0] + ": step 10 persisted in local, not planned/newest")) << out;
  EXPECT_TRUE(HasLine(out, "kept " + replicas[1] + ": step 10 of rank 7 is in no tier")) << out;
  EXPECT_FALSE(std::filesystem::exists(replicas[0]));
  EXPECT_TRUE(std::filesystem::exists(replicas[1]));
}

TEST_F(GcCommandTest, WithoutRedisKeepsEveryCopyAndSaysWhy) {
  const std::string persisted = ExitedRank(0, 10);
  Persist(persisted);
  std::string out, err;
  ASSERT_EQ(RunGc({"--job", job_, "--arena-dir", arena_dir_}, false, &out, &err), 0) << err;
  EXPECT_TRUE(HasLine(out, "kept " + persisted + ": step 10 may be the planned, newest complete or newest "
                               "verified step: the job's state is unknown (FT_REDIS is not set)")) << out;
  EXPECT_TRUE(std::filesystem::exists(persisted));
}

TEST_F(GcCommandTest, AnUnknownFlagIsAClearError) {
  std::string out, err;
  EXPECT_EQ(RunGc({"--job", job_, "--arena-dri", arena_dir_}, true, &out, &err), 2);
  EXPECT_NE(err.find("unknown argument '--arena-dri'"), std::string::npos) << err;
}

}  // namespace
}  // namespace ft::worker
