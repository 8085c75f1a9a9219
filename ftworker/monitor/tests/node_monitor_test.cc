#include "ftworker/monitor/node_monitor.h"

#include <signal.h>

#include <cstring>

#include <gtest/gtest.h>

#include "ftworker/monitor/op_names.h"
#include "ftworker/monitor/tests/test_util.h"
#include "shm/mailbox.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr uint64_t kComm = 0xc011ec7100000001ull;
constexpr uint64_t kDp = 0xd000000000000002ull;
constexpr int kPid0 = 3'900'001;  // fake pids: FakeProbe answers for them
constexpr int kPid1 = 3'900'002;

NodeMonitorOptions Options(const std::string& job, ProcessProbe* probe) {
  NodeMonitorOptions o = MonitorOptions(job, probe);
  o.settings.timeout_warmup_ns = 3 * kSec;
  o.settings.restore_wait_ns = 2 * kSec;  // below the warmup: the warmup bounds the first op
  return o;
}

proto::TimeoutTable Table(double default_ms, std::vector<proto::TimeoutEntry> entries = {}) {
  proto::TimeoutTable t;
  t.version = 1;
  t.default_ms = default_ms;
  t.entries = std::move(entries);
  return t;
}

class NodeMonitorTest : public ::testing::Test {
 protected:
  NodeMonitorTest() : job_(UniqueJob("nm")), monitor_(Options(job_, &probe_)) {}

  std::vector<proto::Event> TickAt(uint64_t t) {
    std::vector<proto::Event> events;
    monitor_.Tick(t, static_cast<int64_t>(1'700'000'000'000 + t / kMs), &events);
    return events;
  }

  const proto::RankProgress* ProgressOf(int rank) {
    progress_ = monitor_.Progress();
    for (const auto& p : progress_) {
      if (p.rank == rank) return &p;
    }
    return nullptr;
  }

  std::string job_;
  FakeProbe probe_;
  NodeMonitor monitor_;
  std::vector<proto::RankProgress> progress_;
  const uint64_t t0_ = MonoNs();
};

TEST_F(NodeMonitorTest, ProgressRowsAndMembership) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 1, 4);
  r.CommInit(kDp, 0, 2);
  r.P2PSlot(kComm, /*set_flag=*/false);  // an older libft.so: recognised by its id
  r.P2PSlot(kDp, /*set_flag=*/true);
  r.Collective(kComm, 1, Op(OpKind::kAllReduce), 1 << 20, t0_, kMs, kMs);
  r.Enter(kComm, 2, Op(OpKind::kAllGather), 4096, t0_ + 10 * kMs);
  r.header()->last_call_ns.store(t0_ + 10 * kMs);
  auto events = TickAt(t0_ + 110 * kMs);
  EXPECT_TRUE(events.empty());
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->pid, kPid0);
  EXPECT_EQ(p->node, "n1");
  EXPECT_EQ(p->state, "running");
  EXPECT_NEAR(p->last_call_age_ms, 100, 1e-6);
  EXPECT_TRUE(p->busy);  // a call 100 ms ago
  ASSERT_EQ(p->comms.size(), 4u);
  const proto::CommRow& row = p->comms[0];
  EXPECT_EQ(row.comm_id, kComm);
  EXPECT_FALSE(row.p2p);
  EXPECT_EQ(row.comm_rank, 1);
  EXPECT_EQ(row.comm_size, 4);
  EXPECT_EQ(row.op, proto::OpKind::kAllGather);
  EXPECT_EQ(row.entered_seq, 2u);
  EXPECT_EQ(row.started_seq, 1u);
  EXPECT_EQ(row.completed_seq, 1u);
  EXPECT_NEAR(row.entered_age_ms, 100, 1e-6);
  EXPECT_NEAR(row.completed_age_ms, 108, 1e-6);
  EXPECT_EQ(p->comms[2].comm_id, kComm);
  EXPECT_TRUE(p->comms[2].p2p);
  EXPECT_EQ(p->comms[3].comm_id, kDp);
  EXPECT_TRUE(p->comms[3].p2p);
  EXPECT_EQ(p->comms[3].entered_age_ms, -1);

  EXPECT_TRUE(monitor_.TakeMembershipChanged());
  EXPECT_FALSE(monitor_.TakeMembershipChanged());
  auto members = monitor_.Memberships();
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].host, "host-n1");
  EXPECT_EQ(members[0].world_size, 8);
  ASSERT_EQ(members[0].comms.size(), 2u);
  for (const auto& c : members[0].comms) EXPECT_TRUE(c.p2p) << CommHex(c.comm_id);
  EXPECT_EQ(monitor_.Ranks(), std::vector<int>{0});
}

// A worker started right after a rank died finds its segment with a fresh heartbeat and no pid:
// not a process in another pid namespace (its heartbeat stands still). What it shows in flight
// is never a timeout (a restarted worker's false incident stopped a relaunch in the campaign),
// and it is a death within a second.
TEST_F(NodeMonitorTest, ARankThatDiedJustBeforeTheWorkerStartedIsADeathNotATimeout) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  r.Enter(kComm, 2, Op(OpKind::kAllReduce), 4096, t0_ - 2000 * kMs);
  r.Start(kComm, 2, Op(OpKind::kAllReduce), t0_ - 2000 * kMs);
  r.header()->heartbeat_ns.store(t0_ - 5 * kMs);
  probe_.procs[kPid0].exists = false;
  monitor_.SetTimeouts(Table(100));
  std::vector<proto::Event> events = TickAt(t0_);
  for (const proto::Event& e : TickAt(t0_ + 500 * kMs)) events.push_back(e);
  for (const proto::Event& e : events) EXPECT_NE(e.kind, "timeout") << e.message;
  events = TickAt(t0_ + 1100 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "exit");
  EXPECT_FALSE(events[0].clean);
  // It ended at its last heartbeat, not when this worker noticed: the master tells a relaunch
  // (started after the end) from a teardown under way by that time.
  EXPECT_NEAR(static_cast<double>(events[0].unix_ms),
              static_cast<double>(1'700'000'000'000 + static_cast<int64_t>((t0_ - 5 * kMs) / kMs)), 1.0);
  ASSERT_EQ(monitor_.Memberships().size(), 1u);
  EXPECT_EQ(monitor_.Memberships()[0].unix_ms, events[0].unix_ms);
}

