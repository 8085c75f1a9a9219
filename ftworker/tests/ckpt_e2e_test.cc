// ftworker's checkpoint duties against a real redis-server on loopback: the restore plan file
// follows the master's plan in Redis (step none without one, a garbled plan keeps the old
// file), the node's copies reach ckpt:<step> / ckpt:steps and leave them with retention, and a
// real ftworker process killed while persisting a large arena leaves nothing a restarted one
// reports or lists; a replacement node's worker pulls its ranks' shards from a peer worker.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ftworker/daemon.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/node_plan.h"
#include "jitckpt/restore_loader.h"
#include "jitckpt/tier.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/prefetch_codec.h"
#include "proto/transfer_codec.h"
#include "redis/client.h"
#include "redis/redis_store.h"
#include "redis/tests/redis_test.h"
#include "shm/mailbox.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;
using namespace std::chrono_literals;

constexpr int kFakePid = 3'900'301;  // FakeProbe answers for it

class CkptE2eTest : public redis::testing::RedisClientTest {
 protected:
  std::unique_ptr<Daemon> NewDaemon(NodeMonitor* monitor, int keep = 2) {
    DaemonOptions o;
    o.job = job_;
    o.node = "n1";
    o.host = "host-n1";
    o.endpoint = server_.endpoint();
    o.config = Config::Defaults();
    o.config.ckpt_arena_dir = arena_dir_;
    o.config.ckpt_dir = local_;
    o.config.ckpt_keep = keep;
    return std::make_unique<Daemon>(o, monitor);
  }

