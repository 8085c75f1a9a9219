// CkptKeeper with a temporary arena directory and temporary tiers: arenas written with the
// Arena API as the agent writes them, the real tiers (jitckpt/tier.h), and a persist seam that
// holds, overwrites behind, or fails a persist at a chosen moment. No Redis, no process.
#include "common/mutex.h"
#include "ftworker/ckpt/ckpt_keeper.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/tier.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;
using namespace std::chrono_literals;
using Tiers = std::vector<std::string>;

constexpr int64_t kUnixMs = 1'700'000'000'000;

// Wraps ckpt::PersistCopy: can hold every persist until Open(), run a hook first (on the
// persist thread), or fail one tier.
class PersistSeam {
 public:
  void Close() {
    MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    {
      MutexLock lock(&mu_);
      open_ = true;
    }
    cv_.NotifyAll();
  }
  std::function<void(ckpt::TierKind, const ckpt::Manifest&)> before;
  std::optional<ckpt::TierKind> fail_tier;
  std::atomic<int> calls{0};

  PersistFn Fn() {
    return [this](ckpt::TierKind kind, std::string_view dir, const ckpt::Manifest& m,
                  const uint8_t* data, const std::function<bool()>& still_valid,
                  ckpt::PersistStats* stats) {
      {
        MutexLock lock(&mu_);
        cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return open_; });
      }
      ++calls;
      if (before) before(kind, m);
      if (fail_tier == kind) {
        return Status::IoError("writing " + ckpt::DataPath(dir, m.job, {m.step, m.rank}) +
                               ": No space left on device");
      }
      return ckpt::PersistCopy(kind, dir, m, data, still_valid, stats);
    };
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ GUARDED_BY(mu_) = true;
};

class CkptKeeperTest : public ::testing::Test {
 protected:
  CkptKeeperTest()
      : job_(UniqueJob("ck")),
        tmp_("keeper"),
        arena_dir_(tmp_.Sub("shm")),
        local_(tmp_.Sub("local")),
        remote_(tmp_.Sub("remote")) {}

  std::unique_ptr<CkptKeeper> NewKeeper(int keep = 2) {
    CkptKeeperOptions o;
    o.job = job_;
    o.node = "n1";
    o.arena_dir = arena_dir_;
    o.local_dir = local_;
    o.remote_dir = remote_;
    o.keep = keep;
    o.scan_interval_ns = 0;  // every Tick scans
    o.persist = seam_.Fn();
    return std::make_unique<CkptKeeper>(o);
  }

  // One daemon tick, then what it reported, folded into latest_ (newest per copy).
  std::vector<CkptReport> Tick(CkptKeeper& keeper, const std::vector<int>& ranks = {0}) {
    now_ += 10 * kMs;
    keeper.Tick(now_, kUnixMs, ranks);
    return Take(keeper);
  }
  std::vector<CkptReport> Take(CkptKeeper& keeper) {
    std::vector<CkptReport> reports = keeper.TakeReports();
    for (const CkptReport& r : reports) latest_[{r.copy.step, r.copy.rank}] = r;
    return reports;
  }
  // Lets the persist thread finish, then collects what it reported.
  void Settle(CkptKeeper& keeper) {
    ASSERT_TRUE(keeper.WaitIdle(60s));
    Tick(keeper);
    ASSERT_TRUE(keeper.WaitIdle(60s));
    Take(keeper);
  }
  const CkptReport& Latest(int64_t step, int rank) {
    auto it = latest_.find({step, rank});
    EXPECT_NE(it, latest_.end()) << "no report of step " << step << " rank " << rank;
    static const CkptReport kNone;
    return it == latest_.end() ? kNone : it->second;
  }
  bool AnyTempFile(const std::string& dir) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    }
    return false;
  }

  std::string job_;
  TempDir tmp_;
  std::string arena_dir_, local_, remote_;
  PersistSeam seam_;
  uint64_t now_ = MonoNs();
  std::map<ckpt::CopyId, CkptReport> latest_;
};

