#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "ftworker/monitor/node_monitor.h"
#include "ftworker/monitor/tests/test_util.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

bool FileExists(const std::string& segment_name) {
  return access(("/dev/shm" + segment_name).c_str(), F_OK) == 0;
}

void WriteFile(const std::string& segment_name, const std::string& bytes) {
  std::ofstream out("/dev/shm" + segment_name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadFile(const std::string& segment_name) {
  std::ifstream in("/dev/shm" + segment_name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<proto::Event> Tick(NodeMonitor& m, uint64_t t) {
  std::vector<proto::Event> events;
  m.Tick(t, static_cast<int64_t>(t / kMs), &events);
  return events;
}

// A child that waits to be killed.
pid_t SpawnSleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

TEST(Discovery, LateSegmentIsFound) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("late");
  NodeMonitor m(MonitorOptions(job, &probe));
  uint64_t t = MonoNs();
  EXPECT_TRUE(Tick(m, t).empty());
  EXPECT_TRUE(m.Ranks().empty());
  FakeRank r(job, 3, 3'900'010);
  Tick(m, t + 10 * kMs);
  EXPECT_EQ(m.Ranks(), std::vector<int>{3});
  EXPECT_EQ(logs.Count({"monitoring rank 3", r.name()}), 1u) << logs.All();
  EXPECT_TRUE(m.TakeMembershipChanged());
}

TEST(Discovery, ScanIntervalBoundsListing) {
  FakeProbe probe;
  std::string job = UniqueJob("interval");
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.scan_interval_ns = 500 * kMs;
  NodeMonitor m(o);
  uint64_t t = MonoNs();
  Tick(m, t);
  FakeRank r(job, 0, 3'900'011);
  Tick(m, t + 100 * kMs);
  EXPECT_TRUE(m.Ranks().empty());
  Tick(m, t + 600 * kMs);
  EXPECT_EQ(m.Ranks(), std::vector<int>{0});
}

TEST(Discovery, NewIncarnationOfARank) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("incarnation");
  NodeMonitor m(MonitorOptions(job, &probe));
  uint64_t t = MonoNs();
  FakeRank old_rank(job, 1, 3'900'020);
  Tick(m, t);
  FakeRank new_rank(job, 1, 3'900'021);
  Tick(m, t + 10 * kMs);
  EXPECT_EQ(logs.Count({"rank 1 has a new incarnation: pid 3900021"}), 1u) << logs.All();
  ASSERT_EQ(m.Progress().size(), 1u);
  EXPECT_EQ(m.Progress()[0].pid, 3'900'021);
  EXPECT_EQ(m.Progress()[0].incarnation, new_rank.header()->incarnation);
  // The old process dies: its death is still reported, then it is forgotten.
  probe.procs[3'900'020].exists = false;
  auto events = Tick(m, t + 20 * kMs);
  ASSERT_EQ(CountEvents(events, "exit"), 1u);
  EXPECT_EQ(events[0].progress.pid, 3'900'020);
  EXPECT_FALSE(events[0].clean);
  EXPECT_FALSE(FileExists(old_rank.name())) << "reclaimed";
  ASSERT_EQ(m.Progress().size(), 1u);
  EXPECT_EQ(m.Progress()[0].pid, 3'900'021);
  EXPECT_EQ(m.Progress()[0].state, "running");
  EXPECT_EQ(m.Ranks(), std::vector<int>{1});
}

TEST(Discovery, ReplacedFileUnderTheSameName) {
  FakeProbe probe;
  std::string job = UniqueJob("replaced");
  NodeMonitor m(MonitorOptions(job, &probe));
  uint64_t t = MonoNs();
  uint64_t first_incarnation = 0;
  {
    FakeRank r(job, 2, 3'900'030);
    first_incarnation = r.header()->incarnation;
    Tick(m, t);
  }
  usleep(1000);
  FakeRank again(job, 2, 3'900'030);
  Tick(m, t + 10 * kMs);
  ASSERT_EQ(m.Progress().size(), 1u);
  EXPECT_NE(m.Progress()[0].incarnation, first_incarnation);
  EXPECT_EQ(m.Progress()[0].incarnation, again.header()->incarnation);
}

TEST(Discovery, OtherNodesAndJobsAreSkipped) {
  FakeProbe probe;
  std::string job = UniqueJob("other");
  NodeMonitor m(MonitorOptions(job + "_x", &probe));
  FakeRank other_node(job + "_x", 0, 3'900'040, "n2");
  FakeRank other_job(job + ".x", 1, 3'900'041);  // same file prefix, another job
  FakeRank mine(job + "_x", 2, 3'900'042);
  Tick(m, MonoNs());
  EXPECT_EQ(m.Ranks(), std::vector<int>{2});
}

TEST(Discovery, CorruptAndUnsupportedFilesIgnoredOnceWithMessage) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("corrupt");
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.settle_ns = 1 * kSec;
  NodeMonitor m(o);
  std::string garbage_name = shm::SegmentName(job, 7, 3'900'050);
  WriteFile(garbage_name, std::string(20000, '\x5a'));
  std::string newer_name = shm::SegmentName(job, 8, 3'900'051);
  {
    FakeRank r(job, 9, 3'900'052);
    std::string bytes = ReadFile(r.name());
    uint32_t version = shm::kLayoutVersion + 1;
    std::memcpy(bytes.data() + 8, &version, sizeof(version));
    WriteFile(newer_name, bytes);
  }
  uint64_t t = MonoNs();
  Tick(m, t);
  EXPECT_EQ(logs.Count({"ignored"}), 0u) << "a file being created gets time to settle";
  Tick(m, t + 1100 * kMs);
  Tick(m, t + 1200 * kMs);
  EXPECT_EQ(m.ignored_segments(), 2u);
  EXPECT_TRUE(m.Ranks().empty());
  EXPECT_EQ(logs.Count({"ignored", garbage_name.substr(1), "bad magic", "remove the file"}), 1u) << logs.All();
  const std::string newer = "layout version " + std::to_string(shm::kLayoutVersion + 1);
  const std::string ours = "this reader understands " + std::to_string(shm::kOldestReadableLayoutVersion) +
                           " to " + std::to_string(shm::kLayoutVersion);
  EXPECT_EQ(logs.Count({"ignored", newer_name.substr(1), newer, ours}), 1u)
      << logs.All();
  unlink(("/dev/shm" + garbage_name).c_str());
  unlink(("/dev/shm" + newer_name).c_str());
  Tick(m, t + 1300 * kMs);
  EXPECT_EQ(m.ignored_segments(), 0u);
}

// A process killed while libft.so made its segment leaves a file without a header: empty, or
// reserved and all zeros. Nothing would ever remove it, so the worker does once it settled and
// its process is gone (its name says which); while the process lives, it is only ignored.
TEST(Discovery, ASegmentItsProcessNeverFinishedIsRemovedOnceThatProcessIsGone) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("unfinished");
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.settle_ns = 1 * kSec;
  NodeMonitor m(o);
  const std::string empty = shm::SegmentName(job, 1, 3'900'061);
  const std::string zeros = shm::SegmentName(job, 2, 3'900'062);
  const std::string alive = shm::SegmentName(job, 3, 3'900'063);
  WriteFile(empty, "");
  WriteFile(zeros, std::string(20000, '\0'));
  WriteFile(alive, "");
  probe.procs[3'900'061].exists = false;
  probe.procs[3'900'062].exists = false;
  uint64_t t = MonoNs();
  Tick(m, t);
  EXPECT_TRUE(FileExists(empty) && FileExists(zeros)) << "a file being created gets time to settle";
  Tick(m, t + 1100 * kMs);
  EXPECT_FALSE(FileExists(empty));
  EXPECT_FALSE(FileExists(zeros));
  EXPECT_EQ(logs.Count({"never finished making", "3900061"}), 1u) << logs.All();
  EXPECT_EQ(logs.Count({"never finished making", "3900062"}), 1u) << logs.All();
  EXPECT_TRUE(FileExists(alive)) << "removed while its process lives";
  EXPECT_EQ(m.ignored_segments(), 1u);
  probe.procs[3'900'063].exists = false;  // reaped later
  Tick(m, t + 1300 * kMs);
  EXPECT_FALSE(FileExists(alive));
  EXPECT_EQ(m.ignored_segments(), 0u);
  // A file with a header someone else wrote (bad magic) is only ignored, its process gone or not.
  const std::string garbage = shm::SegmentName(job, 4, 3'900'064);
  WriteFile(garbage, std::string(20000, '\x5a'));
  probe.procs[3'900'064].exists = false;
  Tick(m, t + 1400 * kMs);
  Tick(m, t + 2500 * kMs);
  EXPECT_TRUE(FileExists(garbage));
  EXPECT_EQ(m.ignored_segments(), 1u);
  unlink(("/dev/shm" + garbage).c_str());
  unlink(("/dev/shm" + alive).c_str());
}

