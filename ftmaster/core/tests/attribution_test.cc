#include "ftmaster/core/attribution.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

AttributionInput Input(const Job& job, const std::vector<proto::Event>& events = {}) {
  AttributionInput in;
  in.progress = job.progress;
  in.membership = job.membership;
  in.events = events;
  in.now_unix_ms = Job::kNow;
  in.stale_ms = 3000;
  in.min_wait_ms = 1000;
  return in;
}

proto::Event Timeout(int rank, uint64_t comm, uint64_t seq, int64_t at = Job::kNow - 800) {
  proto::Event e;
  e.kind = "timeout";
  e.rank = rank;
  e.unix_ms = at;
  e.comm_id = comm;
  e.op = proto::OpKind::kAllReduce;
  e.seq = seq;
  e.age_ms = 4000;
  e.timeout_ms = 4000;
  e.started = true;
  return e;
}

const proto::Incident* Find(const std::vector<proto::Incident>& incidents, const std::string& kind) {
  for (const proto::Incident& i : incidents) {
    if (i.kind == kind) return &i;
  }
  return nullptr;
}

std::string Dump(const std::vector<proto::Incident>& incidents) {
  std::string s;
  for (const proto::Incident& i : incidents) {
    s += i.id + " " + i.kind + " conf " + std::to_string(i.confidence) + ": " + i.message + "\n";
    for (const proto::Suspect& x : i.suspects) s += "  suspect " + std::to_string(x.rank) + "@" + x.node + ": " + x.why + "\n";
    for (const std::string& e : i.evidence) s += "  evidence " + e + "\n";
  }
  return s;
}

// dp=4 data-parallel job; every rank but `root` reached allreduce #11 on the GPU and waits.
Job DpJobWaitingOn(int root) {
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 4; ++r) {
    if (r != root) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5000);
  }
  return job;
}

TEST(AttributionTest, ComputeHangRootEnteredButGpuNeverStarted) {
  Job job = DpJobWaitingOn(2);
  job.Set(2, job.DpComm(0, 0), 11, 10, 10, 5200);  // host entered #11, GPU still before it
  std::vector<proto::Event> events = {Timeout(0, job.DpComm(0, 0), 11)};
  auto incidents = Attribute(Input(job, events));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  const proto::Incident& i = incidents[0];
  EXPECT_EQ(i.kind, "hang");
  ASSERT_EQ(i.suspects.size(), 1u);
  EXPECT_EQ(i.suspects[0].rank, 2);
  EXPECT_EQ(i.suspects[0].node, "n1");
  EXPECT_NE(i.suspects[0].why.find("compute hang"), std::string::npos) << i.suspects[0].why;
  EXPECT_NE(i.suspects[0].why.find("3 ranks wait on it directly"), std::string::npos) << i.suspects[0].why;
  EXPECT_DOUBLE_EQ(i.confidence, 0.9);
  EXPECT_EQ(i.decision, "");
  EXPECT_EQ(i.first_event_unix_ms, Job::kNow - 800);
  EXPECT_DOUBLE_EQ(i.decide_ms, 800);
  EXPECT_EQ(i.id, std::to_string(Job::kNow - 800) + "-hang");
  bool wait_line = false;
  for (const std::string& e : i.evidence) {
    if (e.find("waits on allreduce #11 of comm 7200000000000000 (GPU started 5.1 s ago)") !=
        std::string::npos) wait_line = true;
  }
  EXPECT_TRUE(wait_line) << Dump(incidents);
}

TEST(AttributionTest, HostHangRootNeverEntered) {
  Job job = DpJobWaitingOn(2);  // rank 2 idle at #10 on the host and GPU
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "hang");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("host hang: never entered allreduce #11"),
            std::string::npos) << incidents[0].suspects[0].why;
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.85);
}

TEST(AttributionTest, DeadRankIsACrash) {
  Job job = DpJobWaitingOn(2);
  job.Progress(2).state = "dead";
  job.Progress(2).pid = 31002;  // named, for its core dump and its node's log lines
  job.Set(2, job.DpComm(0, 0), 11, 11, 10);  // died inside the collective: still the root
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("process 31002 dead"), std::string::npos)
      << incidents[0].suspects[0].why;
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.95);
}