// A commit is reported at once with the arena as its only tier (no disk involved yet), then
// persisted to the local and the remote tier and reported again with all three.
TEST_F(CkptKeeperTest, ReportsACommitAtOnceThenPersistsItToBothTiers) {
  seam_.Close();  // the disk is slow: nothing persisted before the first report
  auto keeper = NewKeeper();
  FakeArena arena(arena_dir_, job_, 0, (3 << 20) + 4096);
  EXPECT_TRUE(Tick(*keeper).empty()) << "nothing committed yet";

  const ckpt::Manifest m = arena.Save(5, 0xab);
  std::vector<CkptReport> first = Tick(*keeper);
  ASSERT_EQ(first.size(), 1u);
  const proto::CkptCopy& c = first[0].copy;
  EXPECT_FALSE(first[0].removed);
  EXPECT_EQ(c.step, 5);
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.node, "n1");
  EXPECT_EQ(c.digest, ckpt::ContentDigest(m));
  EXPECT_EQ(c.bytes, m.data_bytes);
  EXPECT_EQ(c.tp, m.tp);
  EXPECT_EQ(c.pp, m.pp);
  EXPECT_EQ(c.dp, m.dp);
  EXPECT_FALSE(c.torn);
  EXPECT_EQ(c.tiers, (Tiers{"arena"}));
  EXPECT_TRUE(Tick(*keeper).empty()) << "the same commit is reported once";

  seam_.Open();
  Settle(*keeper);
  EXPECT_EQ(Latest(5, 0).copy.tiers, (Tiers{"arena", "local", "remote"}));
  EXPECT_TRUE(Latest(5, 0).copy.error.empty()) << Latest(5, 0).copy.error;
  for (const std::string& dir : {local_, remote_}) {
    EXPECT_EQ(ckpt::ListCommitted(dir, job_), (std::vector<ckpt::CopyId>{{5, 0}})) << dir;
    ckpt::Manifest back;
    ASSERT_TRUE(ckpt::ReadManifest(dir, job_, {5, 0}, &back).ok());
    EXPECT_EQ(ckpt::ContentDigest(back), ckpt::ContentDigest(m));
    std::vector<uint8_t> data(m.data_bytes);
    Status s = ckpt::ReadData(dir, job_, back, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(data.front(), 0xab);
    EXPECT_EQ(data.back(), 0xab);
  }
}

// Several nodes' arenas share one directory: a rank's arena is read only once the rank was
// seen on this node.
TEST_F(CkptKeeperTest, ReadsOnlyArenasOfThisNodesRanks) {
  auto keeper = NewKeeper();
  FakeArena other(arena_dir_, job_, 3, 8192);
  other.Save(2, 1);
  EXPECT_TRUE(Tick(*keeper, {0}).empty()) << "rank 3 is not on this node";
  std::vector<CkptReport> r = Tick(*keeper, {0, 3});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].copy.rank, 3);
  // Once seen here, a rank stays this node's after its process is gone.
  other.Save(3, 2);
  r = Tick(*keeper, {0});
  ASSERT_GE(r.size(), 1u);
  Settle(*keeper);
  EXPECT_EQ(Latest(3, 3).copy.tiers, (Tiers{"arena", "local", "remote"}));
}

// A new save overwrites the copy while it is being persisted (one slot: at once; two: the
// save after next): the old copy is dropped (never committed in the tier, no temp file left)
// and the new one is persisted.
TEST_F(CkptKeeperTest, CopyOverwrittenWhilePersistingIsDroppedForTheNewOne) {
  LogCapture log;
  auto keeper = NewKeeper();
  FakeArena arena(arena_dir_, job_, 0, 2 << 20, 1 << 20, /*slots=*/1);
  bool overwritten = false;
  seam_.before = [&](ckpt::TierKind, const ckpt::Manifest& m) {
    if (m.step == 5 && !overwritten) {
      overwritten = true;
      arena.Save(6, 0xcd);  // the agent commits step 6 while the worker writes step 5
    }
  };
  arena.Save(5, 0xab);
  Tick(*keeper);
  ASSERT_TRUE(keeper->WaitIdle(60s));
  ASSERT_TRUE(overwritten);
  EXPECT_EQ(log.Count({"step 5 of rank 0 was overwritten", "dropped"}), 1u) << log.All();
  Settle(*keeper);
  EXPECT_TRUE(Latest(5, 0).removed) << "step 5 is held nowhere now";
  EXPECT_EQ(Latest(6, 0).copy.tiers, (Tiers{"arena", "local", "remote"}));
  for (const std::string& dir : {local_, remote_}) {
    EXPECT_EQ(ckpt::ListCommitted(dir, job_), (std::vector<ckpt::CopyId>{{6, 0}})) << dir;
    EXPECT_FALSE(AnyTempFile(dir)) << dir;
  }
}