  // Ticks the daemon on the real clock until `done` or `timeout`.
  bool TickUntil(Daemon& daemon, const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      daemon.Tick(MonoNs(), UnixMs());
      if (done()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  static int64_t UnixMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }

  std::optional<std::string> Get(const std::vector<std::string>& argv) {
    redis::Reply r;
    Status s = client_.Run(argv, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!r.is_string()) return std::nullopt;
    return r.str();
  }
  std::optional<proto::CkptCopy> Copy(int64_t step, int rank) {
    auto v = Get({"HGET", keys_.CkptStep(step), std::to_string(rank)});
    if (!v) return std::nullopt;
    proto::CkptCopy c;
    Status s = proto::Decode(*v, &c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }
  bool StepListed(int64_t step) {
    return Get({"ZSCORE", keys_.CkptSteps(), std::to_string(step)}).has_value();
  }
  void Set(const std::string& key, const std::string& value) {
    redis::Reply r;
    ASSERT_TRUE(client_.Run({"SET", key, value}, &r).ok());
  }

  std::string job_ = UniqueJob("ce");
  proto::Keys keys_{job_};
  TempDir tmp_{"ckpt-e2e"};
  std::string arena_dir_ = tmp_.Sub("shm");
  std::string local_ = tmp_.Sub("local");
  FakeProbe probe_;
};

// No plan in Redis: a `step none` plan at once (ft_restore of a fresh job does not wait).
// The master publishes one: the file follows, with this worker's tier directories. A plan
// that does not decode is logged once and the file stays as it was; a stopping worker removes it.
TEST_F(CkptE2eTest, PlanFileFollowsTheMastersPlan) {
  LogCapture log;
  NodeMonitor monitor(MonitorOptions(job_, &probe_));
  auto daemon = NewDaemon(&monitor);
  const std::string path = ckpt::NodePlanPath(arena_dir_, job_, "n1");
  ASSERT_TRUE(TickUntil(*daemon, [&] { return daemon->plan_sync().files_written() >= 1; }));
  ckpt::NodePlan plan;
  Status s = ckpt::ReadNodePlan(path, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(plan.step, -1);
  EXPECT_EQ(plan.job, job_);
  EXPECT_EQ(plan.node, "n1");

  proto::RestorePlan published;
  published.version = 3;
  published.step = 12;
  published.unix_ms = UnixMs();
  published.ranks.push_back({1, 0x1111222233334444ull, {{1, "n1", {"arena", "local"}}}});
  published.ranks.push_back({0, 0xaaaabbbbccccddddull,
                             {{0, "n1", {"arena"}}, {2, "n2", {"remote"}}}});
  Set(keys_.Restore(), proto::Encode(published));
  Set(keys_.RestoreVersion(), "3");
  ASSERT_TRUE(TickUntil(*daemon, [&] { return daemon->plan_sync().files_written() >= 2; }));
  s = ckpt::ReadNodePlan(path, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(plan.version, 3);
  EXPECT_EQ(plan.step, 12);
  EXPECT_EQ(plan.arena_dir, arena_dir_);
  EXPECT_EQ(plan.local_dir, local_);
  EXPECT_EQ(plan.remote_dir, "");
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.ranks[0].rank, 0) << "sorted by rank";
  EXPECT_EQ(plan.ranks[0].digest, 0xaaaabbbbccccddddull);
  ASSERT_EQ(plan.ranks[0].sources.size(), 2u);
  EXPECT_EQ(plan.ranks[0].sources[1], (ckpt::PlanSource{2, "n2", {"remote"}}));
  const ckpt::NodePlan good = plan;

  Set(keys_.Restore(), "{\"v\":1,\"version\":4,\"step\":\"garbage");
  Set(keys_.RestoreVersion(), "4");
  ASSERT_TRUE(TickUntil(*daemon, [&] { return log.Count({"restore plan", "unreadable"}) >= 1; }));
  TickUntil(*daemon, [] { return false; }, 2500ms);  // two more polls
  EXPECT_EQ(log.Count({"restore plan", "unreadable"}), 1u) << "logged once";
  EXPECT_EQ(daemon->plan_sync().files_written(), 2);
  s = ckpt::ReadNodePlan(path, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(plan, good) << "the previous plan file is kept";

  // A worker that stops removes its file: ranks started before the next one wait for it.
  std::atomic<bool> stop{true};
  daemon->Run(stop);
  EXPECT_FALSE(std::filesystem::exists(path));
}

// The node's copies reach Redis through the daemon's write path: the rank's field in
// ckpt:<step> and the step in ckpt:steps; with FT_CKPT_KEEP=1 the older step leaves both; a
// Redis that lost its data gets them again.
TEST_F(CkptE2eTest, CopiesAreReportedAndRetentionRemovesThem) {
  FakeRank rank(job_, 0, kFakePid, "n1");
  NodeMonitor monitor(MonitorOptions(job_, &probe_));
  auto daemon = NewDaemon(&monitor, /*keep=*/1);
  FakeArena arena(arena_dir_, job_, 0, 256 << 10, 64 << 10);
  const ckpt::Manifest m5 = arena.Save(5, 0x11);
  ASSERT_TRUE(TickUntil(*daemon, [&] {
    auto c = Copy(5, 0);
    return c && c->tiers == std::vector<std::string>{"arena", "local"} && StepListed(5);
  })) << (Copy(5, 0) ? proto::Encode(*Copy(5, 0)) : "no copy of step 5");
  EXPECT_EQ(Copy(5, 0)->digest, ckpt::ContentDigest(m5));
  EXPECT_EQ(Copy(5, 0)->node, "n1");

  arena.Save(6, 0x22);
  // Step 5 leaves the local tier (FT_CKPT_KEEP=1) but stays in the arena's other slot until
  // the next save: still reported, the arena its only tier.
  ASSERT_TRUE(TickUntil(*daemon, [&] {
    auto c = Copy(6, 0);
    auto c5 = Copy(5, 0);
    return c && c->tiers == std::vector<std::string>{"arena", "local"} && c5 &&
           c5->tiers == std::vector<std::string>{"arena"};
  }));
  arena.Save(7, 0x33);
  ASSERT_TRUE(TickUntil(*daemon, [&] {
    auto c = Copy(6, 0);
    return Copy(7, 0).has_value() && c && c->tiers == std::vector<std::string>{"arena"} && !StepListed(5);
  }));
  EXPECT_FALSE(Copy(5, 0).has_value());
  EXPECT_TRUE(StepListed(6));
  EXPECT_TRUE(StepListed(7));

  // Redis restarts without its data: the worker writes the node's copies again.
  server_.Stop();
  ASSERT_TRUE(server_.Restart().ok());
  ASSERT_TRUE(client_.Connect(server_.endpoint(), 1000ms).ok());
  ASSERT_FALSE(Copy(7, 0).has_value());
  ASSERT_TRUE(TickUntil(*daemon, [&] { return Copy(7, 0).has_value() && StepListed(7); }, 20s));
  EXPECT_EQ(Copy(7, 0)->tiers, (std::vector<std::string>{"arena", "local"}));
}

// A rank acknowledges a save: its copy reaches Redis with the ack, not a scan interval later.
// The daemon's clock is driven here and never reaches the next scan.
TEST_F(CkptE2eTest, CopyOfASaveIsReportedWithItsAck) {
  FakeRank rank(job_, 0, kFakePid, "n1");
  NodeMonitor monitor(MonitorOptions(job_, &probe_));
  auto daemon = NewDaemon(&monitor);
  FakeArena arena(arena_dir_, job_, 0, 64 << 10, 16 << 10);
  uint64_t mono = MonoNs();
  const int64_t unix_ms = UnixMs();
  auto tick = [&](uint64_t advance_ms) {
    mono += advance_ms * kMs;
    daemon->Tick(mono, unix_ms);
  };
  for (int i = 0; i < 20 && !daemon->connected(); ++i) tick(1);  // connected; first scan done
  ASSERT_TRUE(daemon->connected());

  proto::Command save;
  save.id = "inc-7";
  save.kind = "save";
  save.rank = 0;
  save.text = "inc-7";
  redis::Reply r;
  ASSERT_TRUE(client_.Run({"XADD", keys_.Commands("n1"), "*", "kind", "save", "rank", "0", "json",
                           proto::Encode(save)}, &r).ok());
  std::optional<shm::Command> posted;
  for (int i = 0; i < 30 && !posted; ++i) {
    tick(10);  // commands are polled every 100 ms
    posted = shm::TakeCommand(rank.seg());
  }
  ASSERT_TRUE(posted.has_value());
  EXPECT_EQ(posted->type, static_cast<uint32_t>(shm::CommandType::kSave));
  const ckpt::Manifest m = arena.Save(8, 0x42);  // the agent saves, then acknowledges
  shm::AckCommand(rank.seg(), posted->seq, 0,
                  "saved step=8 digest=" + ckpt::DigestHex(ckpt::ContentDigest(m)) + " torn=0");
  tick(10);
  auto copy = Copy(8, 0);
  ASSERT_TRUE(copy.has_value()) << "the copy did not arrive with the ack";
  EXPECT_EQ(copy->digest, ckpt::ContentDigest(m));
  EXPECT_TRUE(StepListed(8));
}

// ---- A real ftworker process killed while it persists ----

class WorkerProcess {
 public:
  WorkerProcess(const std::string& log_path, const std::vector<std::string>& env,
                const std::vector<std::string>& args) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv{const_cast<char*>(FTWORKER_BIN)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(FTWORKER_BIN, argv.data());
      _exit(127);
    }
  }
  ~WorkerProcess() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The temp file a persist is writing, if any.
std::optional<std::filesystem::path> TempFile(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string().find(".tmp.") != std::string::npos) return it->path();
  }
  return std::nullopt;
}

TEST_F(CkptE2eTest, WorkerKilledMidPersistLeavesNothingUncommitted) {
  FakeRank rank(job_, 0, getpid(), "n1");  // this test process plays rank 0 of node n1
  FakeArena arena(arena_dir_, job_, 0, 512ull << 20);
  const ckpt::Manifest m = arena.Save(3, 0x5a);
  const std::vector<std::string> env = {
      "FT_REDIS_PASSWORD=" + server_.password(), "FT_CKPT_ARENA_DIR=" + arena_dir_,
      "FT_CKPT_DIR=" + local_, "FT_LOG_LEVEL=info"};
  const std::vector<std::string> args = {"--job", job_, "--node", "n1", "--redis", server_.url()};
  const std::string log1 = tmp_.path() + "/worker1.log", log2 = tmp_.path() + "/worker2.log";

  std::optional<std::filesystem::path> temp;
  {
    WorkerProcess worker(log1, env, args);
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!(temp = TempFile(local_)) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(temp.has_value()) << "no persist seen; worker log:\n" << ReadFile(log1);
    worker.Kill(SIGKILL);
  }
  ASSERT_TRUE(std::filesystem::exists(*temp)) << "the kill left the temp file " << *temp;
  EXPECT_TRUE(ckpt::ListCommitted(local_, job_).empty());
  auto reported = Copy(3, 0);
  if (reported) {
    EXPECT_EQ(reported->tiers, std::vector<std::string>{"arena"}) << "nothing uncommitted reported";
  }

  WorkerProcess restarted(log2, env, args);
  auto deadline = std::chrono::steady_clock::now() + 120s;
  bool committed = false;
  while (std::chrono::steady_clock::now() < deadline) {
    auto c = Copy(3, 0);
    // Whatever the restarted worker reports in the local tier is committed there.
    if (c && c->tiers == std::vector<std::string>{"arena", "local"}) {
      EXPECT_EQ(ckpt::ListCommitted(local_, job_), (std::vector<ckpt::CopyId>{{3, 0}}));
      committed = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(committed) << "worker log:\n" << ReadFile(log2);
  EXPECT_FALSE(std::filesystem::exists(*temp)) << "the killed worker's temp file was removed";
  const std::string log = ReadFile(log2);
  EXPECT_NE(log.find("uncommitted file"), std::string::npos) << log;
  EXPECT_NE(log.find("removed "), std::string::npos) << log;
  ckpt::Manifest back;
  ASSERT_TRUE(ckpt::ReadManifest(local_, job_, {3, 0}, &back).ok());
  std::vector<uint8_t> data(back.data_bytes);
  Status s = ckpt::ReadData(local_, job_, back, data.data(), data.size());
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ckpt::ContentDigest(back), ckpt::ContentDigest(m));
}

// ---- A replacement node's worker pulls from a peer node's worker ----

// Two real ftworker processes: node0's serves the arenas of its ranks 0 and 1 (recorded on
// node0 in ft:{J}:ranks); node2 replaces the evicted node1 and is told it will run ranks 4-5
// (--ranks). Each node has its own arena directory. The test plays the master (secret, plan).
// node2's worker withholds its plan file, pulls both shards over TCP, then writes the file
// with the prefetched copies first; ft_restore's loader then restores rank 4 from it.
TEST_F(CkptE2eTest, AReplacementNodesWorkerPullsItsRanksShardsFromAPeerWorker) {
  const std::string node0_dir = tmp_.Sub("node0"), node2_dir = tmp_.Sub("node2");
  FakeArena rank0(node0_dir, job_, 0, (6u << 20) + 300);
  FakeArena rank1(node0_dir, job_, 1, (6u << 20) + 300);
  const ckpt::Manifest m0 = rank0.Save(30, 0x10);
  const ckpt::Manifest m1 = rank1.Save(30, 0x11);
  for (int rank : {0, 1}) {
    proto::Membership m;
    m.rank = rank;
    m.node = "node0";
    m.state = "exited";
    redis::Reply r;
    ASSERT_TRUE(client_.Run({"HSET", keys_.Ranks(), std::to_string(rank), proto::Encode(m)}, &r).ok());
  }
  Set(keys_.TransferSecret(), std::string(64, '7'));
  redis::Reply r;
  ASSERT_TRUE(client_.Run({"SADD", keys_.Evicted(), "node1"}, &r).ok());

  const std::vector<std::string> common = {"FT_REDIS_PASSWORD=" + server_.password(), "FT_LISTEN=127.0.0.1",
                                           "FT_LOG_LEVEL=info"};
  std::vector<std::string> env0 = common, env2 = common;
  env0.push_back("FT_CKPT_ARENA_DIR=" + node0_dir);
  env2.push_back("FT_CKPT_ARENA_DIR=" + node2_dir);
  const std::string log0 = tmp_.path() + "/node0.log", log2 = tmp_.path() + "/node2.log";
  WorkerProcess node0(log0, env0, {"--job", job_, "--node", "node0", "--redis", server_.url()});
  auto deadline = std::chrono::steady_clock::now() + 30s;
  // node0 serves once its keeper found both arenas (they are reported as copies then).
  while (!(Get({"HGET", keys_.Endpoints(), "node0"}) && Copy(30, 0) && Copy(30, 1)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(Get({"HGET", keys_.Endpoints(), "node0"}).has_value()) << ReadFile(log0);

  proto::RestorePlan plan;
  plan.version = 1;
  plan.step = 30;
  plan.ranks.push_back({4, ckpt::ContentDigest(m0), {{0, "node0", {"arena"}}, {4, "node1", {"arena"}}}});
  plan.ranks.push_back({5, ckpt::ContentDigest(m1), {{1, "node0", {"arena"}}}});
  Set(keys_.Restore(), proto::Encode(plan));
  Set(keys_.RestoreVersion(), "1");

  const std::string plan_path = ckpt::NodePlanPath(node2_dir, job_, "node2");
  WorkerProcess node2(log2, env2, {"--job", job_, "--node", "node2", "--ranks", "4-5", "--redis", server_.url()});
  ckpt::NodePlan file;
  deadline = std::chrono::steady_clock::now() + 30s;
  while (!ckpt::ReadNodePlan(plan_path, &file).ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(file.step, 30) << ReadFile(log2);
  // The first plan file node2 ever wrote already names the prefetched copies: it was withheld
  // until the pulls ended.
  ASSERT_NE(file.Find(4), nullptr);
  EXPECT_EQ(file.Find(4)->sources.front(), (ckpt::PlanSource{4, "node2", {"prefetched"}})) << ReadFile(log2);
  EXPECT_EQ(file.Find(5)->sources.front(), (ckpt::PlanSource{5, "node2", {"prefetched"}}));

  std::optional<std::string> report;
  deadline = std::chrono::steady_clock::now() + 10s;
  proto::PrefetchReport decoded;
  while (std::chrono::steady_clock::now() < deadline) {
    report = Get({"HGET", keys_.Prefetch(), "node2"});
    if (report && proto::Decode(*report, &decoded).ok() && decoded.state == proto::PrefetchState::kDone) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(decoded.state, proto::PrefetchState::kDone) << ReadFile(log2);
  ASSERT_EQ(decoded.ranks.size(), 2u);
  for (const proto::PrefetchRank& rank : decoded.ranks) {
    EXPECT_EQ(rank.outcome, proto::PrefetchOutcome::kPulled) << rank.error;
    EXPECT_EQ(rank.source, "node0");
    EXPECT_EQ(rank.transport, "tcp");
    EXPECT_EQ(rank.bytes, m0.data_bytes);
  }
  EXPECT_GT(decoded.pull_s, 0);
  const std::string log = ReadFile(log2);
  EXPECT_NE(log.find("withheld from this node's ranks"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 4: prefetched step 30"), std::string::npos) << log;

  // ft_restore's host half on node2, rank 4: from the prefetched copy, verified.
  std::vector<ckpt::BufferEntry> layout = m0.buffers;
  ckpt::Arena own;
  ASSERT_TRUE(ckpt::Arena::OpenForWrite(node2_dir, job_, 4,
                                        ckpt::ManifestCapacity(layout, m0.data_bytes, m0.chunk_bytes),
                                        m0.data_bytes, 2, &own)
                  .ok());
  ckpt::RestoreResult restored;
  Status s = ckpt::LoadForRestore(file, 4, "node2", layout, &own, &restored);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(restored.source_kind, ckpt::SourceKind::kPrefetched) << restored.source;
  ckpt::Manifest own_copy;
  uint64_t own_generation = 0;
  ASSERT_TRUE(own.ReadCommitted(&own_copy, &own_generation).ok());
  EXPECT_EQ(std::vector<uint8_t>(own.data(own_generation), own.data(own_generation) + m0.data_bytes),
            std::vector<uint8_t>(m0.data_bytes, 0x10));

  // Its own arena holds the step now: the worker removes the prefetched copy.
  deadline = std::chrono::steady_clock::now() + 10s;
  while (std::filesystem::exists(ckpt::Arena::PrefetchPathFor(node2_dir, job_, 4)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(std::filesystem::exists(ckpt::Arena::PrefetchPathFor(node2_dir, job_, 4))) << ReadFile(log2);
  EXPECT_TRUE(std::filesystem::exists(ckpt::Arena::PrefetchPathFor(node2_dir, job_, 5)));
}

}  // namespace
}  // namespace ft::worker