TEST(AttributionTest, ExitEventMakesACrashEvenWithARunningReport) {
  Job job = DpJobWaitingOn(1);
  proto::Event exit;
  exit.kind = "exit";
  exit.rank = 1;
  exit.node = "n0";
  exit.unix_ms = Job::kNow - 900;
  exit.code = -9;
  exit.progress.pid = 4242;
  auto incidents = Attribute(Input(job, {exit}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  EXPECT_NE(incidents[0].suspects[0].why.find("process 4242 killed by signal 9 (SIGKILL)"), std::string::npos)
      << incidents[0].suspects[0].why;
}

// The end of a job: rank 1 finished allreduce #11 and exited through its normal path; the
// others' tables, taken a moment earlier, still show #11 in flight. Nothing is stuck.
proto::Event CleanExit(Job& job, int rank, int64_t at) {
  job.Progress(rank).state = "exited";
  job.Progress(rank).observed_unix_ms = at;
  job.membership[static_cast<size_t>(rank)].state = "exited";
  proto::Event e;
  e.kind = "exit";
  e.rank = rank;
  e.node = job.Progress(rank).node;
  e.unix_ms = at;
  e.code = 0;
  e.clean = true;
  e.progress = job.Progress(rank);
  return e;
}

TEST(AttributionTest, CleanExitAfterCompletingTheCollectiveIsNoCrash) {
  Job job = DpJobWaitingOn(1);
  job.Set(1, job.DpComm(0, 0), 11, 11, 11, 5000);
  auto incidents = Attribute(Input(job, {CleanExit(job, 1, Job::kNow - 50)}));
  EXPECT_TRUE(incidents.empty()) << Dump(incidents);
}

TEST(AttributionTest, CleanExitBeforeTheCollectiveIsACrash) {
  Job job = DpJobWaitingOn(1);  // rank 1 returned after #10: the others wait in #11 for good
  auto incidents = Attribute(Input(job, {CleanExit(job, 1, Job::kNow - 50)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  EXPECT_NE(incidents[0].suspects[0].why.find("exited cleanly (status 0)"), std::string::npos)
      << incidents[0].suspects[0].why;
}

// Stage 1 waits to receive from stage 0, which exited cleanly with no p2p op in flight.
Job RecvFromExitedStage(int64_t waiter_observed, proto::Event* exit) {
  Job job(1, 1, 2);
  const uint64_t pp = job.PpComm(0, 0);
  job.Set(1, pp, 21, 21, 20, 3000, proto::OpKind::kRecv, 0);
  job.Set(0, pp, 21, 21, 21, 3000, proto::OpKind::kSend, 1);
  job.Progress(1).observed_unix_ms = waiter_observed;
  *exit = CleanExit(job, 0, Job::kNow - 2500);
  return job;
}

TEST(AttributionTest, P2pTableTakenBeforeThePeersCleanExitIsNoCrash) {
  proto::Event exit;
  Job job = RecvFromExitedStage(Job::kNow - 2600, &exit);
  auto incidents = Attribute(Input(job, {exit}));
  EXPECT_TRUE(incidents.empty()) << Dump(incidents);
}

TEST(AttributionTest, P2pStillWaitingAfterThePeersCleanExitIsACrash) {
  proto::Event exit;
  Job job = RecvFromExitedStage(Job::kNow - 100, &exit);  // 2.4 s after the exit, still waiting
  auto incidents = Attribute(Input(job, {exit}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  EXPECT_EQ(incidents[0].suspects[0].rank, 0);
}

// pp=4 pipeline with p2p rows: stage 2 stopped (its GPU never reached its send to stage 3);
// stage 3 waits to receive from it, stage 1 waits to send to it, stage 0 waits on stage 1.
TEST(AttributionTest, HangPropagatesDownAPipeline) {
  Job job(1, 1, 4);
  const uint64_t pp = job.PpComm(0, 0);
  job.Set(0, pp, 21, 21, 20, 3000, proto::OpKind::kSend, 1);
  job.Set(1, pp, 21, 21, 20, 4000, proto::OpKind::kSend, 2);
  job.Set(2, pp, 21, 20, 20, 4500, proto::OpKind::kSend, 3);
  job.Set(3, pp, 21, 21, 20, 4600, proto::OpKind::kRecv, 2);
  auto incidents = Attribute(Input(job, {Timeout(3, pp, 21)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "hang");
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("compute hang"), std::string::npos);
  EXPECT_NE(incidents[0].suspects[0].why.find("2 ranks wait on it directly, 3 in all"),
            std::string::npos) << incidents[0].suspects[0].why;
}

TEST(AttributionTest, PipelineHostHangAtTheFirstStage) {
  Job job(1, 1, 4);
  const uint64_t pp = job.PpComm(0, 0);
  // Stage 0 never sent (host stuck in the data loader); 1 waits to receive from 0, 2 from 1...
  job.Set(1, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 0);
  job.Set(2, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 1);
  job.Set(3, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 2);
  auto incidents = Attribute(Input(job, {Timeout(3, pp, 21)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 0);
  EXPECT_NE(incidents[0].suspects[0].why.find(
                "host hang: never entered the p2p op matching rank 1 (n0)'s p2p recv from rank 0"),
            std::string::npos) << incidents[0].suspects[0].why;
}

TEST(AttributionTest, TransportHangAllStartedNoneCompleted) {
  Job job(1, 4, 1, 2);  // two nodes
  for (int r = 0; r < 4; ++r) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5000);
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  const proto::Incident& i = incidents[0];
  EXPECT_EQ(i.kind, "transport-hang");
  EXPECT_EQ(i.comm_id, job.DpComm(0, 0));
  EXPECT_EQ(i.suspects.size(), 4u);
  EXPECT_DOUBLE_EQ(i.confidence, 0.7);
  EXPECT_NE(i.message.find("spanning 2 nodes"), std::string::npos) << i.message;
  EXPECT_EQ(i.id, std::to_string(Job::kNow - 800) + "-transport-hang-7200000000000000");
}

// Frozen processes (issue: a SIGSTOPped rank was reported as a transport hang of its comm).

void Freeze(Job& job, int rank, const char* proc_state = "T", double heartbeat_age_ms = 6000) {
  job.Progress(rank).frozen = true;
  job.Progress(rank).proc_state = proc_state;
  job.Progress(rank).heartbeat_age_ms = heartbeat_age_ms;
}

TEST(AttributionTest, FrozenMemberInsideTheCollectiveIsHostFrozenNotATransportHang) {
  // Every member's GPU reached #11 and none completed it, but rank 2's process is stopped:
  // its GPU work cannot finish, the others wait on it.
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 4; ++r) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5000);
  Freeze(job, 2);
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  const proto::Incident& i = incidents[0];
  EXPECT_EQ(i.kind, "host-frozen");
  ASSERT_EQ(i.suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(i.suspects[0].rank, 2);
  EXPECT_EQ(i.suspects[0].node, "n1");
  EXPECT_NE(i.suspects[0].why.find("host frozen: its process is stopped (state T"), std::string::npos)
      << i.suspects[0].why;
  EXPECT_NE(i.suspects[0].why.find("heartbeat silent for 6.0 s"), std::string::npos) << i.suspects[0].why;
  EXPECT_NE(i.suspects[0].why.find("3 ranks wait on it directly"), std::string::npos) << i.suspects[0].why;
  EXPECT_DOUBLE_EQ(i.confidence, 0.9);
  EXPECT_EQ(i.id, std::to_string(Job::kNow - 800) + "-host-frozen");
  EXPECT_EQ(Find(incidents, "transport-hang"), nullptr);
}

TEST(AttributionTest, FrozenMemberThatNeverEnteredIsHostFrozen) {
  Job job = DpJobWaitingOn(2);
  Freeze(job, 2, "S", 7500);  // running state, but its poller has been silent for 7.5 s
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("(state S) has not run libft.so's poller; heartbeat "
                                               "silent for 7.5 s"),
            std::string::npos) << incidents[0].suspects[0].why;
}

// The pattern of the report: every peer completed #11 and waits in #12; rank 2's table still
// shows #11 in flight (its process stopped before it saw #11 end on its GPU).
Job LaggardJob(int laggard) {
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 4; ++r) {
    if (r == laggard) {
      job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5300);
    } else {
      job.Set(r, job.DpComm(0, 0), 12, 12, 11, 5000);
    }
  }
  return job;
}

TEST(AttributionTest, LaggardOfCompletedAndWaitingIsNamed) {
  Job job = LaggardJob(2);  // no process state known (a worker from before): lagging
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 12)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "hang");
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  const std::string& why = incidents[0].suspects[0].why;
  EXPECT_NE(why.find("lagging: its table still shows allreduce #11 of comm 7200000000000000 in "
                     "flight, which rank 0 (n0) completed"),
            std::string::npos) << why;
  EXPECT_NE(why.find("heartbeat unknown"), std::string::npos) << why;
  EXPECT_NE(why.find("3 ranks wait on it directly"), std::string::npos) << why;
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.7);
  EXPECT_EQ(Find(incidents, "transport-hang"), nullptr);
}

TEST(AttributionTest, RootedCollectiveCompletedOnSomeMembersIsNoLaggard) {
  // A broadcast's root may finish before its receivers: rank 2 still in broadcast #11 while
  // the others completed it is what a stalled transport looks like too. Not a laggard.
  Job job = LaggardJob(2);
  job.Row(2, job.DpComm(0, 0)).op = proto::OpKind::kBroadcast;
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 12)}));
  for (const proto::Incident& i : incidents) {
    for (const proto::Suspect& x : i.suspects) {
      EXPECT_EQ(x.why.find("lagging"), std::string::npos) << Dump(incidents);
    }
  }
  // Frozen, it is the root whatever the op.
  Freeze(job, 2);
  incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 12)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
}