// FT_CKPT_KEEP steps per tier; a copy retention removed from every tier is reported removed,
// and one the arena no longer holds loses the arena tier. The arena's two slots hold the last
// two steps saved.
TEST_F(CkptKeeperTest, RetentionKeepsTheNewestStepsAndReportsWhatWentAway) {
  auto keeper = NewKeeper(/*keep=*/3);
  keeper->SetPlan(-1);  // the master has verified nothing yet
  FakeArena arena(arena_dir_, job_, 0, 64 << 10, 16 << 10);
  arena.world_size = 1;
  for (int64_t step = 1; step <= 4; ++step) {
    arena.Save(step, static_cast<uint8_t>(step));
    Tick(*keeper);
    Settle(*keeper);
  }
  for (const std::string& dir : {local_, remote_}) {
    EXPECT_EQ(ckpt::ListCommitted(dir, job_), (std::vector<ckpt::CopyId>{{2, 0}, {3, 0}, {4, 0}})) << dir;
  }
  EXPECT_TRUE(Latest(1, 0).removed);
  EXPECT_EQ(Latest(2, 0).copy.tiers, (Tiers{"local", "remote"}));
  EXPECT_EQ(Latest(3, 0).copy.tiers, (Tiers{"arena", "local", "remote"})) << "the arena's other slot";
  EXPECT_EQ(Latest(4, 0).copy.tiers, (Tiers{"arena", "local", "remote"}));
}

// Two nodes share the remote tier (FT_CKPT_KEEP=2, four ranks). Node 2's persists of steps 300
// and 400 fail: node 1, holding 300 and 400 of its own ranks, must not remove step 200 — the
// only step every rank has — nor ever any copy of node 2's ranks.
TEST_F(CkptKeeperTest, SharedRemoteTierKeepsTheLastStepEveryRankHas) {
  PersistSeam seam2;
  const std::string local2 = tmp_.Sub("local2");
  auto keeper1 = NewKeeper(/*keep=*/2);
  CkptKeeperOptions o;
  o.job = job_;
  o.node = "n2";
  o.arena_dir = arena_dir_;
  o.local_dir = local2;
  o.remote_dir = remote_;
  o.keep = 2;
  o.scan_interval_ns = 0;
  o.persist = seam2.Fn();
  auto keeper2 = std::make_unique<CkptKeeper>(o);
  keeper1->SetPlan(-1);
  keeper2->SetPlan(-1);
  // Both have cleaned the tiers at start before anything is persisted.
  ASSERT_TRUE(keeper1->WaitIdle(60s));
  ASSERT_TRUE(keeper2->WaitIdle(60s));
  std::vector<std::unique_ptr<FakeArena>> arenas;
  for (int rank = 0; rank < 4; ++rank) {
    arenas.push_back(std::make_unique<FakeArena>(arena_dir_, job_, rank, 64 << 10, 16 << 10));
    arenas.back()->world_size = 4;
  }
  for (int64_t step : {200, 300, 400}) {
    if (step == 300) seam2.fail_tier = ckpt::TierKind::kRemote;
    for (auto& arena : arenas) arena->Save(step, static_cast<uint8_t>(step / 100));
    now_ += 10 * kMs;
    keeper1->Tick(now_, kUnixMs, {0, 1});
    keeper2->Tick(now_, kUnixMs, {2, 3});
    ASSERT_TRUE(keeper1->WaitIdle(60s));
    ASSERT_TRUE(keeper2->WaitIdle(60s));
  }
  const std::vector<ckpt::CopyId> remote = ckpt::ListCommitted(remote_, job_);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(std::binary_search(remote.begin(), remote.end(), ckpt::CopyId{200, rank}))
        << "step 200 of rank " << rank << " was removed from the remote tier";
  }
  EXPECT_TRUE(std::binary_search(remote.begin(), remote.end(), ckpt::CopyId{400, 0}));
  // Each node's local tier holds only its ranks: complete there means every rank of the node.
  EXPECT_EQ(ckpt::ListCommitted(local_, job_),
            (std::vector<ckpt::CopyId>{{300, 0}, {300, 1}, {400, 0}, {400, 1}}));
}

