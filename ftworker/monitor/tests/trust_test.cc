// The worker trusts no foreign bytes (DESIGN, shm/): a segment is monitored only when its file
// belongs to the expected uid, its header's pid is the one its name encodes, and that pid is
// a process of the same uid; signals go only through the pidfd opened for the process
// verified then. A writer that rewrites the segment while the worker reads it never crashes it.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "ftworker/monitor/node_monitor.h"
#include "ftworker/monitor/tests/test_util.h"
#include "shm/segment.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr int kNobody = 65534;

void Tick(NodeMonitor& m, uint64_t t) {
  std::vector<proto::Event> events;
  m.Tick(t, static_cast<int64_t>(t / kMs), &events);
}

// A child that waits to be killed, as uid `uid` (-1: ours).
pid_t SpawnSleeper(int uid = -1) {
  pid_t pid = fork();
  if (pid == 0) {
    if (uid >= 0 && (setgid(static_cast<gid_t>(uid)) != 0 || setuid(static_cast<uid_t>(uid)) != 0)) _exit(3);
    for (;;) pause();
  }
  return pid;
}

// Whether `pid` (our child) was ended by `signal`; waits for it up to 10 s.
bool EndedBy(pid_t pid, int signal) {
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFSIGNALED(status) && WTERMSIG(status) == signal;
    usleep(10000);
  }
  return false;
}

// A child that maps its own segment of `job` (rank 0) once the parent has created it, as a
// rank's process does: the parent writes a byte to `go` after creating the segment, the child
// answers on `ready` once it has the segment mapped.
struct Mapper {
  pid_t pid = -1;
  int go = -1, ready = -1;
};

Mapper SpawnMapper(const std::string& job) {
  int go[2], ready[2];
  if (pipe(go) != 0 || pipe(ready) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(3);
    std::unique_ptr<shm::Segment> segment;
    if (!shm::Segment::Attach(shm::SegmentName(job, 0, getpid()), &segment).ok()) _exit(4);
    if (write(ready[1], "r", 1) != 1) _exit(5);
    for (;;) pause();
  }
  close(go[0]);
  close(ready[1]);
  return Mapper{pid, go[1], ready[0]};
}

// Lets the mapper map the segment just created and waits until it has.
bool StartMapping(const Mapper& m) {
  char byte;
  return write(m.go, "g", 1) == 1 && read(m.ready, &byte, 1) == 1;
}

bool StillRunning(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == 0;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// A child running as another uid, or a skip reason when this test cannot make one.
std::string CannotChangeUid() {
  if (geteuid() != 0) return "needs root to create files and processes of another uid (running as uid " +
                             std::to_string(geteuid()) + ")";
  return "";
}

TEST(Trust, SegmentOwnedByAnotherUidIsRefused) {
  if (std::string why = CannotChangeUid(); !why.empty()) GTEST_SKIP() << why;
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("owner");
  FakeRank r(job, 0, 3'900'200);
  ASSERT_EQ(chown(("/dev/shm" + r.name()).c_str(), kNobody, kNobody), 0) << strerror(errno);
  NodeMonitor m(MonitorOptions(job, &probe));
  Tick(m, MonoNs());
  EXPECT_TRUE(m.Ranks().empty());
  EXPECT_EQ(logs.Count({"ignored", r.name().substr(1), "belongs to uid 65534"}), 1u) << logs.All();
  EXPECT_EQ(m.StopRank(0, 1).code(), StatusCode::kNotFound);
  EXPECT_TRUE(probe.signals.empty());

  // The uid the worker accepts can be configured (ranks running as another user).
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.segment_uid = kNobody;
  NodeMonitor accepting(o);
  Tick(accepting, MonoNs());
  EXPECT_EQ(accepting.Ranks(), std::vector<int>{0});
}

TEST(Trust, SegmentWritableByOthersIsRefused) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("mode");
  FakeRank r(job, 0, 3'900'201);
  ASSERT_EQ(chmod(("/dev/shm" + r.name()).c_str(), 0666), 0);
  NodeMonitor m(MonitorOptions(job, &probe));
  Tick(m, MonoNs());
  EXPECT_TRUE(m.Ranks().empty());
  EXPECT_EQ(logs.Count({"ignored", r.name().substr(1), "writable by other users"}), 1u) << logs.All();
}

