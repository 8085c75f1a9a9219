#include "ftmaster/core/decision.h"

#include <gtest/gtest.h>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

proto::HwSignal Signal(const char* node, const char* source, const char* kind, int64_t value, bool critical,
                       std::vector<int> ranks) {
  proto::HwSignal h;
  h.node = node;
  h.source = source;
  h.device = std::string(source) == "rdma" ? "mlx5_0/1" : "0000:2a:00.0";
  h.kind = kind;
  h.value = value;
  h.critical = critical;
  h.ranks = std::move(ranks);
  return h;
}

proto::Incident Incident(const char* kind, std::vector<proto::Suspect> suspects) {
  proto::Incident i;
  i.id = std::string("1-") + kind;
  i.kind = kind;
  i.suspects = std::move(suspects);
  return i;
}

Topology Grid(int tp, int dp, int pp) {
  Topology t;
  EXPECT_TRUE(Topology::FromSizes(tp, dp, pp, "", &t).ok());
  return t;
}

std::vector<int> Ranks(const Decision& d) {
  std::vector<int> r;
  for (const SaveTarget& s : d.save) r.push_back(s.rank);
  return r;
}

// tp=2 dp=2 pp=2 on four nodes of two ranks each: n0 {0,1}, n1 {2,3}, n2 {4,5}, n3 {6,7}.
// Every healthy DP replica of every shard saves, so their digests can be compared.
TEST(DecisionTest, ReplicaExistsSavesEveryHealthyReplica) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("hang", {{2, "n1", "compute hang"}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d.save[0].node, "n0");
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
  ApplyDecision(d, incidents);
  EXPECT_EQ(incidents[0].decision, "save-then-stop");
  EXPECT_NE(incidents[0].message.find("saving from 7 ranks"), std::string::npos) << incidents[0].message;
}

TEST(DecisionTest, HostFrozenIsDecidedLikeAHang) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("host-frozen", {{2, "n1", "host frozen"}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 3, 4, 5, 6, 7}));
  ApplyDecision(d, incidents);
  EXPECT_EQ(incidents[0].decision, "save-then-stop");
}

TEST(DecisionTest, HealthyRanksOnAnEvictedNodeSaveToo) {
  Job job(2, 2, 2, 2);
  // Rank 0 (n0) hangs: shard (0,0) saves from rank 2 alone; rank 1, healthy on the evicted
  // n0, still saves (its copy is compared with rank 3's, and its tiers may outlive the node).
  std::vector<proto::Incident> incidents = {Incident("hang", {{0, "n0", ""}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop);
  EXPECT_EQ(Ranks(d), (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n0"}));
}

TEST(DecisionTest, ShardWithoutHealthyReplicaStops) {
  Job job(2, 2, 2, 2);
  job.membership[7].state = "dead";  // rank 5's only replica (shard tp=1 pp=1)
  std::vector<proto::Incident> incidents = {Incident("crash", {{5, "n2", ""}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kStop);
  EXPECT_TRUE(d.save.empty());
  EXPECT_NE(d.reason.find("shard tp=1 pp=1"), std::string::npos) << d.reason;
  // A crash with no evidence against n2 is the software's: it restarts in place.
  EXPECT_TRUE(d.evict_nodes.empty());
  EXPECT_NE(d.reason.find("not evicting n2: a software failure"), std::string::npos) << d.reason;
}

// Sharded optimizer state: every DP rank holds its own slice, so a hung rank whose process is
// alive (a compute or host hang: its agent thread and copy engines are free) saves too.
TEST(DecisionTest, ShardedOptimizerSavesTheAliveHangSuspectToo) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("hang", {{2, "n1", "compute hang"}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, true);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d.save[2].node, "n1");
  EXPECT_NE(d.reason.find("alive suspect 2"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("sharded"), std::string::npos) << d.reason;
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));  // still evicted after the save
}

// A suspect that cannot save its slice — frozen, dead, or alive only by an unknown state —
// leaves the step without a full checkpoint: stop, and the restore plan keeps the newest step
// every shard has (ckpt_verify.h judges what is restorable).
TEST(DecisionTest, ShardedOptimizerStopsWhenASuspectCannotSave) {
  {
    Job job(2, 2, 2, 2);
    std::vector<proto::Incident> incidents = {Incident("host-frozen", {{2, "n1", "host frozen"}})};
    Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, true);
    EXPECT_EQ(d.decision, proto::DecisionKind::kStop);
    EXPECT_TRUE(d.save.empty());
    EXPECT_NE(d.reason.find("rank 2 of shard tp=0 pp=0 cannot save its slice (a host-frozen suspect)"),
              std::string::npos) << d.reason;
    EXPECT_TRUE(d.evict_nodes.empty()) << "rank 3 runs on n1: a stopped process, not a frozen host";
  }
  {
    Job job(2, 2, 2, 2);  // named in a hang, but its process is gone
    job.membership[5].state = "dead";
    std::vector<proto::Incident> incidents = {Incident("hang", {{5, "n2", ""}})};
    Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, true);
    EXPECT_EQ(d.decision, proto::DecisionKind::kStop);
    EXPECT_NE(d.reason.find("(dead)"), std::string::npos) << d.reason;
  }
  {
    Job job(2, 2, 2, 2);  // a hang suspect that another incident calls crashed
    std::vector<proto::Incident> incidents = {Incident("hang", {{5, "n2", ""}}), Incident("crash", {{5, "n2", ""}})};
    EXPECT_EQ(Decide(incidents, Grid(2, 2, 2), job.membership, true).decision, proto::DecisionKind::kStop);
  }
  {
    Job job(2, 2, 2, 2);  // no membership: nothing shows the suspect alive
    std::vector<proto::Incident> incidents = {Incident("hang", {{5, "n2", ""}})};
    EXPECT_EQ(Decide(incidents, Grid(2, 2, 2), {}, true).decision, proto::DecisionKind::kStop);
  }
  {
    Job job(2, 2, 2, 2);  // a hung transport: its members are not asked (transport hangs are not compute/host hangs)
    proto::Incident t = Incident("transport-hang", {{0, "n0", ""}, {2, "n1", ""}});
    t.comm_id = job.DpComm(0, 0);
    EXPECT_EQ(Decide(std::vector<proto::Incident>{t}, Grid(2, 2, 2), job.membership, true).decision, proto::DecisionKind::kStop);
  }
}

// Replicated: a suspect is left out while its shard has a healthy replica (said in the
// reason); a shard whose every replica hangs alive saves from them (single copies).
TEST(DecisionTest, ReplicatedSavesAliveSuspectsOnlyForAShardWithoutHealthyReplica) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("hang", {{2, "n1", "compute hang"}})};
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 3, 4, 5, 6, 7}));
  EXPECT_NE(d.reason.find("suspect 2 left out"), std::string::npos) << d.reason;

  // Shard tp=0 pp=0 is ranks 0 and 2: both hang, alive.
  incidents = {Incident("hang", {{0, "n0", "compute hang"}, {2, "n1", "host hang"}})};
  d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(d.reason.find("alive suspects 0,2"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("no healthy replica"), std::string::npos) << d.reason;

  // Its other replica dead: the alive suspect saves alone.
  job.membership[2].state = "dead";
  incidents = {Incident("hang", {{0, "n0", "compute hang"}})};
  d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;
  EXPECT_EQ(Ranks(d), (std::vector<int>{0, 1, 3, 4, 5, 6, 7}));

  // Frozen instead of hung: no save of it, and the shard has nobody.
  incidents = {Incident("host-frozen", {{0, "n0", "host frozen"}})};
  d = Decide(incidents, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kStop);
  EXPECT_NE(d.reason.find("shard tp=0 pp=0"), std::string::npos) << d.reason;
}