TEST_F(NodeMonitorTest, TimeoutWhenTheGpuWaitsOnPeersOncePerSeq) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  monitor_.SetTimeouts(Table(1000));
  r.Collective(kComm, 1, Op(OpKind::kAllReduce), 4096, t0_, kMs, kMs);
  r.Enter(kComm, 2, Op(OpKind::kAllReduce), 4096, t0_ + 10 * kMs);
  r.Start(kComm, 2, Op(OpKind::kAllReduce), t0_ + 20 * kMs);
  EXPECT_TRUE(TickAt(t0_ + 900 * kMs).empty());
  auto events = TickAt(t0_ + 1100 * kMs);
  ASSERT_EQ(events.size(), 1u);
  const proto::Event& e = events[0];
  EXPECT_EQ(e.kind, "timeout");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.comm_id, kComm);
  EXPECT_EQ(e.op, proto::OpKind::kAllReduce);
  EXPECT_EQ(e.seq, 2u);
  EXPECT_TRUE(e.started);
  EXPECT_NEAR(e.age_ms, 1080, 1e-6);
  EXPECT_EQ(e.timeout_ms, 1000);
  EXPECT_EQ(e.progress.rank, 0);
  ASSERT_EQ(e.progress.comms.size(), 1u);
  EXPECT_EQ(e.progress.comms[0].started_seq, 2u);
  EXPECT_NE(e.message.find("waits on peers"), std::string::npos) << e.message;
  EXPECT_TRUE(TickAt(t0_ + 5000 * kMs).empty()) << "one event per (comm, seq)";
  // It completes; the next op gets stuck too: a new event.
  r.End(kComm, 2, Op(OpKind::kAllReduce), t0_ + 20 * kMs, t0_ + 5100 * kMs);
  r.Enter(kComm, 3, Op(OpKind::kAllReduce), 4096, t0_ + 5200 * kMs);
  r.Start(kComm, 3, Op(OpKind::kAllReduce), t0_ + 5200 * kMs);
  EXPECT_TRUE(TickAt(t0_ + 5300 * kMs).empty());
  events = TickAt(t0_ + 6300 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq, 3u);
}

// A worker upgraded mid-job reads the ranks still running the older libft.so: a segment of
// layout version 1 (shm/layout_v1.h; no record version, reserved bytes where version 2 keeps its
// hook-failure counters) is adopted, its progress read and its stuck collective timed out.
TEST_F(NodeMonitorTest, ASegmentOfLayoutVersion1IsMonitoredLikeANewOne) {
  LogCapture logs;
  FakeRank r(job_, 0, kPid0);
  shm::SegmentHeader* h = r.header();
  h->layout_version = 1;
  h->record_version = 0;
  std::memset(reinterpret_cast<uint8_t*>(h) + 1024, 0x5a, 512);  // whatever version 1 left there
  r.CommInit(kComm, 0, 2);
  monitor_.SetTimeouts(Table(1000));
  r.Collective(kComm, 1, Op(OpKind::kAllReduce), 4096, t0_, kMs, kMs);
  r.Enter(kComm, 2, Op(OpKind::kAllReduce), 4096, t0_ + 10 * kMs);
  r.Start(kComm, 2, Op(OpKind::kAllReduce), t0_ + 20 * kMs);
  EXPECT_TRUE(TickAt(t0_ + 900 * kMs).empty());
  EXPECT_EQ(monitor_.Ranks(), std::vector<int>{0}) << logs.All();
  EXPECT_EQ(logs.Count({"ignored"}), 0u) << logs.All();
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->state, "running");
  ASSERT_EQ(p->comms.size(), 1u);
  EXPECT_EQ(p->comms[0].started_seq, 2u);
  auto events = TickAt(t0_ + 1100 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "timeout");
  EXPECT_EQ(events[0].seq, 2u);
}

TEST_F(NodeMonitorTest, OpEnteredButNotStartedRaisesNothing) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  monitor_.SetTimeouts(Table(1000));
  r.Collective(kComm, 1, Op(OpKind::kAllReduce), 4096, t0_, kMs, kMs);
  r.Enter(kComm, 2, Op(OpKind::kAllReduce), 4096, t0_ + 10 * kMs);
  EXPECT_TRUE(TickAt(t0_ + 100 * kSec).empty()) << "the stuck rank itself stays silent";
}

