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

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  // A buddy copy (ftworker/replicator.h): the rank's bytes pulled onto `node`, another node
  // than the rank's, tiers ["replica"]. The same bytes as the rank's own copy: one vote, more
  // sources. Encoded only when true.
  bool buddy = false;
  std::string origin;             // what took it: "periodic", "just-in-time", "termination"; "" unknown
  uint64_t bytes = 0;             // data bytes
  std::vector<std::string> tiers; // "arena", "local", "remote": where a committed copy is now
  std::string error;              // the last persist failure, e.g. "local: No space left on device"
  int64_t unix_ms = 0;
  bool operator==(const CkptCopy&) const = default;
};

// The master's judgement of one step's set of copies.
struct StepVerdict {
  int64_t step = -1;
  std::string state;              // "verified", "untrusted" (replicas disagree), "incomplete"
  int shards = 0;                 // model shards of the topology
  int verified_shards = 0;        // shards with an accepted digest
  int copies = 0;                 // non-torn copies seen
  std::vector<int> sdc_ranks;     // odd replicas out (an sdc incident names each)
  std::string why;                // for people
  int64_t unix_ms = 0;
  bool operator==(const StepVerdict&) const = default;
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
  bool operator==(const RestorePlan&) const = default;
};

std::string Encode(const CkptCopy& value);
std::string Encode(const StepVerdict& value);
std::string Encode(const RestorePlan& value);
Status Decode(std::string_view json, CkptCopy* out);
Status Decode(std::string_view json, StepVerdict* out);
Status Decode(std::string_view json, RestorePlan* out);

}  // namespace ft::proto

#endif  // FT_PROTO_CKPT_CODEC_H_
