#include "ftmaster/core/ckpt_verify.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ft::master {
namespace {

Topology Grid(int tp, int dp, int pp) {
  Topology t;
  EXPECT_TRUE(Topology::FromSizes(tp, dp, pp, "", &t).ok());
  return t;
}

// Rank r of a tp-dp-pp grid on nodes of two ranks ("n<r/2>"), holding `digest`.
proto::CkptCopy Copy(int rank, uint64_t digest, std::vector<std::string> tiers = {"arena"}) {
  proto::CkptCopy c;
  c.step = 100;
  c.rank = rank;
  c.node = "n" + std::to_string(rank / 2);
  c.digest = digest;
  c.bytes = 64;
  c.tiers = std::move(tiers);
  return c;
}

// tp=1 dp=4: one shard, four replicas.
TEST(CkptVerifyTest, AllEqualIsVerified) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 7), Copy(2, 7), Copy(3, 7)};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 4, 1), false, 5);
  EXPECT_TRUE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  EXPECT_EQ(j.verdict.shards, 1);
  EXPECT_EQ(j.verdict.verified_shards, 1);
  EXPECT_EQ(j.verdict.copies, 4);
  EXPECT_TRUE(j.verdict.sdc_ranks.empty());
  EXPECT_EQ(j.verdict.unix_ms, 5);
  EXPECT_EQ(j.verdict.reasons, (std::vector<proto::VerdictReason>{proto::VerdictReason::kAccepted}));
  EXPECT_EQ(j.shards.begin()->second.agreeing, 4);
}

TEST(CkptVerifyTest, OddOneOfThreeIsSdcAndTheMajorityIsAccepted) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 9), Copy(2, 7)};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 3, 1), false, 5);
  EXPECT_TRUE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  EXPECT_EQ(j.verdict.sdc_ranks, (std::vector<int>{1}));
  ASSERT_EQ(j.sdc.size(), 1u);
  EXPECT_EQ(j.sdc[0].node, "n0");
  EXPECT_EQ(j.sdc[0].digest, 9u);
  EXPECT_EQ(j.sdc[0].majority, 7u);
  EXPECT_EQ(j.shards.begin()->second.digest, 7u);
  // why's parts and their codes, in order: accepted, then the corruption found.
  EXPECT_EQ(j.verdict.reasons, (std::vector<proto::VerdictReason>{proto::VerdictReason::kAccepted,
                                                                  proto::VerdictReason::kSilentDataCorruption}))
      << j.verdict.why;
}

TEST(CkptVerifyTest, TwoThatDisagreeMakeTheStepUntrusted) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 9)};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), false, 5);
  EXPECT_FALSE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kUntrusted);
  EXPECT_EQ(j.verdict.verified_shards, 0);
  EXPECT_TRUE(j.verdict.sdc_ranks.empty()) << "no majority names nobody";
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kReplicasDisagree)) << j.verdict.why;
  EXPECT_FALSE(j.verdict.Has(proto::VerdictReason::kAccepted)) << j.verdict.why;
  // Four split two and two: no strict majority either.
  copies = {Copy(0, 7), Copy(1, 9), Copy(2, 7), Copy(3, 9)};
  EXPECT_EQ(JudgeStep(100, copies, Grid(1, 4, 1), false, 5).verdict.state, proto::VerdictState::kUntrusted);
}

TEST(CkptVerifyTest, TornCopiesNeverCount) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 9), Copy(2, 7)};
  copies[1].torn = true;
  StepJudgement j = JudgeStep(100, copies, Grid(1, 3, 1), false, 5);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  EXPECT_EQ(j.verdict.copies, 2);
  EXPECT_TRUE(j.verdict.sdc_ranks.empty()) << "a torn copy is not corruption";
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kTornIgnored)) << j.verdict.why;
  // Only torn copies: the shard has none.
  copies = {Copy(0, 7)};
  copies[0].torn = true;
  j = JudgeStep(100, copies, Grid(1, 1, 1), false, 5);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kIncomplete);
  EXPECT_FALSE(j.restorable);
}