TEST_F(NodeMonitorTest, TimeoutTableEntriesDefaultAndWarmup) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  r.CommInit(kDp, 0, 2);
  const uint64_t big = 8 << 20;  // bucket 2
  r.Enter(kComm, 1, Op(OpKind::kAllReduce), big, t0_);
  r.Start(kComm, 1, Op(OpKind::kAllReduce), t0_);
  r.Enter(kDp, 1, Op(OpKind::kBroadcast), 16, t0_);
  r.Start(kDp, 1, Op(OpKind::kBroadcast), t0_);
  // No table yet: FT_TIMEOUT_WARMUP (3 s here).
  EXPECT_TRUE(TickAt(t0_ + 2 * kSec).empty());
  EXPECT_EQ(TickAt(t0_ + 3100 * kMs).size(), 2u);

  FakeRank r1(job_, 1, kPid1);
  r1.CommInit(kComm, 1, 2);
  r1.CommInit(kDp, 1, 2);
  const uint64_t t1 = t0_ + 10 * kSec;
  // Each communicator's first op done: the table's timeouts apply from the second.
  r1.Collective(kComm, 1, Op(OpKind::kAllReduce), big, t1 - 10 * kMs, kMs, kMs);
  r1.Collective(kDp, 1, Op(OpKind::kBroadcast), 16, t1 - 10 * kMs, kMs, kMs);
  r1.Enter(kComm, 2, Op(OpKind::kAllReduce), big, t1);
  r1.Start(kComm, 2, Op(OpKind::kAllReduce), t1);
  r1.Enter(kDp, 2, Op(OpKind::kBroadcast), 16, t1);
  r1.Start(kDp, 2, Op(OpKind::kBroadcast), t1);
  monitor_.SetTimeouts(Table(1000, {{kComm, proto::OpKind::kAllReduce, 2, 5000}, {kComm, proto::OpKind::kAllReduce, 1, 10}}));
  auto events = TickAt(t1 + 2 * kSec);
  ASSERT_EQ(events.size(), 1u) << "the broadcast uses default_ms, the allreduce its entry";
  EXPECT_EQ(events[0].comm_id, kDp);
  EXPECT_EQ(events[0].op, proto::OpKind::kBroadcast);
  EXPECT_EQ(events[0].timeout_ms, 1000);
  events = TickAt(t1 + 5100 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].comm_id, kComm);
  EXPECT_EQ(events[0].timeout_ms, 5000);
}

// The first op of a communicator is where the ranks of a relaunch meet after each one's
// restore: a node whose plan settled later brings its ranks seconds after the others. It is
// given FT_TIMEOUT_WARMUP (3 s here) even where the table says 1 s; the second op the table's.
TEST_F(NodeMonitorTest, TheFirstOpOfACommunicatorWaitsAtLeastTheWarmup) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  monitor_.SetTimeouts(Table(1000));
  r.Enter(kComm, 1, Op(OpKind::kReduceScatter), 4096, t0_);
  r.Start(kComm, 1, Op(OpKind::kReduceScatter), t0_);
  EXPECT_TRUE(TickAt(t0_ + 2 * kSec).empty()) << "a relaunch's first collective, peers still restoring";
  auto events = TickAt(t0_ + 3100 * kMs);
  ASSERT_EQ(events.size(), 1u) << "past the warmup it is a hang like any other";
  EXPECT_EQ(events[0].seq, 1u);
  EXPECT_EQ(events[0].timeout_ms, 3000);
  r.End(kComm, 1, Op(OpKind::kReduceScatter), t0_, t0_ + 3200 * kMs);
  r.Enter(kComm, 2, Op(OpKind::kReduceScatter), 4096, t0_ + 4 * kSec);
  r.Start(kComm, 2, Op(OpKind::kReduceScatter), t0_ + 4 * kSec);
  events = TickAt(t0_ + 5100 * kMs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq, 2u);
  EXPECT_EQ(events[0].timeout_ms, 1000);
}

// ft_restore waits up to FT_RESTORE_WAIT for its node's plan file (a Redis failover at
// start-up held one node's for 2.4 s): a warm-up shorter than that must not name the ranks of
// the other node, which reached the first op on time, hung. The first op waits the longer of
// the two; the second the table's.
TEST(NodeMonitorFirstOpTest, TheFirstOpWaitsAtLeastTheRestoreWait) {
  FakeProbe probe;
  NodeMonitorOptions o = Options(UniqueJob("nmrw"), &probe);
  o.settings.timeout_warmup_ns = 2 * kSec;
  o.settings.restore_wait_ns = 5 * kSec;
  NodeMonitor monitor(o);
  auto tick = [&](uint64_t at) {
    std::vector<proto::Event> events;
    monitor.Tick(at, static_cast<int64_t>(1'700'000'000'000 + at / kMs), &events);
    return events;
  };
  const uint64_t t0 = MonoNs();
  FakeRank r(o.job, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  uint32_t slot = r.P2PSlot(kComm, true);
  shm::CommTableWriter table(r.seg());
  table.EnterOp(slot, 1, Op(OpKind::kSend), 4096, 1, t0);
  table.Started(slot, 1, t0);
  EXPECT_TRUE(tick(t0 + 4 * kSec).empty()) << "the peer may still wait for its node's plan";
  auto raised = tick(t0 + 5100 * kMs);
  ASSERT_EQ(raised.size(), 1u) << "past the restore wait it is a hang like any other";
  EXPECT_EQ(raised[0].timeout_ms, 5000);
  table.Completed(slot, 1, t0 + 5200 * kMs, 5200 * kMs);
  table.EnterOp(slot, 2, Op(OpKind::kSend), 4096, 1, t0 + 6 * kSec);
  table.Started(slot, 2, t0 + 6 * kSec);
  EXPECT_TRUE(tick(t0 + 7 * kSec).empty());
  raised = tick(t0 + 8100 * kMs);
  ASSERT_EQ(raised.size(), 1u) << "the second op has the warm-up";
  EXPECT_EQ(raised[0].seq, 2u);
  EXPECT_EQ(raised[0].timeout_ms, 2000);
}

TEST_F(NodeMonitorTest, P2PTimeoutUsesItsCommunicator) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  uint32_t slot = r.P2PSlot(kComm, true);
  monitor_.SetTimeouts(Table(1000));
  shm::CommTableWriter table(r.seg());
  table.EnterOp(slot, 1, Op(OpKind::kSend), 4096, 1, t0_ - 20 * kMs);  // the first, done
  table.Started(slot, 1, t0_ - 20 * kMs);
  table.Completed(slot, 1, t0_ - 10 * kMs, 10 * kMs);
  table.EnterOp(slot, 2, Op(OpKind::kSend), 4096, 1, t0_);
  table.Started(slot, 2, t0_);
  auto events = TickAt(t0_ + 2 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].comm_id, kComm);
  EXPECT_EQ(events[0].op, proto::OpKind::kSend);
  EXPECT_NE(events[0].message.find("(p2p)"), std::string::npos);
}