TEST(AttributionTest, FrozenLaggardIsHostFrozen) {
  Job job = LaggardJob(3);
  Freeze(job, 3, "t");
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 12)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 3);
  const std::string& why = incidents[0].suspects[0].why;
  EXPECT_NE(why.find("stopped by a tracer (state t: a debugger holds it)"), std::string::npos) << why;
  EXPECT_NE(why.find("its table still shows allreduce #11"), std::string::npos) << why;
  EXPECT_NE(incidents[0].message.find("1 rank frozen"), std::string::npos) << incidents[0].message;
}

TEST(AttributionTest, LaggardBehindADeadPeerIsNotALaggard) {
  // Only a live member's completion proves the collective ended: a dead member's table is
  // what it was when it died.
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 4; ++r) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5000);
  job.Set(1, job.DpComm(0, 0), 12, 12, 11, 5000);
  job.Progress(1).state = "dead";
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
}

TEST(AttributionTest, FrozenP2pPeerIsHostFrozenNotATransportPair) {
  Job job(1, 1, 4);
  const uint64_t pp = job.PpComm(0, 0);
  job.Set(1, pp, 21, 21, 20, 4000, proto::OpKind::kSend, 2);
  job.Set(2, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 1);
  Freeze(job, 1);
  auto incidents = Attribute(Input(job, {Timeout(2, pp, 21)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
}

TEST(AttributionTest, TransportHangWithinOneNodeSaysSo) {
  Job job(4, 1, 1, 8);
  for (int r = 0; r < 4; ++r) job.Set(r, job.TpComm(0, 0), 11, 11, 10, 5000);
  auto incidents = Attribute(Input(job, {Timeout(0, job.TpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "transport-hang");
  EXPECT_NE(incidents[0].message.find("all on node n0"), std::string::npos) << incidents[0].message;
}

TEST(AttributionTest, P2pPairWaitingOnEachOtherIsATransportHang) {
  Job job(1, 1, 4);
  const uint64_t pp = job.PpComm(0, 0);
  job.Set(1, pp, 21, 21, 20, 4000, proto::OpKind::kSend, 2);
  job.Set(2, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 1);
  auto incidents = Attribute(Input(job, {Timeout(2, pp, 21)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "transport-hang");
  EXPECT_EQ(incidents[0].comm_id, pp);
  ASSERT_EQ(incidents[0].suspects.size(), 2u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  EXPECT_EQ(incidents[0].suspects[1].rank, 2);
}

// A pipeline stage whose ranks started late (their node's restore plan came seconds after the
// other node's, a Redis failover at start-up): the other stage's send timed out, and the late
// side's matching receive had been on the GPU for 100 ms when the master read it. The exchange
// could not complete before; that is no broken link (a stopped healthy job in a failover test).
TEST(AttributionTest, P2pPeerThatJustArrivedIsNoTransportHang) {
  Job job(1, 1, 4);
  const uint64_t pp = job.PpComm(0, 0);
  job.Set(1, pp, 21, 21, 20, 100, proto::OpKind::kSend, 2);  // the late side
  job.Set(2, pp, 21, 21, 20, 4000, proto::OpKind::kRecv, 1);
  EXPECT_TRUE(Attribute(Input(job, {Timeout(2, pp, 21)})).empty());
  // Both in it past the least timeout: the pair is stuck.
  job.Set(1, pp, 21, 21, 20, 1500, proto::OpKind::kSend, 2);
  auto incidents = Attribute(Input(job, {Timeout(2, pp, 21)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "transport-hang");
}

TEST(AttributionTest, CollectiveWhoseLastMemberJustArrivedIsNoTransportHang) {
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 3; ++r) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 5000);
  job.Set(3, job.DpComm(0, 0), 11, 11, 10, 200);
  EXPECT_TRUE(Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)})).empty());
  job.Set(3, job.DpComm(0, 0), 11, 11, 10, 1200);
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "transport-hang");
}

// tp=2 x dp=4: rank 2 hangs in dp group tp=0 and rank 5 in dp group tp=1. One incident, two
// suspects (documented choice: independent roots of one kind share an incident).
TEST(AttributionTest, TwoIndependentHangsInDifferentDpGroups) {
  Job job(2, 4, 1);
  for (int d = 0; d < 4; ++d) {
    for (int t = 0; t < 2; ++t) {
      const int r = job.Rank(t, d, 0);
      if (r == 2 || r == 5) continue;
      job.Set(r, job.DpComm(t, 0), 11, 11, 10, 5000);
    }
  }
  job.Set(5, job.DpComm(1, 0), 11, 10, 10, 5000);  // 5: compute hang; 2: host hang
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  ASSERT_EQ(incidents[0].suspects.size(), 2u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_EQ(incidents[0].suspects[1].rank, 5);
  EXPECT_NE(incidents[0].suspects[0].why.find("host hang"), std::string::npos);
  EXPECT_NE(incidents[0].suspects[1].why.find("compute hang"), std::string::npos);
  EXPECT_NE(incidents[0].message.find("2 ranks stuck"), std::string::npos) << incidents[0].message;
}

TEST(AttributionTest, BusyRootIsNotAHang) {
  Job job = DpJobWaitingOn(3);
  job.Progress(3).busy = true;  // e.g. writing a checkpoint on the host
  job.Progress(3).last_call_age_ms = 3;
  job.Progress(3).cpu_pct = 97;
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "busy");
  EXPECT_EQ(incidents[0].decision, "none");
  EXPECT_EQ(incidents[0].suspects[0].rank, 3);
  EXPECT_EQ(Find(incidents, "hang"), nullptr);
}

TEST(AttributionTest, StaleReportLowersConfidence) {
  Job job = DpJobWaitingOn(2);
  job.Progress(2).observed_unix_ms = Job::kNow - 20000;
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("its report is 20.0 s old"), std::string::npos)
      << incidents[0].suspects[0].why;
  EXPECT_NEAR(incidents[0].confidence, 0.85 * 0.6, 1e-9);
}

TEST(AttributionTest, MissingReportMakesALowConfidenceSuspect) {
  Job job = DpJobWaitingOn(2);
  job.progress.erase(job.progress.begin() + 2);
  auto incidents = Attribute(Input(job, {Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "hang");
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_EQ(incidents[0].suspects[0].node, "n1");  // from membership
  EXPECT_NE(incidents[0].suspects[0].why.find("no progress report"), std::string::npos);
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.5);
}

TEST(AttributionTest, MissingReportOfADeadMemberIsACrash) {
  Job job = DpJobWaitingOn(2);
  job.progress.erase(job.progress.begin() + 2);
  job.membership[2].state = "dead";
  auto incidents = Attribute(Input(job));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.8);
}

TEST(AttributionTest, EventProgressFillsAMissingReport) {
  Job job = DpJobWaitingOn(2);
  proto::Event e = Timeout(0, job.DpComm(0, 0), 11);
  job.Set(2, job.DpComm(0, 0), 11, 10, 10);
  e.rank = 2;
  e.progress = job.Progress(2);
  job.progress.erase(job.progress.begin() + 2);
  auto incidents = Attribute(Input(job, {e}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_NE(incidents[0].suspects[0].why.find("compute hang"), std::string::npos);
}

TEST(AttributionTest, HealthyInFlightCollectivesAreNotIncidents) {
  Job job(1, 4, 1, 2);
  for (int r = 0; r < 3; ++r) job.Set(r, job.DpComm(0, 0), 11, 11, 10, 30);  // waiting 30 ms
  EXPECT_TRUE(Attribute(Input(job)).empty());
  job.Set(3, job.DpComm(0, 0), 11, 11, 10, 30);  // all in flight, 30 ms
  EXPECT_TRUE(Attribute(Input(job)).empty());
}

TEST(AttributionTest, NothingWaitingGivesNothing) {
  Job job(2, 2, 2);
  EXPECT_TRUE(Attribute(Input(job)).empty());
}

// ---- deaths and freezes nobody is seen waiting on (issue 15 item 2) ----------------------

// An unclean death as its worker reports it: "dead" in its progress, "exit" not clean.
proto::Event Death(Job& job, int rank, int64_t at, int signal = 0) {
  job.Progress(rank).state = "dead";
  job.Progress(rank).observed_unix_ms = at;
  job.membership[static_cast<size_t>(rank)].state = "dead";
  proto::Event e;
  e.kind = "exit";
  e.rank = rank;
  e.node = job.Progress(rank).node;
  e.unix_ms = at;
  e.code = signal != 0 ? -signal : 0;
  e.terminated_by_signal = signal;
  e.terminate_unix_ms = signal != 0 ? at - 20 : 0;
  e.progress = job.Progress(rank);
  return e;
}

proto::Event Frozen(Job& job, int rank, int64_t at, double frozen_ms) {
  proto::RankProgress& p = job.Progress(rank);
  p.frozen = true;
  p.proc_state = "T";
  p.heartbeat_age_ms = frozen_ms;
  proto::Event e;
  e.kind = "frozen";
  e.rank = rank;
  e.node = p.node;
  e.unix_ms = at;
  e.age_ms = frozen_ms;
  e.progress = p;
  return e;
}

// Its peers wait somewhere libft.so does not see (a CPU collective, a store barrier) or are
// between collectives: no NCCL op of theirs is in flight. The dead rank is the incident.
TEST(AttributionTest, DeathWithNobodySeenWaitingIsACrash) {
  Job job(1, 4, 1, 2);
  std::string why_none;
  proto::Event death = Death(job, 2, Job::kNow - 300);
  death.progress.pid = 5150;
  auto incidents = Attribute(Input(job, {death}), &why_none);
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_EQ(incidents[0].suspects[0].node, "n1");
  EXPECT_NE(incidents[0].suspects[0].why.find("no peer is seen waiting on it inside NCCL"), std::string::npos)
      << incidents[0].suspects[0].why;
  EXPECT_EQ(incidents[0].suspects[0].why.rfind("process 5150 gone, exit status unknown", 0), 0u)
      << incidents[0].suspects[0].why;
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.95);
  EXPECT_NE(incidents[0].message.find("gone without a clean exit"), std::string::npos) << incidents[0].message;
  EXPECT_EQ(std::count(incidents[0].evidence.begin(), incidents[0].evidence.end(),
                       "exit of rank 2 (n1): gone, exit status unknown (killed or crashed)"), 1)
      << Dump(incidents);
  EXPECT_TRUE(why_none.empty());
}

// A launcher's or scheduler's SIGTERM (libft.so wrote it into the segment): a teardown.
TEST(AttributionTest, DeathAfterATerminateSignalIsNoCrash) {
  Job job(1, 4, 1, 2);
  std::string why_none;
  auto incidents = Attribute(Input(job, {Death(job, 2, Job::kNow - 300, 15)}), &why_none);
  EXPECT_TRUE(incidents.empty()) << Dump(incidents);
  EXPECT_NE(why_none.find("2@n1 (signal 15)"), std::string::npos) << why_none;
}

// Preemption, scancel: every rank SIGTERMed, some still alive (saving) with a collective in
// flight on those already gone. No crash incident naming whichever died first.
TEST(AttributionTest, EveryRankTerminatedIsNoIncident) {
  Job job = DpJobWaitingOn(3);
  std::vector<proto::Event> events = {Death(job, 3, Job::kNow - 900, 15), Death(job, 2, Job::kNow - 850, 15)};
  std::string why_none;
  auto incidents = Attribute(Input(job, events), &why_none);
  EXPECT_TRUE(incidents.empty()) << Dump(incidents);
  EXPECT_NE(why_none.find("2 ranks ended"), std::string::npos) << why_none;
}

// torchrun's agent after a crash: the rest SIGTERMed 0.1 s later. Only the crash is a root,
// whether the others died or still wait on the dead.
TEST(AttributionTest, TeardownAfterACrashNamesOnlyTheCrash) {
  Job job = DpJobWaitingOn(1);
  std::vector<proto::Event> events = {Death(job, 1, Job::kNow - 900), Death(job, 2, Job::kNow - 800, 15),
                                      Death(job, 3, Job::kNow - 790, 15)};
  auto incidents = Attribute(Input(job, events));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "crash");
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  bool noted = false;
  for (const std::string& e : incidents[0].evidence) noted |= e.find("not roots: 2 ended") != std::string::npos;
  EXPECT_TRUE(noted) << Dump(incidents);
  // All three dead, nobody left waiting: the same.
  job.Progress(0).state = "dead";
  events.push_back(Death(job, 0, Job::kNow - 780, 15));
  incidents = Attribute(Input(job, events));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
}

// A cascade: the incident says which process ended first and how, by the workers' clocks,
// whatever order the events were read in.
TEST(AttributionTest, ACascadeNamesTheFirstToFail) {
  Job job = DpJobWaitingOn(1);
  std::vector<proto::Event> events = {Death(job, 2, Job::kNow - 800, 15), Death(job, 1, Job::kNow - 900),
                                      Death(job, 3, Job::kNow - 780, 15)};
  events[1].code = -9;
  events[1].status_unknown = false;
  auto incidents = Attribute(Input(job, events));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  std::string first;
  for (const std::string& e : incidents[0].evidence) {
    if (e.find("first to fail") != std::string::npos) first = e;
  }
  EXPECT_EQ(first, "first to fail (by the workers' clocks): rank 1 on n0, killed by signal 9 (SIGKILL); then "
                   "2@n1 +100 ms, 3@n1 +120 ms") << Dump(incidents);
}

// The job finishing: rank 0 exited cleanly, its launcher tore down the rest (no signal
// recorded: a libft.so without the handler, or SIGKILL).
TEST(AttributionTest, DeathsAfterACleanExitAreTheJobFinishing) {
  Job job(1, 4, 1, 2);
  const std::vector<proto::Event> deaths = {Death(job, 1, Job::kNow - 1500), Death(job, 3, Job::kNow - 1400)};
  auto attribute = [&](std::vector<int64_t> clean, std::string* why_none = nullptr) {
    AttributionInput in = Input(job, deaths);
    in.clean_exit_unix_ms = clean;
    return Attribute(in, why_none);
  };
  std::string why_none;
  EXPECT_TRUE(attribute({Job::kNow - 2000}, &why_none).empty());
  EXPECT_NE(why_none.find("after a clean exit"), std::string::npos) << why_none;
  // The clean exit as an event of the window instead.
  std::vector<proto::Event> with_exit = deaths;
  with_exit.push_back(CleanExit(job, 0, Job::kNow - 2000));
  EXPECT_TRUE(Attribute(Input(job, with_exit)).empty());
  // A clean exit after the death (an app's SIGTERM handler calling exit(0) in the teardown of
  // a crash), or one from long before (another run's), says nothing about it.
  auto incidents = attribute({Job::kNow - 1450});
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  incidents = attribute({Job::kNow - 120000});
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects.size(), 2u) << Dump(incidents);
}

// A job that finished and was launched again under the same name: the first run's clean exits,
// seconds before, end nothing of the new run; its crash is an incident like any other.
TEST(AttributionTest, CleanExitsOfAnEarlierLaunchDoNotExcuseACrash) {
  Job job(1, 4, 1, 2);
  const int64_t relaunched = Job::kNow - 3000;
  for (int r = 0; r < 4; ++r) job.Progress(r).incarnation = static_cast<uint64_t>(relaunched) * 1000000;
  const std::vector<proto::Event> deaths = {Death(job, 1, Job::kNow - 1500)};
  AttributionInput in = Input(job, deaths);
  const std::vector<int64_t> first_run_exits = {relaunched - 2000, relaunched - 1900};
  in.clean_exit_unix_ms = first_run_exits;
  std::string why_none;
  auto incidents = Attribute(in, &why_none);
  ASSERT_EQ(incidents.size(), 1u) << "closed as: " << why_none;
  EXPECT_EQ(incidents[0].kind, "crash");
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].suspects[0].rank, 1);
  // A clean exit of the new run itself still marks its teardown.
  const std::vector<int64_t> this_run_exit = {Job::kNow - 1600};
  in.clean_exit_unix_ms = this_run_exit;
  EXPECT_TRUE(Attribute(in).empty());
}

