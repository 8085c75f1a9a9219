// How much a node's history says against it: the lemon score `ftmaster nodes` sorts by
// (docs/nodes.md). Pure: no Redis, no clock (the caller passes `now`).
//
//   weight of a record      evicted 4, hardware (critical) 3, crash 2 / n, suspect 1.5 / n,
//                           slow 1 / n — n: the nodes the incident named as suspects, so one
//                           suspect among many weighs little; cordons weigh nothing (an
//                           operator's act, not the node's)
//   decayed                 weight x 0.5 ^ (age / half-life); a record from the future (another
//                           host's clock ahead) counts as of now
//   one incident            per record kind, its heaviest record (the same incident seen twice —
//                           a rewrite after a master's takeover — or with several signals counts
//                           once), summed over kinds: a hang that evicted is 1.5 + 4. One signal
//                           carried by several incidents of a job (a `hardware` incident, then
//                           the crash it explains) counts with the heaviest of them only
//   one job                 its incidents' values, largest first, the k-th (from 0) divided by
//                           k + 1: a job that trips over the node again and again may be the
//                           job's own fault, so its repeats add less and less
//   score                   the sum over jobs: the same trouble in distinct jobs counts in full
// A node whose score reaches kLemonThreshold is a lemon: an eviction with a hardware signal, or
// evictions in two jobs, within about a half-life.
#ifndef FT_FTMASTER_CORE_LEMON_SCORE_H_
#define FT_FTMASTER_CORE_LEMON_SCORE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/node_history.h"

namespace ft::master {

inline constexpr double kLemonThreshold = 6.0;

struct LemonOptions {
  int64_t half_life_ms = int64_t{7} * 86'400'000;  // FT_LEMON_HALF_LIFE
};

// A record's weight before decay (the table above).
double RecordWeight(const proto::NodeRecord& record);

// The score of one node's records (any order, duplicates allowed) at `now_unix_ms`.
double LemonScore(const std::vector<proto::NodeRecord>& records, int64_t now_unix_ms, const LemonOptions& options);

// One node as `ftmaster nodes` shows it.
struct NodeStanding {
  std::string node;
  double score = 0;
  bool lemon = false;                                       // score >= kLemonThreshold
  std::array<size_t, proto::kNodeRecordKindCount> counts{};  // by kind (NodeRecordKind's value)
  std::vector<std::string> jobs;                            // distinct, newest record first
  std::optional<proto::NodeRecord> last;                    // the newest record (of one moment, the heaviest)
  std::vector<proto::NodeRecord> records;                   // without duplicates, newest first
  size_t duplicates = 0;  // records that repeat one kept (same job, incident, kind and detail)
};

// The standing of `node` from its records (any order).
NodeStanding Assess(std::string node, std::vector<proto::NodeRecord> records, int64_t now_unix_ms,
                    const LemonOptions& options);

// Worst first: by score, then the newest last record, then the name.
void SortWorstFirst(std::vector<NodeStanding>* nodes);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_LEMON_SCORE_H_