TEST_F(NodeMonitorTest, ErrorRecordsBecomeEventsWithNames) {
  FakeRank r(job_, 0, kPid0);
  r.Error(2, shm::ApiSymbolId("ncclAllReduce"), 5);  // ncclInvalidUsage
  r.Error(1, shm::ApiSymbolId("__cudaLaunchKernel"), 719);
  r.Error(2, shm::ApiSymbolId("ncclAllReduce"), 5);  // again within 10 s: counted, not sent
  auto events = TickAt(t0_);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "error");
  EXPECT_EQ(events[0].api, "nccl");
  EXPECT_EQ(events[0].call, "ncclAllReduce");
  EXPECT_EQ(events[0].code, 5);
  EXPECT_EQ(events[0].progress.rank, 0);
  EXPECT_EQ(events[1].api, "cudart");
  EXPECT_EQ(events[1].call, "__cudaLaunchKernel");
  EXPECT_EQ(events[1].code, 719);
  r.Error(2, shm::ApiSymbolId("ncclAllReduce"), 5);
  auto later = TickAt(t0_ + 11 * kSec);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_NE(later[0].message.find("1 more"), std::string::npos) << later[0].message;
}

// A libft.so of record version 1 (the header's record_version reads 0) put the symbol's index
// in its own .def list into the record: no reader can tell which symbol that was, so it says
// so instead of naming whatever sits at that index in its own list.
TEST_F(NodeMonitorTest, ErrorRecordsOfAnOlderRecordVersionAreNotMisnamed) {
  FakeRank r(job_, 0, kPid0);
  r.header()->record_version = 0;
  r.Error(2, 0, 5);
  auto events = TickAt(t0_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].api, "nccl");
  EXPECT_EQ(events[0].call, "#0 (symbol index of an older libft.so)");
  EXPECT_NE(events[0].message.find("#0 (symbol index"), std::string::npos) << events[0].message;
}

TEST_F(NodeMonitorTest, BusyRankThatOthersWaitOn) {
  FakeRank waiter(job_, 0, kPid0);
  FakeRank other(job_, 1, kPid1);
  waiter.CommInit(kComm, 0, 2);
  other.CommInit(kComm, 1, 2);
  monitor_.SetTimeouts(Table(1000));
  for (uint64_t s = 1; s <= 6; ++s) {
    waiter.Collective(kComm, s, Op(OpKind::kAllReduce), 4096, t0_ + s * kMs, 0, kMs);
    other.Collective(kComm, s, Op(OpKind::kAllReduce), 4096, t0_ + s * kMs, 0, kMs);
  }
  waiter.Enter(kComm, 7, Op(OpKind::kAllReduce), 4096, t0_ + 10 * kMs);
  waiter.Start(kComm, 7, Op(OpKind::kAllReduce), t0_ + 10 * kMs);
  // Rank 1 has not entered #7 and made no call for a long time: not busy, no event.
  other.header()->last_call_ns.store(t0_);
  auto events = TickAt(t0_ + 2 * kSec);
  EXPECT_EQ(CountEvents(events, "timeout"), 1u);
  EXPECT_EQ(CountEvents(events, "busy"), 0u);
  // Now it is busy with host work (calls): one busy event, once.
  other.header()->last_call_ns.store(t0_ + 2500 * kMs);
  events = TickAt(t0_ + 3 * kSec);
  ASSERT_EQ(CountEvents(events, "busy"), 1u);
  const proto::Event* busy = FindEvent(events, "busy");
  EXPECT_EQ(busy->rank, 1);
  EXPECT_EQ(busy->comm_id, kComm);
  EXPECT_EQ(busy->seq, 7u);
  EXPECT_TRUE(busy->progress.busy);
  EXPECT_EQ(busy->progress.rank, 1);
  other.header()->last_call_ns.store(t0_ + 3200 * kMs);
  EXPECT_EQ(CountEvents(TickAt(t0_ + 3300 * kMs), "busy"), 0u) << "once per episode";
}

TEST_F(NodeMonitorTest, BusyFromCpuUnlessBlocked) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0].stat = ProcStat{'R', 1000, 0, std::nullopt};
  for (int i = 0; i <= 10; ++i) {
    probe_.procs[kPid0].stat.cpu_ticks = static_cast<uint64_t>(i) * 5;  // 50 ticks/s of 100
    TickAt(t0_ + static_cast<uint64_t>(i) * 100 * kMs);
  }
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_NEAR(p->cpu_pct, 50, 0.5);
  EXPECT_TRUE(p->busy);
  EXPECT_EQ(p->last_call_age_ms, -1);
  r.header()->blocked_since_ns.store(t0_ + 500 * kMs);
  probe_.procs[kPid0].stat.cpu_ticks += 5;
  TickAt(t0_ + 1100 * kMs);
  p = ProgressOf(0);
  EXPECT_NEAR(p->blocked_ms, 600, 1e-6);
  EXPECT_FALSE(p->busy) << "CPU spent inside a synchronizing call is waiting, not working";
}