TEST(Discovery, KilledProcessIsReportedAtOnceAndReclaimed) {
  LogCapture logs;
  std::string job = UniqueJob("killed");
  NodeMonitor m(MonitorOptions(job, nullptr));  // the real kill(2) and /proc
  pid_t reaped = SpawnSleeper();
  pid_t zombie = SpawnSleeper();
  ASSERT_GT(reaped, 0);
  ASSERT_GT(zombie, 0);
  FakeRank a(job, 0, reaped);
  FakeRank b(job, 1, zombie);
  b.header()->exit_status.store(7);  // written by the process, but no clean exit
  uint64_t t = MonoNs();
  EXPECT_TRUE(Tick(m, t).empty());
  EXPECT_EQ(m.Ranks(), (std::vector<int>{0, 1}));
  kill(reaped, SIGKILL);
  kill(zombie, SIGKILL);
  waitpid(reaped, nullptr, 0);
  // The zombie's parent (us) has not reaped it: /proc says 'Z'. Wait until it is one.
  for (int i = 0; i < 200; ++i) {
    auto stat = SystemProcessProbe()->ReadStat(zombie);
    if (stat && stat->state == 'Z') break;
    usleep(1000);
  }
  auto events = Tick(m, t + 10 * kMs);
  ASSERT_EQ(CountEvents(events, "exit"), 2u);
  const proto::Event* e0 = FindEvent(events, "exit", 0);
  ASSERT_NE(e0, nullptr);
  EXPECT_FALSE(e0->clean);
  EXPECT_EQ(e0->code, 0);
  EXPECT_NE(e0->message.find("killed or crashed; its exit status is unknown to the worker"), std::string::npos);
  EXPECT_EQ(e0->progress.state, "dead");
  EXPECT_TRUE(e0->status_unknown) << "reaped before the worker looked";
  const proto::Event* e1 = FindEvent(events, "exit", 1);
  ASSERT_NE(e1, nullptr);
  EXPECT_EQ(e1->code, -SIGKILL) << "the kernel's word for the zombie, not the 7 its header held";
  EXPECT_FALSE(e1->status_unknown);
  EXPECT_NE(e1->message.find("killed by signal 9"), std::string::npos) << e1->message;
  EXPECT_FALSE(FileExists(a.name()));
  EXPECT_FALSE(FileExists(b.name()));
  EXPECT_TRUE(m.Ranks().empty());
  ASSERT_EQ(m.Progress().size(), 2u);
  EXPECT_EQ(m.Progress()[0].state, "dead");
  EXPECT_TRUE(Tick(m, t + 20 * kMs).empty()) << "reported once";
  waitpid(zombie, nullptr, 0);
}

