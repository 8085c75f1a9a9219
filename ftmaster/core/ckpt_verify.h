// Cross-replica verification of one checkpoint step, and the restore plan built from it. Pure
// logic over proto/ckpt_codec.h values: the copies the workers reported for a step and the
// topology in, a verdict out. No Redis, no clock (the caller passes unix_ms).
//
// Rules (docs/checkpoints.md, "Verification and the restore plan"):
//   - A copy's shard is its (tp, pp) when both are >= 0, else the topology's coordinate of its
//     rank. With a sharded optimizer every (tp, pp, dp) is its own shard (nothing to compare).
//     Copies outside the topology are ignored (said in `why`).
//   - Torn copies never count.
//   - Per shard: no copy → missing; one copy → accepted ("single copy, not cross-checked");
//     all digests equal → verified; three or more with a strict majority digest → the majority
//     is accepted and each other copy's rank is an sdc rank; otherwise (two that disagree, or
//     no strict majority) → the shard, and so the step, is untrusted.
//   - The step is restorable when every shard of the topology is accepted, none is untrusted,
//     and every shard has a source left (a copy some tier still holds).
//   - Verdict state: "untrusted" when a shard is untrusted, else "verified" when restorable,
//     else "incomplete".
//   - The judgement says whether every replica reported (every_replica_reported): the caller
//     judges for good only then or at a deadline, never on whichever copy arrives first.
#ifndef FT_FTMASTER_CKPT_VERIFY_H_
#define FT_FTMASTER_CKPT_VERIFY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "ftmaster/core/topology.h"
#include "proto/ckpt_codec.h"

namespace ft::master {

// (tp, pp, dp); dp is -1 unless the optimizer is sharded.
struct ShardId {
  int tp = 0, pp = 0, dp = -1;
  auto operator<=>(const ShardId&) const = default;
};

struct ShardCheck {
  enum class State { kMissing, kAccepted, kUntrusted };
  State state = State::kMissing;
  uint64_t digest = 0;               // the accepted digest
  int copies = 0;                    // non-torn copies
  int agreeing = 0;                  // copies with the accepted digest
  std::vector<const proto::CkptCopy*> holders;  // copies with the accepted digest, by rank
};

struct SdcFinding {
  int rank = -1;
  std::string node;
  uint64_t digest = 0;     // what the odd copy holds
  uint64_t majority = 0;   // what its replicas agree on
  int agreeing = 0;        // how many replicas agree
  ShardId shard;
};

struct StepJudgement {
  proto::StepVerdict verdict;
  bool restorable = false;
  // Every replica the topology has of every shard reported a copy (torn ones count: they
  // will not come again). Until then a verdict is provisional: the master waits for the rest
  // or a deadline before it writes one (a copy judged alone was never compared).
  bool every_replica_reported = false;
  int reported = 0;   // ranks of the topology with a copy, torn included (one copy per rank)
  int expected = 0;   // replicas the topology has: world size
  std::map<ShardId, ShardCheck> shards;  // every shard of the topology
  std::vector<SdcFinding> sdc;           // by rank
};

// `copies` must outlive the judgement (holders point into it).
StepJudgement JudgeStep(int64_t step, std::span<const proto::CkptCopy> copies, const Topology& topology,
                        bool sharded_optimizer, int64_t unix_ms);

// The shard a rank restores from.
ShardId ShardOfRank(int rank, const Topology& topology, bool sharded_optimizer);

// The nodes in ft:{J}:evicted, and those of them whose worker still serves (its heartbeat key
// is alive): an evicted node is being replaced, and its memory is gone once it is.
struct EvictedNodes {
  std::set<std::string> nodes;
  std::set<std::string> serving;  // a subset of nodes
  bool operator==(const EvictedNodes&) const = default;
};

// The plan for a restorable step: per rank of the topology, its shard's accepted digest and
// the copies holding it (only those some tier still holds), in the order a restore tries them
// (docs/checkpoints.md, "The order of a rank's sources"):
//   1. its own copy, when it is on the rank's node (`node_of(rank)`, "" unknown) and that node
//      is not evicted;
//   2. copies on the rank's node (same-node arenas and local files: no network);
//   3. copies on other nodes that are not evicted, by rank — for a rank that must pull (no
//      copy under 1.) rotated left by (s + k) mod n: s the shard's ordinal in the topology,
//      k the rank's index among its shard's pulling ranks, n the number of such copies; so the
//      pulling ranks of one shard, and those of neighbouring shards, start on different
//      replicas instead of all on the first;
//   4. copies on evicted nodes, by rank: with all their tiers while the node's worker still
//      serves, by their `remote` tier alone once it is gone (its memory and local disk went
//      with it), and not at all without one.
// At most kMaxPlanSources of them (with dp=128 every rank listing every replica would make a
// 16k-rank plan ~100 MB; a restore reads one source and falls back to the next). A rank whose
// every copy was on gone evicted nodes without a remote tier has no source
// (FirstRankWithoutSource). `version` and `unix_ms` are the caller's.
inline constexpr size_t kMaxPlanSources = 4;
proto::RestorePlan BuildPlan(const StepJudgement& judged, const Topology& topology,
                             bool sharded_optimizer, const std::function<std::string(int)>& node_of,
                             const EvictedNodes& evicted = {});

// The first rank of `plan` with no source, or -1: a plan that cannot be restored as a whole.
int FirstRankWithoutSource(const proto::RestorePlan& plan);

// The plan with no checkpoint (step -1, no ranks).
proto::RestorePlan NoPlan();

// Plans are compared without their version and time: a republish only when something else moved
// (the step, the ranks' sources, whether it is settling and why, the ends it echoes).
bool SamePlanContent(const proto::RestorePlan& a, const proto::RestorePlan& b);

}  // namespace ft::master

#endif  // FT_FTMASTER_CKPT_VERIFY_H_