TEST_F(NodeMonitorTest, StopRankTermThenKillAfterGrace) {
  FakeRank r(job_, 4, kPid0);
  TickAt(t0_);
  EXPECT_EQ(monitor_.StopRank(9, 1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(monitor_.StopRank(4, 0.5).ok());
  ASSERT_EQ(probe_.signals.size(), 1u);
  EXPECT_EQ(probe_.signals[0], std::make_pair(kPid0, SIGTERM));
  TickAt(t0_ + 400 * kMs);
  EXPECT_EQ(probe_.signals.size(), 1u);
  TickAt(t0_ + 600 * kMs);
  ASSERT_EQ(probe_.signals.size(), 2u);
  EXPECT_EQ(probe_.signals[1], std::make_pair(kPid0, SIGKILL));
  TickAt(t0_ + 700 * kMs);
  EXPECT_EQ(probe_.signals.size(), 2u);
}

// A rank that armed a termination save (its segment says for how long) is given that grace
// and 5 s more before SIGKILL, whatever shorter grace the stop carries: the stop never cuts
// the save it asked for (ftmaster's stop sends 10 s, FT_CKPT_TERM_GRACE's default).
TEST_F(NodeMonitorTest, StopWaitsForTheRanksTerminationSaveBeforeSigkill) {
  FakeRank r(job_, 4, kPid0);
  r.header()->term_grace_ms.store(10000);
  TickAt(t0_);
  ASSERT_TRUE(monitor_.StopRank(4, 10).ok());
  TickAt(t0_ + 11000 * kMs);
  EXPECT_EQ(probe_.signals.size(), 1u) << "SIGKILL at the save's grace: it would cut the save";
  TickAt(t0_ + 14900 * kMs);
  EXPECT_EQ(probe_.signals.size(), 1u);
  TickAt(t0_ + 15100 * kMs);
  ASSERT_EQ(probe_.signals.size(), 2u);
  EXPECT_EQ(probe_.signals[1], std::make_pair(kPid0, SIGKILL));
}

TEST_F(NodeMonitorTest, RankGoneAfterAStopIsStoppedNotDead) {
  FakeRank stopped(job_, 4, kPid0);
  FakeRank crashed(job_, 5, kPid0 + 1);
  TickAt(t0_);
  ASSERT_TRUE(monitor_.StopRank(4, 0.5).ok());
  probe_.procs[kPid0].exists = false;      // died of the SIGTERM
  probe_.procs[kPid0 + 1].exists = false;  // died on its own
  auto events = TickAt(t0_ + 100 * kMs);
  const proto::Event* e4 = FindEvent(events, "exit", 4);
  const proto::Event* e5 = FindEvent(events, "exit", 5);
  ASSERT_NE(e4, nullptr);
  ASSERT_NE(e5, nullptr);
  EXPECT_FALSE(e4->clean);
  EXPECT_NE(e4->message.find("stopped by this worker"), std::string::npos) << e4->message;
  EXPECT_EQ(e5->message.find("stopped"), std::string::npos) << e5->message;
  EXPECT_EQ(ProgressOf(4)->state, "stopped");
  EXPECT_EQ(ProgressOf(5)->state, "dead");
}

TEST_F(NodeMonitorTest, StoppedRankThatExitsIsNotKilled) {
  FakeRank r(job_, 4, kPid0);
  TickAt(t0_);
  ASSERT_TRUE(monitor_.StopRank(4, 0.5).ok());
  r.Exit(0);
  TickAt(t0_ + 100 * kMs);
  TickAt(t0_ + 600 * kMs);
  EXPECT_EQ(probe_.signals.size(), 1u);
}

TEST_F(NodeMonitorTest, MailboxMessageAndAck) {
  FakeRank r(job_, 2, kPid0);
  TickAt(t0_);
  uint64_t seq = 0;
  ASSERT_TRUE(monitor_.PostMessage(2, "hello rank", &seq).ok());
  EXPECT_FALSE(monitor_.PollAck(2, seq));
  auto command = shm::TakeCommand(r.seg());
  ASSERT_TRUE(command);
  EXPECT_EQ(command->type, static_cast<uint32_t>(MailboxCommand::kMessage));
  EXPECT_STREQ(reinterpret_cast<const char*>(command->payload), "hello rank");
  shm::AckCommand(r.seg(), command->seq, static_cast<int32_t>(StatusCode::kUnsupported), "not supported");
  auto ack = monitor_.PollAck(2, seq);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kUnsupported));
  EXPECT_EQ(ack->message, "not supported");
  EXPECT_EQ(monitor_.PostMessage(2, std::string(200, 'x'), &seq).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(monitor_.PostMessage(3, "x", &seq).code(), StatusCode::kNotFound);
}

TEST_F(NodeMonitorTest, SummariesOfDurations) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  for (uint64_t s = 1; s <= 100; ++s) {
    r.Collective(kComm, s, Op(OpKind::kAllReduce), 4096, t0_ + s * 10 * kMs, kMs, s * kMs / 10);
  }
  TickAt(t0_ + 2 * kSec);
  auto summaries = monitor_.TakeSummaries(123);
  ASSERT_EQ(summaries.size(), 1u);
  const proto::RankSummary& s = summaries[0];
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.unix_ms, 123);
  EXPECT_EQ(s.records, 301u);
  ASSERT_EQ(s.ops.size(), 1u);
  const proto::OpSummary& o = s.ops[0];
  EXPECT_EQ(o.comm_id, kComm);
  EXPECT_EQ(o.op, proto::OpKind::kAllReduce);
  EXPECT_EQ(o.bucket, 0);
  EXPECT_EQ(o.count, 100u);
  EXPECT_NEAR(o.p10_ms, 1.0, 1e-9);  // the op's undisturbed time (the link's, straggler.h)
  EXPECT_NEAR(o.p50_ms, 5.0, 1e-9);
  EXPECT_NEAR(o.p99_ms, 9.9, 1e-9);
  EXPECT_NEAR(o.max_ms, 10.0, 1e-9);
  EXPECT_EQ(o.last_seq, 100u);
  EXPECT_TRUE(monitor_.TakeSummaries(124)[0].ops.empty()) << "a new window";
}