TEST(Trust, HeaderPidNotMatchingTheNameIsRefused) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("pid");
  FakeRank r(job, 0, 3'900'202);
  r.header()->pid = 3'900'203;  // the name says 3900202
  FakeRank other_rank(job, 1, 3'900'204);
  other_rank.header()->global_rank = 5;  // the name says rank 1
  NodeMonitor m(MonitorOptions(job, &probe));
  Tick(m, MonoNs());
  EXPECT_TRUE(m.Ranks().empty());
  EXPECT_EQ(logs.Count({"ignored", r.name().substr(1), "claims rank 0 pid 3900203"}), 1u) << logs.All();
  EXPECT_EQ(logs.Count({"ignored", other_rank.name().substr(1), "claims rank 5"}), 1u) << logs.All();
  EXPECT_EQ(m.StopRank(0, 1).code(), StatusCode::kNotFound);
  EXPECT_TRUE(probe.signals.empty());
  EXPECT_TRUE(probe.verified.empty()) << "no process is looked at for a refused segment";
}

TEST(Trust, ProcessOfAnotherUidIsRefusedAndNeverSignalled) {
  if (std::string why = CannotChangeUid(); !why.empty()) GTEST_SKIP() << why;
  LogCapture logs;
  pid_t victim = SpawnSleeper(kNobody);
  ASSERT_GT(victim, 0);
  // Wait until the child runs as nobody (the claim is checked against /proc).
  bool switched = false;
  for (int i = 0; i < 500 && !switched; ++i) {
    std::ifstream in("/proc/" + std::to_string(victim) + "/status");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    switched = text.find("\nUid:\t65534\t") != std::string::npos;
    if (!switched) usleep(10000);
  }
  ASSERT_TRUE(switched) << "the child did not become uid 65534";
  std::string job = UniqueJob("victim");
  {
    FakeRank r(job, 0, victim);  // a root-owned segment naming another user's process
    NodeMonitor m(MonitorOptions(job, nullptr));  // the real probe: pidfd, /proc
    Tick(m, MonoNs());
    EXPECT_TRUE(m.Ranks().empty());
    EXPECT_EQ(logs.Count({"ignored", r.name().substr(1), "belongs to uid 65534"}), 1u) << logs.All();
    EXPECT_FALSE(m.StopRank(0, 0).ok());
    Tick(m, MonoNs() + 10 * kSec);  // a grace of 0: a SIGKILL would go out now
  }
  EXPECT_TRUE(StillRunning(victim)) << "the worker signalled another user's process";
  Reap(victim);
}

TEST(Trust, StopSignalsTheVerifiedProcessNotWhatTheHeaderSaysLater) {
  std::string job = UniqueJob("pidfd");
  Mapper mapper = SpawnMapper(job);
  pid_t rank_process = mapper.pid;
  pid_t bystander = SpawnSleeper();
  ASSERT_GT(rank_process, 0);
  ASSERT_GT(bystander, 0);
  {
    FakeRank r(job, 0, rank_process);
    ASSERT_TRUE(StartMapping(mapper));
    NodeMonitor m(MonitorOptions(job, nullptr));  // the real probe
    Tick(m, MonoNs());
    ASSERT_EQ(m.Ranks(), std::vector<int>{0});
    // The owner of the segment rewrites the header's pid after it was verified.
    r.header()->pid = bystander;
    ASSERT_TRUE(m.StopRank(0, 60).ok());
  }
  EXPECT_TRUE(EndedBy(rank_process, SIGTERM));
  EXPECT_TRUE(StillRunning(bystander)) << "the worker signalled the pid the header claimed";
  Reap(bystander);
}

// The pid the name and header agree on is a live process of the right uid, but not the one
// that has the segment mapped (the same number in another pid namespace, or a process the
// segment's owner merely names): it is read, never signalled.
TEST(Trust, ProcessWithoutTheSegmentMappedIsNeverSignalled) {
  LogCapture logs;
  pid_t bystander = SpawnSleeper();
  ASSERT_GT(bystander, 0);
  std::string job = UniqueJob("unmapped");
  {
    FakeRank r(job, 0, bystander);
    NodeMonitor m(MonitorOptions(job, nullptr));  // the real probe
    Tick(m, MonoNs());
    ASSERT_EQ(m.Ranks(), std::vector<int>{0});
    Status s = m.StopRank(0, 0);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("does not have the segment mapped"), std::string_view::npos) << s.ToString();
    Tick(m, MonoNs() + 10 * kSec);
  }
  EXPECT_TRUE(StillRunning(bystander)) << "the worker signalled a process that does not map the segment";
  Reap(bystander);
}