TEST(DecisionTest, BusyAndStragglerNeedNoDecision) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("busy", {{3, "n1", ""}}),
                                            Incident("straggler", {{4, "n2", ""}})};
  incidents[0].decision = incidents[1].decision = "none";
  Decision d = Decide(incidents, Grid(2, 2, 2), job.membership, true);
  EXPECT_EQ(d.decision, proto::DecisionKind::kNone);
  EXPECT_TRUE(d.evict_nodes.empty());
  ApplyDecision(d, incidents);
  EXPECT_EQ(incidents[0].decision, "none");
}

TEST(DecisionTest, NoTopologyStops) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> incidents = {Incident("hang", {{2, "n1", ""}})};
  Decision d = Decide(incidents, Topology::Unknown("cannot tell tp from dp"), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kStop);
  EXPECT_NE(d.reason.find("cannot tell tp from dp"), std::string::npos) << d.reason;
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
}

TEST(DecisionTest, TransportHangEvictsOnlyASingleNode) {
  Job job(2, 2, 2, 2);
  proto::Incident across = Incident("transport-hang", {{0, "n0", ""}, {2, "n1", ""}});
  across.comm_id = job.DpComm(0, 0);
  Decision d = Decide(std::vector<proto::Incident>{across}, Grid(2, 2, 2), job.membership, false);
  EXPECT_TRUE(d.evict_nodes.empty());
  EXPECT_EQ(d.decision, proto::DecisionKind::kStop);  // both replicas of shard (0,0) are suspects
  EXPECT_NE(d.reason.find("not evicting"), std::string::npos) << d.reason;

  proto::Incident inside = Incident("transport-hang", {{0, "n0", ""}, {1, "n0", ""}});
  d = Decide(std::vector<proto::Incident>{inside}, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n0"}));
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop);
  EXPECT_EQ(Ranks(d), (std::vector<int>{2, 3, 4, 5, 6, 7}));
}

TEST(DecisionTest, UnnamedStuckRankStops) {
  Job job(1, 2, 1);
  std::vector<proto::Incident> incidents = {Incident("hang", {})};
  EXPECT_EQ(Decide(incidents, Grid(1, 2, 1), job.membership, false).decision, proto::DecisionKind::kStop);
}