// Retention waits until the worker has read the master's restore plan, and then keeps its step
// whatever FT_CKPT_KEEP says: newer steps may be untrusted or not verified yet.
TEST_F(CkptKeeperTest, RetentionWaitsForThePlanAndKeepsThePlannedStep) {
  LogCapture log;
  auto keeper = NewKeeper(/*keep=*/1);
  FakeArena arena(arena_dir_, job_, 0, 64 << 10, 16 << 10);
  arena.world_size = 1;
  for (int64_t step = 1; step <= 3; ++step) {
    arena.Save(step, static_cast<uint8_t>(step));
    Tick(*keeper);
    Settle(*keeper);
  }
  EXPECT_EQ(ckpt::ListCommitted(remote_, job_), (std::vector<ckpt::CopyId>{{1, 0}, {2, 0}, {3, 0}}));
  EXPECT_GE(log.Count({"retention waits for the restore plan"}), 1u) << log.All();
  keeper->SetPlan(1);
  arena.Save(4, 4);
  Tick(*keeper);
  Settle(*keeper);
  for (const std::string& dir : {local_, remote_}) {
    EXPECT_EQ(ckpt::ListCommitted(dir, job_), (std::vector<ckpt::CopyId>{{1, 0}, {4, 0}})) << dir;
  }
  EXPECT_TRUE(Latest(2, 0).removed);
  EXPECT_FALSE(Latest(1, 0).removed);
}

// The newest verified step stays beside the planned one, whatever FT_CKPT_KEEP says.
TEST_F(CkptKeeperTest, RetentionKeepsTheNewestVerifiedStepBesideThePlannedOne) {
  auto keeper = NewKeeper(/*keep=*/1);
  FakeArena arena(arena_dir_, job_, 0, 64 << 10, 16 << 10);
  arena.world_size = 1;
  for (int64_t step = 1; step <= 3; ++step) {
    arena.Save(step, static_cast<uint8_t>(step));
    Tick(*keeper);
    Settle(*keeper);
  }
  keeper->SetPlan(1);
  JobGcFacts facts;
  facts.known = true;
  facts.planned_step = 1;
  facts.newest_verified = 2;
  keeper->SetGcFacts(facts, {0});
  arena.Save(4, 4);
  Tick(*keeper);
  Settle(*keeper);
  for (const std::string& dir : {local_, remote_}) {
    EXPECT_EQ(ckpt::ListCommitted(dir, job_), (std::vector<ckpt::CopyId>{{1, 0}, {2, 0}, {4, 0}})) << dir;
  }
  EXPECT_EQ(Latest(3, 0).copy.tiers, (Tiers{"arena"})) << "out of the tiers, still in the arena's other slot";
  arena.Save(5, 5);
  Tick(*keeper);
  Settle(*keeper);
  EXPECT_TRUE(Latest(3, 0).removed);
}

// <remote>/<job> made by another user (someone took the name first on a shared file system):
// the worker says so, persists nothing into it, and reports the error with each copy.
TEST_F(CkptKeeperTest, ATierDirectoryOfAnotherUserIsRefusedWithAClearError) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory away needs root";
  LogCapture log;
  const std::string job_dir = ckpt::StepDir(remote_, job_, 0).substr(0, ckpt::StepDir(remote_, job_, 0).rfind('/'));
  std::filesystem::create_directories(job_dir);
  ASSERT_EQ(::chown(job_dir.c_str(), 4242, 4242), 0);
  auto keeper = NewKeeper();
  FakeArena arena(arena_dir_, job_, 0, 64 << 10, 16 << 10);
  arena.Save(3, 3);
  Tick(*keeper);
  Settle(*keeper);
  const proto::CkptCopy& c = Latest(3, 0).copy;
  EXPECT_EQ(c.tiers, (Tiers{"arena", "local"}));
  EXPECT_NE(c.error.find("owned by uid 4242"), std::string::npos) << c.error;
  EXPECT_GE(log.Count({"remote checkpoint tier", "owned by uid 4242", "FT_CKPT_REMOTE_DIR"}), 1u) << log.All();
  EXPECT_TRUE(std::filesystem::is_empty(job_dir));
}