TEST(Trust, UnverifiedProcessIsReadButNeverSignalled) {
  FakeProbe probe;
  probe.procs[3'900'205].exists = false;  // gone, or in another pid namespace
  std::string job = UniqueJob("unverified");
  FakeRank r(job, 0, 3'900'205);
  r.header()->heartbeat_ns.store(MonoNs());
  NodeMonitor m(MonitorOptions(job, &probe));
  Tick(m, MonoNs());
  ASSERT_EQ(probe.verified.size(), 1u);
  EXPECT_EQ(probe.verified[0].pid, 3'900'205);
  EXPECT_EQ(probe.verified[0].uid, geteuid());
  // Its heartbeat advances: a process in another pid namespace, monitored by its heartbeat.
  ASSERT_EQ(m.Ranks(), std::vector<int>{0});
  Status s = m.StopRank(0, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not verified"), std::string_view::npos) << s.ToString();
  EXPECT_TRUE(probe.signals.empty());
}

// A writer (the segment's owner, a bug, or a hostile process of the same uid) rewrites random
// bytes of the header, the control page, the comm table and the ring indices while the worker
// reads: nothing may crash or read outside the mapping (run it under FT_SANITIZE too).
TEST(Trust, ReaderSurvivesAWriterMutatingTheSegment) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the foreign writer races the reader by design; ThreadSanitizer would report it";
#endif
  FakeProbe probe;
  std::string job = UniqueJob("mutate");
  const uint64_t t0 = MonoNs();
  FakeRank r(job, 0, 3'900'206);
  r.CommInit(0xabc, 0, 2);
  r.P2PSlot(0xabc, true);
  for (uint64_t s = 1; s <= 40; ++s) r.Collective(0xabc, s, Op(OpKind::kAllReduce), 4096, t0 + s * kMs, 0, kMs / 2);
  NodeMonitor m(MonitorOptions(job, &probe));
  proto::TimeoutTable table;
  table.version = 1;
  table.default_ms = 1;
  m.SetTimeouts(table);
  Tick(m, t0);
  ASSERT_EQ(m.Ranks(), std::vector<int>{0});

  uint8_t* base = reinterpret_cast<uint8_t*>(r.header());
  const uint64_t size = r.seg().size();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    std::mt19937_64 rng(20261124);
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t at;
      switch (rng() % 5) {
        case 0: at = rng() % 128; break;                       // sizes and offsets
        case 1: at = 320 + rng() % (4096 - 320); break;        // live header fields, ring head
        case 2: at = 4096 + rng() % 4096; break;               // control page: tail, mailbox
        case 3: at = 8192 + rng() % (16 * 256); break;         // comm table
        default: at = rng() % size; break;                     // anywhere
      }
      if (at >= 320 && at < 324) at += 4;  // not `state`: an "exited" rank is no longer read
      std::atomic_ref<uint8_t>(base[at]).store(static_cast<uint8_t>(rng()), std::memory_order_relaxed);
      writes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The writer is running before the reader starts.
  for (int i = 0; i < 10000 && writes.load() < 1000; ++i) usleep(1000);
  uint64_t t = t0;
  // Bounded in ticks and (on a loaded machine, where garbage ring heads make ticks long) time.
  const uint64_t budget_end = MonoNs() + 3 * kSec;
  for (int i = 0; i < 300 && (i < 20 || MonoNs() < budget_end); ++i) {
    t += 20 * kMs;
    Tick(m, t);
    (void)m.Progress();
    (void)m.Memberships();
    (void)m.TakeSummaries(static_cast<int64_t>(t / kMs));
    uint64_t seq = 0;
    if (m.PostMessage(0, "hello", &seq).ok()) (void)m.PollAck(0, seq);
  }
  stop = true;
  writer.join();
  EXPECT_GT(writes.load(), 1000u);
}

}  // namespace
}  // namespace ft::worker