// What the job says of its steps reaches its summaries from the header, as it stands at each
// summary: nothing said, then the steps in all (FT_TOTAL_STEPS, ft_set_total_steps) and the
// last step done.
TEST_F(NodeMonitorTest, SummariesCarryTheStepsTheJobSaysItRuns) {
  FakeRank r(job_, 0, kPid0);
  TickAt(t0_);
  proto::RankSummary s = monitor_.TakeSummaries(1)[0];
  EXPECT_EQ(s.declared_step, -1);
  EXPECT_EQ(s.total_steps, 0);
  r.header()->total_steps.store(1000);
  r.header()->app_step_plus1.store(151);  // ft_step_done(150)
  TickAt(t0_ + 10 * kMs);
  s = monitor_.TakeSummaries(2)[0];
  EXPECT_EQ(s.declared_step, 150);
  EXPECT_EQ(s.total_steps, 1000);
  r.header()->app_step_plus1.store(152);
  TickAt(t0_ + 20 * kMs);
  EXPECT_EQ(monitor_.TakeSummaries(3)[0].declared_step, 151);
}

// A rank driven through its segment: a tp allreduce per layer and a dp allreduce per step.
// A rank working on an oversubscribed host (a first step compiling while the node's cores
// are shared) gets little CPU, but its main thread waits on a run queue: busy, not idle.
TEST_F(NodeMonitorTest, BusyWhenStarvedOfCpuButRunnable) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0].stat = ProcStat{'R', 1000, 0, std::nullopt};
  probe_.procs[kPid0].run_delay_ns = 0;
  for (int i = 0; i <= 10; ++i) {
    probe_.procs[kPid0].stat.cpu_ticks = static_cast<uint64_t>(i) * 2;        // 20% CPU
    probe_.procs[kPid0].run_delay_ns = static_cast<uint64_t>(i) * 70 * kMs;  // 70% waiting for one
    TickAt(t0_ + static_cast<uint64_t>(i) * 100 * kMs);
  }
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_NEAR(p->cpu_pct, 20, 0.5);
  EXPECT_TRUE(p->busy);
  // Idle: sleeping, neither running nor waiting to.
  for (int i = 11; i <= 25; ++i) TickAt(t0_ + static_cast<uint64_t>(i) * 100 * kMs);
  p = ProgressOf(0);
  EXPECT_NEAR(p->cpu_pct, 0, 0.5);
  EXPECT_FALSE(p->busy);
}

TEST_F(NodeMonitorTest, StepsFromRecordsAndSlowdown) {
  FakeRank r(job_, 0, kPid0, "n1", {4096, 16});
  r.CommInit(kComm, 0, 2);
  r.CommInit(kDp, 0, 2);
  uint64_t t = t0_;
  uint64_t tp_seq = 0, dp_seq = 0;
  std::vector<proto::Event> events;
  auto step = [&](uint64_t step_ns) {
    for (int l = 0; l < 6; ++l) {
      r.Collective(kComm, ++tp_seq, Op(OpKind::kAllReduce), 4096, t + l * step_ns / 8, 0, step_ns / 40);
    }
    r.Collective(kDp, ++dp_seq, Op(OpKind::kAllReduce), 64 << 20, t + 7 * step_ns / 8, 0, step_ns / 20);
    t += step_ns;
    monitor_.Tick(t, 0, &events);
  };
  for (int i = 0; i < 60; ++i) step(100 * kMs);
  EXPECT_EQ(CountEvents(events, "slowdown"), 0u);
  auto summary = monitor_.TakeSummaries(0)[0];
  EXPECT_GE(summary.steps, 40u);
  EXPECT_NEAR(summary.step_p50_ms, 100, 0.01);
  EXPECT_NEAR(summary.comm_wait_ms, 6 * 2.5 + 5, 0.01);
  EXPECT_NEAR(summary.compute_ms, 100 - 20, 0.01);
  EXPECT_EQ(summary.slowdown, 0);
  for (int i = 0; i < 20; ++i) step(150 * kMs);
  ASSERT_EQ(CountEvents(events, "slowdown"), 1u);
  // The summaries say the slowdown stands until the rank is back near its baseline: one event
  // per episode, the verdict in every window.
  EXPECT_EQ(monitor_.TakeSummaries(0)[0].slowdown, 1);
  for (int i = 0; i < 20; ++i) step(100 * kMs);
  EXPECT_EQ(monitor_.TakeSummaries(0)[0].slowdown, 0);
  EXPECT_EQ(CountEvents(events, "slowdown"), 1u);
  const proto::Event* e = FindEvent(events, "slowdown");
  // Raised once three of the last five steps are slow: the medians of that window, over the
  // threshold (baseline + 25%) and at most the slow steps' values.
  EXPECT_GT(e->step_ms, 125);
  EXPECT_LE(e->step_ms, 150.01);
  EXPECT_NEAR(e->baseline_ms, 100, 0.01);
  EXPECT_GT(e->compute_ms, 100);
  EXPECT_LE(e->compute_ms, 120.01);
  EXPECT_EQ(e->progress.rank, 0);
}