TEST(AttributionTest, RankStoppedByItsWorkerIsNoCrash) {
  Job job(1, 4, 1, 2);
  proto::Event e = Death(job, 2, Job::kNow - 300);
  e.progress.state = "stopped";
  job.Progress(2).state = "stopped";
  EXPECT_TRUE(Attribute(Input(job, {e})).empty());
}

TEST(AttributionTest, FrozenRankWithNobodySeenWaitingIsHostFrozen) {
  Job job(1, 4, 1, 2);
  auto incidents = Attribute(Input(job, {Frozen(job, 2, Job::kNow - 200, 3500)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, 2);
  EXPECT_NE(incidents[0].suspects[0].why.find("stopped (state T"), std::string::npos) << incidents[0].suspects[0].why;
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.9);
  EXPECT_NE(incidents[0].message.find("frozen past FT_FROZEN_AFTER"), std::string::npos) << incidents[0].message;
  // Running again by its newest report (SIGCONT): nothing.
  job.Progress(2).frozen = false;
  job.Progress(2).proc_state = "S";
  job.Progress(2).observed_unix_ms = Job::kNow - 50;
  proto::Event old = Frozen(job, 2, Job::kNow - 200, 3500);
  old.progress.observed_unix_ms = Job::kNow - 200;
  job.Progress(2).frozen = false;
  EXPECT_TRUE(Attribute(Input(job, {old})).empty()) << Dump(Attribute(Input(job, {old})));
}

// Frozen and waited on: named once, as the root it is.
TEST(AttributionTest, FrozenRootIsNamedOnce) {
  Job job = DpJobWaitingOn(2);
  auto incidents = Attribute(Input(job, {Frozen(job, 2, Job::kNow - 200, 3500), Timeout(0, job.DpComm(0, 0), 11)}));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "host-frozen");
  ASSERT_EQ(incidents[0].suspects.size(), 1u) << Dump(incidents);
  EXPECT_NE(incidents[0].suspects[0].why.find("others wait on it"), std::string::npos);
}