TEST(CkptVerifyTest, SingleReplicaIsAcceptedAndSaidSo) {
  std::vector<proto::CkptCopy> copies = {Copy(1, 7)};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), false, 5);
  EXPECT_TRUE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kSingleCopy)) << j.verdict.why;
}

TEST(CkptVerifyTest, MissingShardIsIncomplete) {
  // tp=2 dp=2: shard tp=1 (ranks 1, 3) has no copy.
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(2, 7)};
  StepJudgement j = JudgeStep(100, copies, Grid(2, 2, 1), false, 5);
  EXPECT_FALSE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kIncomplete);
  EXPECT_EQ(j.verdict.shards, 2);
  EXPECT_EQ(j.verdict.verified_shards, 1);
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kShardsMissing)) << j.verdict.why;
  // What a person reads: which shard has none.
  EXPECT_NE(j.verdict.why.find("1 of 2 shards have no copy (first tp=1 pp=0)"), std::string::npos) << j.verdict.why;
}

TEST(CkptVerifyTest, ShardFromTheManifestWinsOverTheTopology) {
  // Rank 0 says it holds shard tp=1: it is compared with rank 1, not rank 2.
  std::vector<proto::CkptCopy> copies = {Copy(0, 9), Copy(1, 9), Copy(2, 7), Copy(3, 9)};
  copies[0].tp = 1;
  copies[0].pp = 0;
  StepJudgement j = JudgeStep(100, copies, Grid(2, 2, 1), false, 5);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  EXPECT_EQ(j.shards.at(ShardId{1, 0, -1}).copies, 3);
  EXPECT_EQ(j.shards.at(ShardId{0, 0, -1}).copies, 1);
  // Outside the topology: ignored.
  copies[0].tp = 5;
  j = JudgeStep(100, copies, Grid(2, 2, 1), false, 5);
  EXPECT_EQ(j.verdict.copies, 3);
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kOutsideTopology)) << j.verdict.why;
}

TEST(CkptVerifyTest, ShardedOptimizerComparesNothing) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 9)};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), true, 5);
  EXPECT_TRUE(j.restorable);
  EXPECT_EQ(j.verdict.shards, 2);
  EXPECT_TRUE(j.verdict.sdc_ranks.empty());
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kShardedOptimizer)) << j.verdict.why;
  copies.pop_back();
  EXPECT_EQ(JudgeStep(100, copies, Grid(1, 2, 1), true, 5).verdict.state, proto::VerdictState::kIncomplete);
}

TEST(CkptVerifyTest, UnknownTopologyJudgesNothing) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7)};
  StepJudgement j = JudgeStep(100, copies, Topology::Unknown("no grid"), false, 5);
  EXPECT_FALSE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kIncomplete);
  EXPECT_EQ(j.verdict.reasons, (std::vector<proto::VerdictReason>{proto::VerdictReason::kTopologyUnknown}));
  EXPECT_NE(j.verdict.why.find("no grid"), std::string::npos) << "the topology's own words: " << j.verdict.why;
}

TEST(CkptVerifyTest, CopiesNoTierHoldsAreNoSource) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7, {}), Copy(1, 7, {})};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), false, 5);
  EXPECT_FALSE(j.restorable);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kIncomplete);
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kNoSourceLeft)) << j.verdict.why;
}