// A message-size sweep (nccl-tests style) on one communicator: per size, 40 allreduces
// enqueued back to back, then a synchronize. Large sizes are issued one at a time (the host
// waits for each). No slowdown may come of it; a real slowdown afterwards still does.
TEST_F(NodeMonitorTest, MessageSizeSweepRaisesNoSlowdown) {
  FakeRank r(job_, 0, kPid0, "n1", {8192, 16});
  r.CommInit(kComm, 0, 2);
  uint64_t t = t0_;
  uint64_t seq = 0;
  std::vector<proto::Event> events;
  auto gpu_ns = [](uint64_t bytes) { return 20'000 + bytes / 5;  /* 20 us + 5 GB/s */ };
  for (uint64_t bytes = 8; bytes <= (uint64_t{1} << 30); bytes *= 2) {
    const bool queued = bytes < (uint64_t{1} << 20);
    uint64_t gpu = t;
    for (int i = 0; i < 40; ++i) {
      const uint64_t enter = queued ? t + static_cast<uint64_t>(i) * 10'000 : gpu;
      const uint64_t start = std::max(gpu, enter);
      r.Collective(kComm, ++seq, Op(OpKind::kAllReduce), bytes, enter, start - enter, gpu_ns(bytes));
      gpu = start + gpu_ns(bytes);
    }
    t = gpu + kMs;
    monitor_.Tick(t, 0, &events);
  }
  EXPECT_EQ(CountEvents(events, "slowdown"), 0u) << (events.empty() ? "" : events[0].message);
  // The same sweep's last size, then the same op slowed by half: one slowdown.
  const uint64_t bytes = uint64_t{1} << 30;
  for (int i = 0; i < 80; ++i) {
    const uint64_t d = gpu_ns(bytes) * (i < 40 ? 2 : 3) / 2;
    r.Collective(kComm, ++seq, Op(OpKind::kAllReduce), bytes, t, 0, d);
    t += d;
    if (i % 8 == 7) monitor_.Tick(t, 0, &events);
  }
  EXPECT_EQ(CountEvents(events, "slowdown"), 1u);
}

TEST_F(NodeMonitorTest, StoppedOrSilentProcessIsFrozen) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0] = FakeProbe::Proc{};  // /proc readable: state S
  r.CommInit(kComm, 0, 2);
  uint64_t now = t0_ + 10 * kSec;
  r.header()->heartbeat_ns.store(now - 100 * kMs);
  TickAt(now);
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->frozen);
  EXPECT_EQ(p->proc_state, "S");
  EXPECT_NEAR(p->heartbeat_age_ms, 100, 1e-6);
  // SIGSTOP: the kernel says T at once, before the heartbeat has aged.
  probe_.procs[kPid0].stat.state = 'T';
  r.header()->last_call_ns.store(now);  // a call just now: would be busy, but cannot run
  TickAt(now + 10 * kMs);
  p = ProgressOf(0);
  EXPECT_TRUE(p->frozen);
  EXPECT_FALSE(p->busy);
  EXPECT_EQ(p->proc_state, "T");
  // Resumed (SIGCONT), beating again.
  probe_.procs[kPid0].stat.state = 'R';
  r.header()->heartbeat_ns.store(now + 20 * kMs);
  TickAt(now + 30 * kMs);
  EXPECT_FALSE(ProgressOf(0)->frozen);
  // Running by the kernel's account, but the poller has not beaten for longer than
  // frozen_after (3 s): a process stuck where the poller cannot run either.
  probe_.procs[kPid0].stat.state = 'D';
  TickAt(now + 3100 * kMs);
  p = ProgressOf(0);
  EXPECT_TRUE(p->frozen);
  EXPECT_NEAR(p->heartbeat_age_ms, 3080, 1e-6);
  EXPECT_EQ(p->proc_state, "D");
}

size_t CountKind(const std::vector<proto::Event>& events, const std::string& kind) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                           [&](const proto::Event& e) { return e.kind == kind; }));
}

// SIGSTOP: frozen at once in the progress table (the master must not read its table as a
// wait), a "frozen" event once it has been stopped for frozen_after (3 s here): a frozen rank
// is an incident on its own, whether or not a peer waits on it. One event per episode.
TEST_F(NodeMonitorTest, StoppedPastFrozenAfterRaisesOneFrozenEvent) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0] = FakeProbe::Proc{};
  uint64_t now = t0_ + 10 * kSec;
  r.header()->heartbeat_ns.store(now);
  EXPECT_EQ(CountKind(TickAt(now), "frozen"), 0u);
  probe_.procs[kPid0].stat.state = 'T';  // stopped just after its last beat
  std::vector<proto::Event> events;
  for (uint64_t t = now + 100 * kMs; t < now + 2900 * kMs; t += 100 * kMs) {
    auto e = TickAt(t);
    events.insert(events.end(), e.begin(), e.end());
  }
  EXPECT_EQ(CountKind(events, "frozen"), 0u) << "stopped 2.9 s: not yet";
  EXPECT_TRUE(ProgressOf(0)->frozen);
  events = TickAt(now + 3050 * kMs);
  ASSERT_EQ(CountKind(events, "frozen"), 1u);
  const proto::Event& e = events[0];
  EXPECT_EQ(e.rank, 0);
  EXPECT_GE(e.age_ms, 3000);
  EXPECT_TRUE(e.progress.frozen);
  EXPECT_EQ(e.progress.proc_state, "T");
  EXPECT_NE(e.message.find("stopped (state T"), std::string::npos) << e.message;
  EXPECT_EQ(CountKind(TickAt(now + 5 * kSec), "frozen"), 0u) << "once per episode";
  // SIGCONT, beating again; stopped again later: a new episode.
  probe_.procs[kPid0].stat.state = 'S';
  r.header()->heartbeat_ns.store(now + 6 * kSec);
  EXPECT_EQ(CountKind(TickAt(now + 6 * kSec + kMs), "frozen"), 0u);
  EXPECT_FALSE(ProgressOf(0)->frozen);
  probe_.procs[kPid0].stat.state = 'T';
  EXPECT_EQ(CountKind(TickAt(now + 7 * kSec), "frozen"), 0u);
  EXPECT_EQ(CountKind(TickAt(now + 9100 * kMs), "frozen"), 1u);
}

// Running by the kernel's account but its poller silent past frozen_after (a process stuck
// where libft.so's thread cannot run either): frozen, and an event.
TEST_F(NodeMonitorTest, SilentHeartbeatPastFrozenAfterRaisesAFrozenEvent) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0] = FakeProbe::Proc{};
  probe_.procs[kPid0].stat.state = 'D';
  uint64_t now = t0_ + 10 * kSec;
  r.header()->heartbeat_ns.store(now - 2900 * kMs);
  EXPECT_EQ(CountKind(TickAt(now), "frozen"), 0u);
  auto events = TickAt(now + 200 * kMs);
  ASSERT_EQ(CountKind(events, "frozen"), 1u);
  EXPECT_NE(events[0].message.find("state D"), std::string::npos) << events[0].message;
}