// A rank SIGKILLed while its worker verifies its new segment: the pidfd opened, then the
// process was reaped before /proc/<pid>/status was read. Its segment is still read (its
// process unverified), its death reported once its heartbeat stops, and the file reclaimed;
// it is not judged a stranger's and left in /dev/shm with the death never said.
TEST(Discovery, ARankKilledWhileItsSegmentIsVerifiedIsStillReportedAndReclaimed) {
  LogCapture logs;
  std::string job = UniqueJob("killedinverify");
  pid_t rank_process = SpawnSleeper();
  ASSERT_GT(rank_process, 0);
  int ended = 0;
  auto probe = NewSystemProcessProbeForTest([&](int pid) {
    if (pid != rank_process) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    ++ended;
  });
  FakeRank r(job, 0, rank_process);
  uint64_t t = MonoNs();
  r.header()->heartbeat_ns.store(t);
  NodeMonitor m(MonitorOptions(job, probe.get()));
  EXPECT_TRUE(Tick(m, t).empty());
  ASSERT_EQ(ended, 1);
  EXPECT_EQ(m.ignored_segments(), 0u) << logs.All();
  ASSERT_EQ(m.Ranks(), std::vector<int>{0}) << logs.All();
  auto events = Tick(m, t + 4500 * kMs);
  ASSERT_EQ(CountEvents(events, "exit"), 1u);
  EXPECT_FALSE(FindEvent(events, "exit", 0)->clean);
  Tick(m, t + 5 * kSec);
  EXPECT_FALSE(FileExists(r.name())) << "reclaimed";
}

TEST(Discovery, CleanExitThenReclaimOnceThePidIsGone) {
  FakeProbe probe;
  std::string job = UniqueJob("clean");
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.retain_ns = 1 * kSec;
  NodeMonitor m(o);
  FakeRank r(job, 0, 3'900'060);
  uint64_t t = MonoNs();
  Tick(m, t);
  r.Exit(0);
  auto events = Tick(m, t + 10 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "exit");
  EXPECT_TRUE(events[0].clean);
  EXPECT_EQ(events[0].code, 0);
  EXPECT_EQ(events[0].progress.state, "exited");
  EXPECT_TRUE(FileExists(r.name())) << "its own process removes it";
  probe.procs[3'900'060].exists = false;
  EXPECT_TRUE(Tick(m, t + 20 * kMs).empty());
  EXPECT_FALSE(FileExists(r.name())) << "left behind by a process that is gone: reclaimed";
  EXPECT_EQ(m.Progress().size(), 1u) << "visible for retain_ns";
  Tick(m, t + 2 * kSec);
  EXPECT_TRUE(m.Progress().empty());
}