// The plan: per rank the accepted digest and its holders, own first, then same node, then the
// rest; the odd replica is no source; a rank without a copy (the hung one) restores from a peer.
TEST(CkptVerifyTest, PlanOrdersSourcesOwnThenSameNode) {
  // tp=1 dp=4 on n0 {0,1}, n1 {2,3}; rank 3 hung (no copy), rank 1 odd.
  std::vector<proto::CkptCopy> copies = {Copy(0, 7, {"arena", "local"}), Copy(1, 9), Copy(2, 7)};
  Topology t = Grid(1, 4, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  proto::RestorePlan plan = BuildPlan(j, t, false, [](int r) { return "n" + std::to_string(r / 2); });
  EXPECT_EQ(plan.step, 100);
  ASSERT_EQ(plan.ranks.size(), 4u);
  for (const proto::RestoreRank& rr : plan.ranks) EXPECT_EQ(rr.digest, 7u);
  auto sources = [&](int rank) {
    std::vector<int> out;
    for (const proto::RestoreSource& s : plan.ranks[static_cast<size_t>(rank)].sources) out.push_back(s.rank);
    return out;
  };
  EXPECT_EQ(sources(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(sources(1), (std::vector<int>{0, 2})) << "the odd copy of rank 1 is no source, its node peer is";
  EXPECT_EQ(sources(2), (std::vector<int>{2, 0}));
  EXPECT_EQ(sources(3), (std::vector<int>{2, 0})) << "the hung rank's node peer first";
  EXPECT_EQ(plan.ranks[0].sources[0].tiers, (std::vector<std::string>{"arena", "local"}));
  EXPECT_EQ(plan.ranks[0].sources[0].node, "n0");
  proto::RestorePlan again = plan;
  again.version = 9;
  again.unix_ms = 1;
  EXPECT_TRUE(SamePlanContent(plan, again));
  again.ranks[0].sources[0].tiers.pop_back();
  EXPECT_FALSE(SamePlanContent(plan, again));
}

TEST(CkptVerifyTest, PlanListsAtMostKMaxPlanSources) {
  std::vector<proto::CkptCopy> copies;
  for (int r = 0; r < 8; ++r) copies.push_back(Copy(r, 7));
  Topology t = Grid(1, 8, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  proto::RestorePlan plan = BuildPlan(j, t, false, [](int r) { return "n" + std::to_string(r / 2); });
  ASSERT_EQ(plan.ranks.size(), 8u);
  ASSERT_EQ(plan.ranks[5].sources.size(), kMaxPlanSources);
  EXPECT_EQ(plan.ranks[5].sources[0].rank, 5);
  EXPECT_EQ(plan.ranks[5].sources[1].rank, 4);  // same node n2
  EXPECT_EQ(plan.ranks[5].sources[2].rank, 0);
}

// The source ranks of one rank of a plan, and their tiers.
std::vector<int> SourceRanks(const proto::RestorePlan& plan, int rank) {
  std::vector<int> out;
  for (const proto::RestoreSource& s : plan.ranks.at(static_cast<size_t>(rank)).sources) out.push_back(s.rank);
  return out;
}

// Evicted nodes whose workers are gone (no heartbeat): their memory and disks with them.
EvictedNodes Gone(std::set<std::string> nodes) { return EvictedNodes{std::move(nodes), {}}; }

// tp=1 dp=3, one rank per node (n0, n1, n2). n0 is evicted and gone: its copy goes last for every rank,
// by its remote tier alone; rank 0 (on n0) has no own copy any more and pulls from n1 first.
// Evicting n1 too drops its copy (no remote tier) from every rank's list.
TEST(CkptVerifyTest, EvictedNodesCopiesGoLastByTheirRemoteTierAlone) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7, {"arena", "local", "remote"}), Copy(1, 7, {"arena"}),
                                         Copy(2, 7, {"arena", "remote"})};
  for (proto::CkptCopy& c : copies) c.node = "n" + std::to_string(c.rank);
  Topology t = Grid(1, 3, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  auto node_of = [](int r) { return "n" + std::to_string(r); };

  proto::RestorePlan plan = BuildPlan(j, t, false, node_of, Gone({"n0"}));
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(SourceRanks(plan, 1), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{2, 1, 0}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(plan.ranks[static_cast<size_t>(r)].sources.back().tiers, (std::vector<std::string>{"remote"}))
        << "rank " << r << ": the evicted node's arena and local file are not offered";
  }
  EXPECT_EQ(plan.ranks[0].sources[1].tiers, (std::vector<std::string>{"arena", "remote"}));
  EXPECT_EQ(FirstRankWithoutSource(plan), -1);

  plan = BuildPlan(j, t, false, node_of, Gone({"n0", "n1"}));
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{2, 0}));
  EXPECT_EQ(SourceRanks(plan, 1), (std::vector<int>{2, 0})) << "n1's arena-only copy is gone with n1";
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{2, 0}));

  // n0 evicted but its worker still serving (not replaced yet): its copy is still last for
  // every rank, with every tier it has.
  plan = BuildPlan(j, t, false, node_of, EvictedNodes{{"n0"}, {"n0"}});
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(plan.ranks[2].sources.back().tiers, (std::vector<std::string>{"arena", "local", "remote"}));

  // Nothing evicted: the order of before (own, then the others by rank).
  plan = BuildPlan(j, t, false, node_of);
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{2, 0, 1}));
}