// A healthy rank in a long host phase (evaluation on the CPU, a data loader, a checkpoint being
// written: no CUDA/NCCL call for a minute, 100% CPU): its poller keeps beating, so it is busy,
// never frozen.
TEST_F(NodeMonitorTest, LongHostPauseWithABeatingPollerIsNeverFrozen) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0] = FakeProbe::Proc{};
  probe_.procs[kPid0].stat.state = 'R';
  uint64_t now = t0_ + 10 * kSec;
  r.header()->last_call_ns.store(now);
  std::vector<proto::Event> events;
  for (uint64_t t = now; t < now + 60 * kSec; t += 250 * kMs) {
    r.header()->heartbeat_ns.store(t - 40 * kMs);  // a poller 40 ms late on a loaded host
    probe_.procs[kPid0].stat.cpu_ticks += 25;       // one core busy (100 ticks/s)
    auto e = TickAt(t);
    events.insert(events.end(), e.begin(), e.end());
    ASSERT_FALSE(ProgressOf(0)->frozen) << "at " << (t - now) / kMs << " ms";
  }
  EXPECT_EQ(CountKind(events, "frozen"), 0u);
  EXPECT_TRUE(ProgressOf(0)->busy);
}

// A process told to terminate (the segment's terminate_signal, written by libft.so's handler)
// may stop beating while it saves and ends: its death will say what happened, no frozen event.
TEST_F(NodeMonitorTest, TerminatingProcessRaisesNoFrozenEvent) {
  FakeRank r(job_, 0, kPid0);
  probe_.procs[kPid0] = FakeProbe::Proc{};
  uint64_t now = t0_ + 10 * kSec;
  r.header()->heartbeat_ns.store(now - 10 * kSec);
  r.header()->terminate_signal.store(SIGTERM);
  EXPECT_EQ(CountKind(TickAt(now), "frozen"), 0u);
}

// A death after a terminate signal is a teardown: the exit event says which signal and when.
TEST_F(NodeMonitorTest, ExitAfterATerminateSignalSaysSo) {
  FakeRank dies(job_, 0, kPid0);
  FakeRank exits(job_, 1, kPid1);
  probe_.procs[kPid0] = FakeProbe::Proc{};
  probe_.procs[kPid1] = FakeProbe::Proc{};
  TickAt(t0_);
  for (FakeRank* r : {&dies, &exits}) {
    r->header()->terminate_signal.store(SIGTERM);
    r->header()->terminate_unix_ns.store(1'763'800'000'123'000'000ull);
  }
  probe_.procs[kPid0].exists = false;  // the signal's default action, or re-raised after a save
  exits.Exit(0);                        // the app's handler called exit(0)
  auto events = TickAt(t0_ + 10 * kMs);
  ASSERT_EQ(CountKind(events, "exit"), 2u);
  for (const proto::Event& e : events) {
    EXPECT_EQ(e.terminated_by_signal, SIGTERM) << e.rank;
    EXPECT_EQ(e.terminate_unix_ms, 1'763'800'000'123) << e.rank;
    EXPECT_NE(e.message.find("teardown"), std::string::npos) << e.message;
    if (e.rank == 0) {
      EXPECT_FALSE(e.clean);
      EXPECT_EQ(e.code, -SIGTERM);
    } else {
      EXPECT_TRUE(e.clean);
      EXPECT_EQ(e.code, 0);
    }
  }
  // Without one: a crash, as before.
  FakeRank crashes(job_, 2, kPid0 + 7);
  probe_.procs[kPid0 + 7] = FakeProbe::Proc{};
  TickAt(t0_ + 20 * kMs);
  probe_.procs[kPid0 + 7].exists = false;
  events = TickAt(t0_ + 30 * kMs);
  ASSERT_EQ(CountKind(events, "exit"), 1u);
  EXPECT_EQ(events[0].terminated_by_signal, 0);
  EXPECT_FALSE(events[0].clean);
}

TEST_F(NodeMonitorTest, NoHeartbeatYetIsNotFrozen) {
  FakeRank r(job_, 0, kPid0);
  TickAt(t0_ + 60 * kSec);
  const proto::RankProgress* p = ProgressOf(0);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->frozen) << "a poller that never started says nothing";
  EXPECT_EQ(p->heartbeat_age_ms, -1);
}

TEST_F(NodeMonitorTest, DisabledRankHasNoTimeouts) {
  FakeRank r(job_, 0, kPid0);
  r.CommInit(kComm, 0, 2);
  monitor_.SetTimeouts(Table(1000));
  r.Enter(kComm, 1, Op(OpKind::kAllReduce), 4096, t0_);
  r.Start(kComm, 1, Op(OpKind::kAllReduce), t0_);
  r.header()->state.store(static_cast<uint32_t>(shm::ProcessState::kDisabled));
  EXPECT_TRUE(TickAt(t0_ + 10 * kSec).empty()) << "its table is no longer updated";
  EXPECT_EQ(ProgressOf(0)->state, "disabled");
  EXPECT_EQ(monitor_.Ranks(), std::vector<int>{0}) << "still a process: commands reach it";
}

TEST_F(NodeMonitorTest, DroppedRecordsAreCounted) {
  FakeRank r(job_, 0, kPid0, "n1", {64, 16});
  for (int i = 0; i < 100; ++i) r.Push(RecordType::kKernelName, 0, 0xffffffff, 0, 0, t0_);
  TickAt(t0_);
  auto s = monitor_.TakeSummaries(0)[0];
  EXPECT_EQ(s.records, 64u);
  EXPECT_EQ(s.dropped, 36u);
}

}  // namespace
}  // namespace ft::worker