// A full disk: reported in the copy's error and logged with what to do; the arena copy stays
// reported, and the other tier still gets it.
TEST_F(CkptKeeperTest, DiskFullIsReportedAndTheArenaCopyKept) {
  LogCapture log;
  seam_.fail_tier = ckpt::TierKind::kLocal;
  auto keeper = NewKeeper();
  FakeArena arena(arena_dir_, job_, 0, 64 << 10);
  arena.Save(4, 7);
  Tick(*keeper);
  Settle(*keeper);
  const proto::CkptCopy& c = Latest(4, 0).copy;
  EXPECT_FALSE(Latest(4, 0).removed);
  EXPECT_EQ(c.tiers, (Tiers{"arena", "remote"}));
  EXPECT_NE(c.error.find("local: "), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("No space left on device"), std::string::npos) << c.error;
  EXPECT_EQ(log.Count({"persisting step 4 of rank 0 to the local", "No space left on device",
                       "stays in the arena", "FT_CKPT_DIR"}), 1u) << log.All();
  EXPECT_TRUE(ckpt::ListCommitted(local_, job_).empty());
}

// A torn copy (saved during an optimizer update) is reported, torn, and never persisted.
TEST_F(CkptKeeperTest, TornCopyIsReportedNotPersisted) {
  auto keeper = NewKeeper();
  FakeArena arena(arena_dir_, job_, 0, 64 << 10);
  arena.Save(9, 1, /*torn=*/true);
  Tick(*keeper);
  Settle(*keeper);
  EXPECT_TRUE(Latest(9, 0).copy.torn);
  EXPECT_EQ(Latest(9, 0).copy.tiers, (Tiers{"arena"}));
  EXPECT_EQ(seam_.calls.load(), 0);
  EXPECT_TRUE(ckpt::ListCommitted(local_, job_).empty());
}

// A save in progress: with two slots it writes the other one and the arena still holds its
// copy; with one it overwrites the copy, which the arena then no longer holds.
TEST_F(CkptKeeperTest, ArenaBeingRewrittenKeepsItsCopyOnlyWithTwoSlots) {
  seam_.fail_tier = ckpt::TierKind::kLocal;
  auto keeper = NewKeeper();
  FakeArena two(arena_dir_, job_, 0, 64 << 10);
  FakeArena one(arena_dir_, job_, 1, 64 << 10, 1 << 20, /*slots=*/1);
  two.Save(4, 7);
  one.Save(4, 7);
  const std::vector<int> ranks = {0, 1};
  for (int i = 0; i < 2; ++i) {
    Tick(*keeper, ranks);
    ASSERT_TRUE(keeper->WaitIdle(60s));
  }
  Take(*keeper);
  two.BeginSave();
  one.BeginSave();
  Tick(*keeper, ranks);
  EXPECT_EQ(Latest(4, 0).copy.tiers, (Tiers{"arena", "remote"}));
  EXPECT_EQ(Latest(4, 1).copy.tiers, (Tiers{"remote"}));
}

// A restarted worker: uncommitted files (temp files, data without a manifest) are removed and
// logged; committed copies of the local tier are reported; the shared remote tier's copies
// are reported for this node's ranks only.
TEST_F(CkptKeeperTest, RestartCleansUncommittedFilesAndReportsCommittedCopies) {
  {
    FakeArena a0(arena_dir_, job_, 0, 64 << 10);
    FakeArena a5(arena_dir_, job_, 5, 64 << 10);
    for (FakeArena* a : {&a0, &a5}) {
      ckpt::Manifest m = a->Save(7, 3);
      ckpt::PersistStats stats;
      for (auto [kind, dir] : {std::pair{ckpt::TierKind::kLocal, local_},
                               std::pair{ckpt::TierKind::kRemote, remote_}}) {
        if (kind == ckpt::TierKind::kLocal && a == &a5) continue;  // rank 5 is another node's
        Status s = ckpt::PersistCopy(kind, dir, m, a->committed_data(), [] { return true; }, &stats);
        ASSERT_TRUE(s.ok()) << s.ToString();
      }
    }
    std::filesystem::remove(a0.path());
    std::filesystem::remove(a5.path());
  }
  // What a worker killed mid-persist leaves behind.
  std::filesystem::create_directories(ckpt::StepDir(local_, job_, 8));
  std::ofstream(ckpt::DataPath(local_, job_, {8, 0}) + ".tmp.4242") << "partial";
  std::ofstream(ckpt::DataPath(local_, job_, {8, 1})) << "renamed, manifest never written";
  std::filesystem::create_directories(ckpt::StepDir(remote_, job_, 8));
  std::ofstream(ckpt::DataPath(remote_, job_, {8, 0}) + ".tmp.4242") << "partial";

  LogCapture log;
  auto keeper = NewKeeper();
  ASSERT_TRUE(keeper->WaitIdle(60s));
  EXPECT_EQ(log.Count({"removed 2 uncommitted files", "local"}), 1u) << log.All();
  EXPECT_EQ(log.Count({"removed 1 uncommitted file ", "remote"}), 1u) << log.All();
  EXPECT_FALSE(AnyTempFile(local_));
  EXPECT_FALSE(AnyTempFile(remote_));
  EXPECT_FALSE(std::filesystem::exists(ckpt::DataPath(local_, job_, {8, 1})));
  EXPECT_EQ(ckpt::ListCommitted(local_, job_), (std::vector<ckpt::CopyId>{{7, 0}}));

  Take(*keeper);
  EXPECT_EQ(Latest(7, 0).copy.tiers, (Tiers{"local"}));
  EXPECT_EQ(latest_.count({8, 0}) + latest_.count({8, 1}), 0u) << "nothing uncommitted reported";
  // Rank 0 shows up on this node: its remote copy is adopted; rank 5's (another node) is not.
  Tick(*keeper, {0});
  Settle(*keeper);
  EXPECT_EQ(Latest(7, 0).copy.tiers, (Tiers{"local", "remote"}));
  EXPECT_EQ(latest_.count({7, 5}), 0u);
}