// Every copy of the shard on an evicted node without a remote tier: once its worker is gone
// the plan has a rank with no source, which the master never publishes (an older step, or
// none); while it serves, its arena is the last resort.
TEST(CkptVerifyTest, ShardHeldOnlyInEvictedMemoryLeavesARankWithoutSource) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 7)};  // both on n0, arena only
  Topology t = Grid(1, 2, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  proto::RestorePlan plan = BuildPlan(j, t, false, [](int r) { return "n" + std::to_string(r / 2); }, Gone({"n0"}));
  EXPECT_TRUE(plan.ranks[0].sources.empty());
  EXPECT_EQ(FirstRankWithoutSource(plan), 0);
  plan = BuildPlan(j, t, false, [](int r) { return "n" + std::to_string(r / 2); }, EvictedNodes{{"n0"}, {"n0"}});
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(FirstRankWithoutSource(plan), -1);
}

// tp=1 dp=4, one rank per node; n2 and n3 are evicted (their ranks hung before saving): ranks
// 2 and 3 both pull the one shard from n0 and n1 — rank 2 starting on n0, rank 3 on n1.
TEST(CkptVerifyTest, PullingRanksOfAShardStartOnDifferentReplicas) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 7)};
  for (proto::CkptCopy& c : copies) c.node = "n" + std::to_string(c.rank);
  Topology t = Grid(1, 4, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  auto node_of = [](int r) { return "n" + std::to_string(r); };
  proto::RestorePlan plan = BuildPlan(j, t, false, node_of, Gone({"n2", "n3"}));
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(SourceRanks(plan, 1), (std::vector<int>{1, 0}));
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{0, 1})) << "first pulling rank: rotated by 0";
  EXPECT_EQ(SourceRanks(plan, 3), (std::vector<int>{1, 0})) << "second pulling rank: rotated by 1";
  // Not evicted, merely without a copy of their own (hung before saving): the same spread.
  EXPECT_EQ(BuildPlan(j, t, false, node_of), plan);
}

