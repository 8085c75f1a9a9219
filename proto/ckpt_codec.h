// Checkpoint values in Redis (docs/redis-schema.md, "Checkpoints"): what a worker reports per
// (step, rank) copy, the master's verdict per step, and the restore plan. JSON, versioned
// ("v":1), decoded defensively like proto/codec.h (same limits, kCorrupt naming the field,
// kUnsupported for another version). Digests travel as 16 lowercase hex digits.
//
//   ft:{J}:ckpt:steps          sorted set: member = step (decimal), score = step
//   ft:{J}:ckpt:<step>         hash: rank -> CkptCopy (written by the rank's worker)
//   ft:{J}:ckpt:<step>:buddy   hash: rank -> CkptCopy with buddy=true (written by the worker of
//                              the node holding a buddy copy of that rank: node = the holder)
//   ft:{J}:ckpt:verdicts       hash: step -> StepVerdict (written by the master)
//   ft:{J}:restore             string: RestorePlan (written by the master)
//   ft:{J}:restore:version     string: RestorePlan.version (cheap to poll)
#ifndef FT_PROTO_CKPT_CODEC_H_
#define FT_PROTO_CKPT_CODEC_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/names.h"
#include "common/status.h"

namespace ft::proto {

// One rank's committed copy of one step, and where it is held on its node.
struct CkptCopy {
  int64_t step = -1;
  int rank = -1;
  std::string node;
  int tp = -1, pp = -1, dp = -1;  // from the manifest; -1 unknown (the master's topology says)
  uint64_t digest = 0;            // ft::ckpt::ContentDigest
  bool torn = false;
  // A buddy copy (ftworker/prefetch/replicator.h): the rank's bytes pulled onto `node`, another node
  // than the rank's, tiers ["replica"]. The same bytes as the rank's own copy: one vote, more
  // sources. Encoded only when true.
  bool buddy = false;
  std::string origin;             // what took it: "periodic", "just-in-time", "termination"; "" unknown
  uint64_t bytes = 0;             // data bytes
  std::vector<std::string> tiers; // "arena", "local", "remote": where a committed copy is now
  std::string error;              // the last persist failure, e.g. "local: No space left on device"
  int64_t unix_ms = 0;            // when the worker last reported it
  // When the rank saved it (the manifest's creation time, the rank's node clock); 0: unknown (a
  // worker from before it), then unix_ms stands in. Tells which run of the job a copy is of
  // (CkptRewind). Encoded only when known.
  int64_t saved_unix_ms = 0;
  bool operator==(const CkptCopy&) const = default;
};

// Where the job's training went back: a launch that began from `step` (-1: from scratch) at
// `unix_ms` (the relaunched processes' start, or the clean end of the run before it). A copy of
// a step newer than `step` saved before `unix_ms` is of the run the job left: its step number
// may come again with other bytes, so it is never judged or planned again.
struct CkptRewind {
  int64_t step = -1;
  int64_t unix_ms = 0;
  std::string why;  // for people: "the job finished", "a relaunch restored step 30"
  bool operator==(const CkptRewind&) const = default;
};

// ft:{J}:ckpt:rewinds: the newest rewinds, oldest first (at most kMaxCkptRewinds).
inline constexpr size_t kMaxCkptRewinds = 16;
struct CkptRewinds {
  std::vector<CkptRewind> rewinds;
  bool operator==(const CkptRewinds&) const = default;
};

// Why a step got its verdict: one code per part of StepVerdict::why (the words are for people
// and may change; programs and tests compare these). Written as VerdictReasonName, read back by
// ParseVerdictReason. The list grows: a reader drops a name it does not know (a newer master's)
// instead of refusing the verdict, whose state and counts it still needs.
enum class VerdictReason : uint8_t {
  kTopologyUnknown,       // no grid: the shards cannot be named, no copy can be checked
  kAccepted,              // every shard has an accepted digest (the step is restorable)
  kReplicasDisagree,      // a shard's copies disagree with no strict majority (untrusted)
  kShardsMissing,         // a shard has no copy
  kNoSourceLeft,          // a shard's accepted copies are held by no tier any more
  kSilentDataCorruption,  // a majority accepted; the odd copies are sdc_ranks
  kSingleCopy,            // a shard accepted from one copy, not cross-checked
  kShardedOptimizer,      // every rank is its own shard: nothing to compare
  kBuddyCopies,           // buddy copies counted as sources, not votes
  kTornIgnored,           // torn copies did not count
  kOutsideTopology,       // copies the topology has no place for were ignored
  kPartialReport,         // judged before every replica reported (a deadline, or the save's acks)
  kSuperseded,            // copies of a run the job left (a later relaunch went back) were ignored
};
inline constexpr Named<VerdictReason> kVerdictReasonNames[] = {
    {VerdictReason::kTopologyUnknown, "topology-unknown"}, {VerdictReason::kAccepted, "accepted"},
    {VerdictReason::kReplicasDisagree, "replicas-disagree"},
    {VerdictReason::kShardsMissing, "shards-missing"}, {VerdictReason::kNoSourceLeft, "no-source-left"},
    {VerdictReason::kSilentDataCorruption, "sdc"}, {VerdictReason::kSingleCopy, "single-copy"},
    {VerdictReason::kShardedOptimizer, "sharded-optimizer"}, {VerdictReason::kBuddyCopies, "buddy-copies"},
    {VerdictReason::kTornIgnored, "torn-ignored"}, {VerdictReason::kOutsideTopology, "outside-topology"},
    {VerdictReason::kPartialReport, "partial-report"}, {VerdictReason::kSuperseded, "superseded"}};
inline constexpr auto kVerdictReasons = ValuesIn(kVerdictReasonNames);

constexpr const char* VerdictReasonName(VerdictReason r) { return NameIn(kVerdictReasonNames, r); }
constexpr std::optional<VerdictReason> ParseVerdictReason(std::string_view name) {
  return ParseIn(kVerdictReasonNames, name);
}

// A step's verdict (StepVerdict::state): written as VerdictStateName, read back by
// ParseVerdictState; the codec refuses a name it does not know (a step is restored only from a
// state this build understands).
enum class VerdictState : uint8_t {
  kVerified,    // every shard of the topology has an accepted digest: the step is restorable
  kUntrusted,   // a shard's copies disagree with no strict majority: the step is skipped
  kIncomplete,  // a shard has no copy, no tier holds one any more, or the topology is unknown
};
inline constexpr Named<VerdictState> kVerdictStateNames[] = {
    {VerdictState::kVerified, "verified"}, {VerdictState::kUntrusted, "untrusted"},
    {VerdictState::kIncomplete, "incomplete"}};
inline constexpr auto kVerdictStates = ValuesIn(kVerdictStateNames);

constexpr const char* VerdictStateName(VerdictState s) { return NameIn(kVerdictStateNames, s); }
constexpr std::optional<VerdictState> ParseVerdictState(std::string_view name) {
  return ParseIn(kVerdictStateNames, name);
}

// The master's judgement of one step's set of copies.
struct StepVerdict {
  int64_t step = -1;
  VerdictState state = VerdictState::kIncomplete;
  int shards = 0;                 // model shards of the topology
  int verified_shards = 0;        // shards with an accepted digest
  int copies = 0;                 // non-torn copies seen
  std::vector<int> sdc_ranks;     // odd replicas out (an sdc incident names each)
  std::string why;                // for people
  std::vector<VerdictReason> reasons;  // the codes of why's parts, in its order
  int64_t unix_ms = 0;
  bool operator==(const StepVerdict&) const = default;
  bool Has(VerdictReason r) const { return std::find(reasons.begin(), reasons.end(), r) != reasons.end(); }
};

struct RestoreSource {
  int rank = -1;
  std::string node;
  std::vector<std::string> tiers;
  bool operator==(const RestoreSource&) const = default;
};

struct RestoreRank {
  int rank = -1;
  uint64_t digest = 0;
  std::vector<RestoreSource> sources;  // verified copies of its shard, its own first
  bool operator==(const RestoreRank&) const = default;
};

// The one step every rank restores (never a mix), with verified sources per rank.
struct RestorePlan {
  int64_t version = 0;            // bumped at every change
  int64_t step = -1;              // -1: no verified checkpoint
  std::vector<RestoreRank> ranks; // by rank
  int64_t unix_ms = 0;
  // Empty: final — what a relaunch restores. Otherwise the plan is settling and this says why
  // (an incident's saves under way, a teardown's copies not all reported, a newer step waiting
  // for its replicas): a rank starting now waits for the final plan (`state` in the JSON).
  std::string settling;
  // Per node, the newest end of one of its ranks (a crash, a kill, a teardown) the master had
  // heard of when it read the copies this plan is built on: the Membership.unix_ms of the
  // ended rank, in that node's own clock (compared only with that node's own times). A worker
  // whose rank ended later keeps its plan file settling until the master echoes the end: the
  // copies the rank saved on its way out are then in the plan's reckoning.
  std::map<std::string, int64_t> ends_seen;
  bool operator==(const RestorePlan&) const = default;
};

std::string Encode(const CkptCopy& value);
std::string Encode(const StepVerdict& value);
std::string Encode(const RestorePlan& value);
std::string Encode(const CkptRewinds& value);
Status Decode(std::string_view json, CkptCopy* out);
Status Decode(std::string_view json, StepVerdict* out);
Status Decode(std::string_view json, RestorePlan* out);
Status Decode(std::string_view json, CkptRewinds* out);

}  // namespace ft::proto

#endif  // FT_PROTO_CKPT_CODEC_H_
