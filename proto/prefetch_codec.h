// What a worker's prefetch for a replacement node did (docs/redis-schema.md, "Prefetch"): the
// ranks the scheduler starts on its node whose shards it pulled from other nodes before they
// started. JSON, versioned ("v":1), decoded defensively like proto/ckpt_codec.h (same limits,
// kCorrupt naming the field, kUnsupported for another version).
//
//   ft:{J}:prefetch   hash: node -> PrefetchReport (written by that node's worker)
#ifndef FT_PROTO_PREFETCH_CODEC_H_
#define FT_PROTO_PREFETCH_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/names.h"
#include "common/status.h"

namespace ft::proto {

// What became of one rank's prefetch (PrefetchRank::outcome): written as PrefetchOutcomeName,
// read back by ParsePrefetchOutcome; the codec refuses a name it does not know.
enum class PrefetchOutcome : uint8_t {
  kPulled,   // pulled from another node into the prefetch arena
  kKept,     // the prefetch arena already held the planned copy
  kLocal,    // this node already holds a copy: nothing to pull
  kFailed,   // error says why; the rank's restore reads another source
  kRunning,  // not ended yet
};
inline constexpr Named<PrefetchOutcome> kPrefetchOutcomeNames[] = {
    {PrefetchOutcome::kPulled, "pulled"}, {PrefetchOutcome::kKept, "kept"},
    {PrefetchOutcome::kLocal, "local"}, {PrefetchOutcome::kFailed, "failed"},
    {PrefetchOutcome::kRunning, "running"}};
inline constexpr auto kPrefetchOutcomes = ValuesIn(kPrefetchOutcomeNames);

constexpr const char* PrefetchOutcomeName(PrefetchOutcome o) { return NameIn(kPrefetchOutcomeNames, o); }
constexpr std::optional<PrefetchOutcome> ParsePrefetchOutcome(std::string_view name) {
  return ParseIn(kPrefetchOutcomeNames, name);
}

// The planned copy now sits in the rank's prefetch arena (pulled, or kept from before).
inline constexpr bool InPrefetchArena(PrefetchOutcome o) {
  return o == PrefetchOutcome::kPulled || o == PrefetchOutcome::kKept;
}

// A node's prefetch as a whole (PrefetchReport::state): running until every rank has an outcome.
enum class PrefetchState : uint8_t { kRunning, kDone };
inline constexpr Named<PrefetchState> kPrefetchStateNames[] = {
    {PrefetchState::kRunning, "running"}, {PrefetchState::kDone, "done"}};
inline constexpr auto kPrefetchStates = ValuesIn(kPrefetchStateNames);

constexpr const char* PrefetchStateName(PrefetchState s) { return NameIn(kPrefetchStateNames, s); }
constexpr std::optional<PrefetchState> ParsePrefetchState(std::string_view name) {
  return ParseIn(kPrefetchStateNames, name);
}

// One rank of the node.
struct PrefetchRank {
  int rank = -1;
  PrefetchOutcome outcome = PrefetchOutcome::kRunning;
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
  PrefetchState state = PrefetchState::kRunning;
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