// The automatic arena pass: while the job runs and its plan names no newer step nothing goes;
// once it finished, an arena whose copy is persisted and not planned/newest is removed (and
// loses its `arena` tier), the planned step's arena and the arena of a rank whose process
// still runs on this node stay.
TEST_F(CkptKeeperTest, ArenaGcRemovesAFinishedJobsPersistedArenaKeepsPlannedAndLiveOnes) {
  std::vector<std::string> asked;  // the paths the holder seam was asked about
  CkptKeeperOptions o;
  o.job = job_;
  o.node = "n1";
  o.arena_dir = arena_dir_;
  o.local_dir = local_;
  o.remote_dir = remote_;
  o.scan_interval_ns = 0;
  // Every FakeArena is written by this test process: no process holds them but the ranks the
  // worker sees alive.
  o.arena_holder = [&](const std::string& path, uint64_t, int) {
    asked.push_back(path);
    return std::string();
  };
  auto keeper = std::make_unique<CkptKeeper>(o);
  FakeArena old(arena_dir_, job_, 0, 8192);
  FakeArena planned(arena_dir_, job_, 1, 8192);
  FakeArena live(arena_dir_, job_, 2, 8192);
  old.Save(10, 1);
  planned.Save(20, 2);
  live.Save(10, 3);
  Tick(*keeper, {0, 1, 2});
  ASSERT_TRUE(keeper->WaitIdle(60s));
  Tick(*keeper, {0, 1, 2});
  ASSERT_EQ(Latest(10, 0).copy.tiers, (Tiers{"arena", "local", "remote"}));

  JobGcFacts running;
  running.known = true;
  running.planned_step = 10;
  keeper->SetGcFacts(running, {2});
  ASSERT_TRUE(keeper->WaitIdle(60s));
  EXPECT_TRUE(std::filesystem::exists(old.path())) << "step 10 is the running job's planned step";

  JobGcFacts finished;
  finished.known = true;
  finished.finished = true;
  finished.planned_step = finished.newest_complete = finished.newest_verified = 20;
  keeper->SetGcFacts(finished, {2});
  ASSERT_TRUE(keeper->WaitIdle(60s));
  EXPECT_FALSE(std::filesystem::exists(old.path())) << "persisted, not planned/newest: removed";
  EXPECT_TRUE(std::filesystem::exists(planned.path())) << "the planned step stays";
  EXPECT_TRUE(std::filesystem::exists(live.path())) << "rank 2's process runs on this node";
  EXPECT_EQ(std::count(asked.begin(), asked.end(), live.path()), 0)
      << "a rank the worker sees alive is kept before anything else is asked";
  Tick(*keeper, {0, 1, 2});
  EXPECT_EQ(Latest(10, 0).copy.tiers, (Tiers{"local", "remote"}));
  EXPECT_EQ(Latest(20, 1).copy.tiers, (Tiers{"arena", "local", "remote"}));

  // Rank 2's process exits: the next pass removes its arena too.
  keeper->SetGcFacts(finished, {});
  ASSERT_TRUE(keeper->WaitIdle(60s));
  EXPECT_FALSE(std::filesystem::exists(live.path()));
  EXPECT_TRUE(std::filesystem::exists(planned.path()));
}

}  // namespace
}  // namespace ft::worker