// tp=2 dp=3 (tp-dp-pp: rank = tp + 2 dp), two ranks per node: n0 {0,1}, n1 {2,3}, n2 {4,5}.
// n2 is evicted: rank 4 (shard tp=0, ordinal 0) starts on n0, rank 5 (shard tp=1, ordinal 1)
// on n1 — the replacement node's two pulls go to two different nodes. Its own copies, with a
// remote tier, come last.
TEST(CkptVerifyTest, PullsOfNeighbouringShardsStartOnDifferentNodes) {
  std::vector<proto::CkptCopy> copies;
  for (int r = 0; r < 6; ++r) {
    copies.push_back(Copy(r, r % 2 == 0 ? 0xa0 : 0xb1, r >= 4 ? std::vector<std::string>{"arena", "remote"}
                                                               : std::vector<std::string>{"arena"}));
  }
  Topology t = Grid(2, 3, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  proto::RestorePlan plan = BuildPlan(j, t, false, [](int r) { return "n" + std::to_string(r / 2); }, Gone({"n2"}));
  EXPECT_EQ(SourceRanks(plan, 4), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(SourceRanks(plan, 5), (std::vector<int>{3, 1, 5}));
  EXPECT_EQ(plan.ranks[4].sources[0].node, "n0");
  EXPECT_EQ(plan.ranks[5].sources[0].node, "n1");
  EXPECT_EQ(plan.ranks[5].sources[2].tiers, (std::vector<std::string>{"remote"}));
  EXPECT_EQ(SourceRanks(plan, 0), (std::vector<int>{0, 2, 4})) << "healthy ranks: own first, no rotation";
  EXPECT_EQ(SourceRanks(plan, 3), (std::vector<int>{3, 1, 5}));
}

// A rank whose membership moved to another node (relaunched elsewhere) no longer counts the
// copy it left behind as its own: it pulls, and that copy is one replica among others.
TEST(CkptVerifyTest, ACopyLeftOnAnotherNodeIsNotTheRanksOwn) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 7), Copy(2, 7)};
  for (proto::CkptCopy& c : copies) c.node = "n" + std::to_string(c.rank);
  Topology t = Grid(1, 3, 1);
  StepJudgement j = JudgeStep(100, copies, t, false, 5);
  ASSERT_TRUE(j.restorable);
  proto::RestorePlan plan = BuildPlan(j, t, false, [](int r) { return r == 2 ? "n9" : "n" + std::to_string(r); });
  EXPECT_EQ(SourceRanks(plan, 2), (std::vector<int>{0, 1, 2})) << "its old copy on n2 is a peer now, not first";
  EXPECT_EQ(SourceRanks(plan, 1), (std::vector<int>{1, 0, 2}));
}


// ---- buddy copies (ftworker/prefetch/replicator.h) -------------------------------------------

// Rank `rank`'s bytes held on `holder` as a buddy copy.
proto::CkptCopy Buddy(int rank, uint64_t digest, const std::string& holder) {
  proto::CkptCopy c = Copy(rank, digest, {"replica"});
  c.node = holder;
  c.buddy = true;
  return c;
}

// A buddy copy is the same bytes as its rank's own copy: one vote per rank. Counted as a second
// replica, rank 1's corrupted bytes would outvote rank 0's honest ones 2 to 1 and name rank 0
// as SDC.
TEST(CkptVerifyTest, ABuddyCopyIsNoSecondVote) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Copy(1, 9), Buddy(1, 9, "n5")};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), false, 5);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kUntrusted) << j.verdict.why;
  EXPECT_TRUE(j.sdc.empty()) << "rank " << (j.sdc.empty() ? -1 : j.sdc[0].rank) << " named";
  EXPECT_EQ(j.verdict.copies, 2);
  EXPECT_EQ(j.reported, 2);
  EXPECT_TRUE(j.every_replica_reported);
  // Three replicas, rank 2 odd, rank 0's buddy copy in: the majority is 2 of 3 ranks, rank 2
  // is the one sdc finding, on its own node; the buddy copy is a holder of the accepted bytes.
  copies = {Copy(0, 7), Buddy(0, 7, "n4"), Copy(1, 7), Copy(2, 9), Buddy(2, 9, "n5")};
  j = JudgeStep(100, copies, Grid(1, 3, 1), false, 5);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified) << j.verdict.why;
  ASSERT_EQ(j.sdc.size(), 1u);
  EXPECT_EQ(j.sdc[0].rank, 2);
  EXPECT_EQ(j.sdc[0].node, "n1");
  EXPECT_EQ(j.sdc[0].agreeing, 2);
  const ShardCheck& shard = j.shards.begin()->second;
  EXPECT_EQ(shard.copies, 3);
  ASSERT_EQ(shard.holders.size(), 3u);
  EXPECT_EQ(shard.holders[1]->node, "n4");
  EXPECT_TRUE(shard.holders[1]->buddy);
  EXPECT_TRUE(j.verdict.Has(proto::VerdictReason::kBuddyCopies)) << j.verdict.why;
  EXPECT_NE(j.verdict.why.find("2 buddy copies"), std::string::npos) << "how many: " << j.verdict.why;
}

