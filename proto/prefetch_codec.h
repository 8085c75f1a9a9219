// What a worker's prefetch for a replacement node did (docs/redis-schema.md, "Prefetch"): the
// ranks the scheduler starts on its node whose shards it pulled from other nodes before they
// started. JSON, versioned ("v":1), decoded defensively like proto/ckpt_codec.h (same limits,
// kCorrupt naming the field, kUnsupported for another version).
//
//   ft:{J}:prefetch   hash: node -> PrefetchReport (written by that node's worker)
#ifndef FT_PROTO_PREFETCH_CODEC_H_
#define FT_PROTO_PREFETCH_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::proto {

// One rank of the node. outcome: "pulled" (from another node into the prefetch arena),
// "kept" (the prefetch arena already held the planned copy), "local" (this node already holds
// a copy: nothing to pull), "failed" (error says why; restore reads another source), "running".
struct PrefetchRank {
  int rank = -1;
  std::string outcome;
  bool ok = false;                 // the rank can restore from this node's memory
  uint64_t bytes = 0;              // pulled
  double seconds = 0;              // this rank's pull, Stat to commit
  std::string source;              // the node most bytes came from ("" when none)
  int source_rank = -1;            // whose copy it was (its manifest's rank)
  std::string transport;           // "tcp", "verbs", "fallback" (the remote directory), joined by '+'
  std::string error;
  bool operator==(const PrefetchRank&) const = default;
};

struct PrefetchReport {
  std::string node;
  int64_t step = -1;               // the planned step
  std::string state;               // "running", "done"
  int64_t started_unix_ms = 0;
  int64_t done_unix_ms = 0;        // 0 while running
  double pull_s = 0;               // started to done: what the node's ranks waited for
  std::vector<PrefetchRank> ranks;
  bool operator==(const PrefetchReport&) const = default;
};

std::string Encode(const PrefetchReport& value);
Status Decode(std::string_view json, PrefetchReport* out);

}  // namespace ft::proto

#endif  // FT_PROTO_PREFETCH_CODEC_H_