TEST(AttributionTest, WaitForCycleIsALowConfidenceHang) {
  Job job(2, 2, 1);
  // 0 waits on dp (blocked by 2), 2 on tp (blocked by 3), 3 on dp (blocked by 1), 1 on tp
  // (blocked by 0): nobody is a root.
  job.Set(0, job.DpComm(0, 0), 11, 11, 10);
  job.Set(2, job.TpComm(1, 0), 11, 11, 10);
  job.Set(3, job.DpComm(1, 0), 11, 11, 10);
  job.Set(1, job.TpComm(0, 0), 11, 11, 10);
  auto incidents = Attribute(Input(job));
  ASSERT_EQ(incidents.size(), 1u) << Dump(incidents);
  EXPECT_EQ(incidents[0].kind, "hang");
  EXPECT_EQ(incidents[0].suspects.size(), 4u);
  EXPECT_DOUBLE_EQ(incidents[0].confidence, 0.3);
}

TEST(AttributionTest, EvidenceIsCapped) {
  Job job(1, 64, 1);
  for (int r = 0; r < 64; ++r) {
    if (r % 2 == 0) job.Set(r, job.DpComm(0, 0), 11, 11, 10);  // 32 roots: the odd ranks
  }
  AttributionInput in = Input(job);
  in.max_evidence = 5;
  auto incidents = Attribute(in);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].suspects.size(), 32u);
  EXPECT_EQ(incidents[0].evidence.size(), 6u);
  EXPECT_NE(incidents[0].evidence.back().find("more lines"), std::string::npos);
}