// A rank whose own copy is gone (dead before it could save, its node lost) is reported through
// its buddy copy: the shard has a source, and with a sharded optimizer the step is complete.
TEST(CkptVerifyTest, ABuddyCopyStandsInForAMissingOwnCopy) {
  std::vector<proto::CkptCopy> copies = {Copy(0, 7), Buddy(1, 9, "n3")};
  StepJudgement j = JudgeStep(100, copies, Grid(1, 2, 1), /*sharded=*/true, 5);
  EXPECT_TRUE(j.restorable) << j.verdict.why;
  EXPECT_TRUE(j.every_replica_reported);
  EXPECT_EQ(j.verdict.state, proto::VerdictState::kVerified);
  copies.pop_back();
  EXPECT_EQ(JudgeStep(100, copies, Grid(1, 2, 1), true, 5).verdict.state, proto::VerdictState::kIncomplete)
      << "without the buddy copy rank 1's shard has none";
}

// BuildPlan lists buddy copies as sources: after the rank's own copy, on their holder's node;
// a rank relaunched on its buddy's node reads the buddy copy first (no network).
TEST(CkptVerifyTest, PlanListsBuddyCopiesAsSources) {
  // Sharded tp=1 dp=4 on n0 {0,1}, n1 {2,3}; n1 holds buddy copies of n0's ranks, n0 of n1's.
  std::vector<proto::CkptCopy> copies = {Copy(0, 10), Copy(1, 11), Copy(2, 12), Copy(3, 13),
                                         Buddy(0, 10, "n1"), Buddy(1, 11, "n1"), Buddy(2, 12, "n0")};
  Topology t = Grid(1, 4, 1);
  StepJudgement j = JudgeStep(100, copies, t, true, 5);
  ASSERT_TRUE(j.restorable) << j.verdict.why;
  proto::RestorePlan plan = BuildPlan(j, t, true, [](int r) { return "n" + std::to_string(r / 2); });
  ASSERT_EQ(plan.ranks.size(), 4u);
  auto where = [&](int rank) {
    std::vector<std::string> out;
    for (const proto::RestoreSource& s : plan.ranks[static_cast<size_t>(rank)].sources) {
      out.push_back(std::to_string(s.rank) + "@" + s.node + ":" + s.tiers.front());
    }
    return out;
  };
  EXPECT_EQ(where(0), (std::vector<std::string>{"0@n0:arena", "0@n1:replica"}));
  EXPECT_EQ(where(2), (std::vector<std::string>{"2@n1:arena", "2@n0:replica"}));
  EXPECT_EQ(where(3), (std::vector<std::string>{"3@n1:arena"}));
  // n0 lost (evicted, its worker gone): rank 1 relaunched on n1 reads its buddy copy there.
  plan = BuildPlan(j, t, true, [](int r) { return r < 2 ? "n1" : "n" + std::to_string(r / 2); }, Gone({"n0"}));
  EXPECT_EQ(where(1), (std::vector<std::string>{"1@n1:replica"}));
  EXPECT_EQ(where(2), (std::vector<std::string>{"2@n1:arena"})) << "its buddy copy went with n0";
  EXPECT_EQ(FirstRankWithoutSource(plan), -1);
  // Without the buddy copies, n0's ranks would have no source left.
  std::vector<proto::CkptCopy> own_only(copies.begin(), copies.begin() + 4);
  StepJudgement bare = JudgeStep(100, own_only, t, true, 5);
  EXPECT_EQ(FirstRankWithoutSource(BuildPlan(bare, t, true, [](int) { return "n1"; }, Gone({"n0"}))), 0);
}

}  // namespace
}  // namespace ft::master