// An uncaught exception ends a Python rank through the normal exit path with status 1: a
// failure of the job, never part of its finish — and the segment is still its process's to remove.
TEST(Discovery, AFailingExitStatusIsADeathNotAFinish) {
  FakeProbe probe;
  std::string job = UniqueJob("failing");
  NodeMonitorOptions o = MonitorOptions(job, &probe);
  o.retain_ns = 1 * kSec;
  NodeMonitor m(o);
  FakeRank r(job, 0, 3'900'065);
  uint64_t t = MonoNs();
  Tick(m, t);
  r.Exit(1);
  auto events = Tick(m, t + 10 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "exit");
  EXPECT_FALSE(events[0].clean);
  EXPECT_FALSE(events[0].status_unknown);
  EXPECT_EQ(events[0].code, 1);
  EXPECT_EQ(events[0].progress.state, "dead");
  EXPECT_NE(events[0].message.find("exited with status 1: a failure"), std::string::npos) << events[0].message;
  ASSERT_EQ(m.Progress().size(), 1u);
  EXPECT_EQ(m.Progress()[0].state, "dead");
  EXPECT_TRUE(FileExists(r.name())) << "its process is still in its exit handlers: it removes it";
  probe.procs[3'900'065].exists = false;
  EXPECT_TRUE(Tick(m, t + 20 * kMs).empty()) << "reported once";
  EXPECT_FALSE(FileExists(r.name())) << "left behind by a process that is gone: reclaimed";
}

// A rank that failed before the worker's first listing saw it (an exception in its first
// second): libft.so leaves a failing exit's segment, so the failure is still reported.
TEST(Discovery, AFailingExitSeenOnlyAfterThePidIsGoneIsStillReported) {
  FakeProbe probe;
  std::string job = UniqueJob("failedunseen");
  NodeMonitor m(MonitorOptions(job, &probe));
  FakeRank r(job, 2, 3'900'066);
  r.Exit(1);
  probe.procs[3'900'066].exists = false;
  auto events = Tick(m, MonoNs());
  ASSERT_EQ(CountEvents(events, "exit"), 1u);
  const proto::Event* e = FindEvent(events, "exit", 2);
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->clean);
  EXPECT_EQ(e->code, 1);
  EXPECT_EQ(e->progress.state, "dead");
  EXPECT_FALSE(FileExists(r.name())) << "reclaimed: its process is gone";
}

TEST(Discovery, RecycledPidIsADeath) {
  FakeProbe probe;
  std::string job = UniqueJob("recycled");
  NodeMonitor m(MonitorOptions(job, &probe));
  FakeRank r(job, 0, 3'900'070);
  probe.procs[3'900'070].stat = ProcStat{'S', 1000, 0, std::nullopt};
  uint64_t t = MonoNs();
  EXPECT_TRUE(Tick(m, t).empty());
  probe.procs[3'900'070].stat.start_ticks = 5000;  // another process has the pid now
  auto events = Tick(m, t + 10 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "exit");
  EXPECT_FALSE(events[0].clean);
}

TEST(Discovery, ProcessInAnotherPidNamespaceLivesByItsHeartbeat) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("pidns");
  NodeMonitor m(MonitorOptions(job, &probe));
  FakeRank r(job, 0, 3'900'080);
  probe.procs[3'900'080].exists = false;
  uint64_t t = MonoNs();
  r.header()->heartbeat_ns.store(t - 5 * kMs);
  EXPECT_TRUE(Tick(m, t).empty());
  EXPECT_EQ(m.Progress()[0].state, "running");
  EXPECT_EQ(logs.Count({"another pid namespace"}), 0u) << "not before its heartbeat moved";
  r.header()->heartbeat_ns.store(t + 5 * kMs);
  EXPECT_TRUE(Tick(m, t + 10 * kMs).empty());
  EXPECT_EQ(logs.Count({"another pid namespace"}), 1u);
  r.header()->heartbeat_ns.store(t + 1 * kSec);
  EXPECT_TRUE(Tick(m, t + 2 * kSec).empty());
  auto events = Tick(m, t + 4500 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "exit");
}

}  // namespace
}  // namespace ft::worker