TEST(AttributionTest, WindowClosesOnceEveryInvolvedRankReported) {
  Job job = DpJobWaitingOn(2);
  const int64_t first = Job::kNow - 500;
  std::vector<proto::Event> events = {Timeout(0, job.DpComm(0, 0), 11, first)};
  for (auto& p : job.progress) p.observed_unix_ms = first - 100;  // all before the event
  AttributionInput in = Input(job, events);
  EXPECT_FALSE(WindowCanClose(in, 1000));
  for (int r : {0, 1, 3}) job.Progress(r).observed_unix_ms = first + 50;
  EXPECT_FALSE(WindowCanClose(in, 1000));  // rank 2 has not reported since
  job.Progress(2).observed_unix_ms = first + 60;
  EXPECT_TRUE(WindowCanClose(in, 1000));
  job.Progress(2).observed_unix_ms = first - 100;
  EXPECT_TRUE(WindowCanClose(in, 400));  // the window itself has passed
  in.events = {};
  EXPECT_TRUE(WindowCanClose(in, 1000));
}

TEST(AttributionTest, WindowFollowsWaitsIntoOtherComms) {
  // tp=2 x dp=2: the event is on dp comm tp=0 (ranks 0, 2); rank 2 waits on tp comm (2, 3),
  // so rank 3 must report too; a dead rank counts as reported.
  Job job(2, 2, 1);
  const int64_t first = Job::kNow - 500;
  job.Set(0, job.DpComm(0, 0), 11, 11, 10);
  job.Set(2, job.TpComm(1, 0), 11, 11, 10);
  for (auto& p : job.progress) p.observed_unix_ms = first + 10;
  job.Progress(3).observed_unix_ms = first - 10;
  std::vector<proto::Event> events = {Timeout(0, job.DpComm(0, 0), 11, first)};
  AttributionInput in = Input(job, events);
  EXPECT_FALSE(WindowCanClose(in, 1000));
  job.Progress(3).state = "dead";
  EXPECT_TRUE(WindowCanClose(in, 1000));
}

}  // namespace
}  // namespace ft::master