TEST(DecisionTest, PureDataParallelSavesEveryHealthyRank) {
  Job job(1, 8, 1, 4);
  job.membership[6].state = "exited";  // no agent left to save
  std::vector<proto::Incident> incidents = {Incident("crash", {{0, "n0", ""}})};
  Decision d = Decide(incidents, Grid(1, 8, 1), job.membership, false);
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop);
  EXPECT_EQ(Ranks(d), (std::vector<int>{1, 2, 3, 4, 5, 7}));
}

// Evidence decides whether a failed process takes its node with it (hw_evidence.h): the GPU
// fallen off the bus does; an application's Xid, or nothing, does not.
TEST(DecisionTest, ACrashEvictsItsNodeOnlyWithHardwareEvidence) {
  Job job(2, 2, 2, 2);
  proto::Incident crash = Incident("crash", {{2, "n1", "killed by signal 9"}});
  crash.hardware = {Signal("n1", "nvml", "xid", 79, true, {2})};
  Decision d = Decide(std::vector<proto::Incident>{crash}, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
  ASSERT_EQ(d.evict_reasons.size(), 1u);
  EXPECT_NE(d.evict_reasons[0].find("Xid 79 on GPU 0000:2a:00.0 (rank 2)"), std::string::npos) << d.evict_reasons[0];
  EXPECT_EQ(d.decision, proto::DecisionKind::kSaveThenStop) << d.reason;

  crash.hardware = {Signal("n1", "nvml", "xid", 13, false, {2})};
  d = Decide(std::vector<proto::Incident>{crash}, Grid(2, 2, 2), job.membership, false);
  EXPECT_TRUE(d.evict_nodes.empty()) << "an application's Xid alone never evicts";
  EXPECT_NE(d.reason.find("restarts in place"), std::string::npos) << d.reason;

  // Critical, but on another node: not evidence against n1.
  crash.hardware = {Signal("n3", "nvml", "ecc-uncorrected", 2, true, {6})};
  d = Decide(std::vector<proto::Incident>{crash}, Grid(2, 2, 2), job.membership, false);
  EXPECT_TRUE(d.evict_nodes.empty());
}

// A node whose processes keep failing is suspect whatever its signals say: the second crash or
// stop on it within the hour evicts it.
TEST(DecisionTest, RepeatedFailuresOnANodeEvictIt) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> crash = {Incident("crash", {{2, "n1", "killed by signal 11"}})};
  const std::map<std::string, int> none = {{"n1", 0}, {"n2", 3}};
  EXPECT_TRUE(Decide(crash, Grid(2, 2, 2), job.membership, false, &none).evict_nodes.empty());
  const std::map<std::string, int> once = {{"n1", 1}};
  Decision d = Decide(crash, Grid(2, 2, 2), job.membership, false, &once);
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
  EXPECT_NE(d.evict_reasons.at(0).find("repeated failures: a crash after 1 earlier crash or stop"), std::string::npos)
      << d.evict_reasons.at(0);
  std::vector<proto::Incident> stopped = {Incident("host-frozen", {{2, "n1", "stopped"}})};
  EXPECT_EQ(Decide(stopped, Grid(2, 2, 2), job.membership, false, &once).evict_nodes,
            (std::vector<std::string>{"n1"}));
}

TEST(DecisionTest, AFrozenHostIsEvictedAStoppedProcessIsNot) {
  Job job(2, 2, 2, 2);
  std::vector<proto::Incident> one = {Incident("host-frozen", {{2, "n1", "stopped"}})};
  EXPECT_TRUE(Decide(one, Grid(2, 2, 2), job.membership, false).evict_nodes.empty());
  std::vector<proto::Incident> both = {Incident("host-frozen", {{2, "n1", "stopped"}, {3, "n1", "stopped"}})};
  Decision d = Decide(both, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
  EXPECT_NE(d.evict_reasons.at(0).find("host frozen"), std::string::npos) << d.evict_reasons.at(0);
}

TEST(DecisionTest, ATransportHangAcrossNodesEvictsTheNodeWhoseLinkWentDown) {
  Job job(2, 2, 2, 2);
  proto::Incident across = Incident("transport-hang", {{0, "n0", ""}, {2, "n1", ""}});
  across.comm_id = job.DpComm(0, 0);
  across.hardware = {Signal("n1", "rdma", "link-downed", 2, true, {2, 3}),
                     Signal("n0", "rdma", "port-xmit-wait", 500, false, {0, 1})};
  Decision d = Decide(std::vector<proto::Incident>{across}, Grid(2, 2, 2), job.membership, false);
  EXPECT_EQ(d.evict_nodes, (std::vector<std::string>{"n1"}));
  EXPECT_NE(d.evict_reasons.at(0).find("link-downed +2 on NIC mlx5_0/1"), std::string::npos) << d.evict_reasons.at(0);
  // Every node's link down: which one failed first is not said; nobody is evicted.
  across.hardware.push_back(Signal("n0", "rdma", "link-downed", 1, true, {0, 1}));
  d = Decide(std::vector<proto::Incident>{across}, Grid(2, 2, 2), job.membership, false);
  EXPECT_TRUE(d.evict_nodes.empty());
}

}  // namespace
}  // namespace ft::master
