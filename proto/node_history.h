// What ft remembers about a node across jobs (docs/nodes.md, docs/redis-schema.md "Across
// jobs"): the node's history — incidents it was a suspect in, its evictions and their
// reasons, crashes, slow episodes, critical hardware signals, an operator's cordons — and the
// cluster-wide cordons. These keys live outside every job's slot (proto::Keys::NodeHistory,
// NodesIndex, Cordons), so a record outlives the job that wrote it.
//
// Plain data, header-only (ftmaster/core scores a node's history from these structs without
// linking the codec); proto/node_history_codec.h turns them into JSON and parses foreign bytes
// back defensively. The record kinds are an enum here, written as NodeRecordKindName and read
// back by ParseNodeRecordKind; the codec refuses a name it does not know.
#ifndef FT_PROTO_NODE_HISTORY_H_
#define FT_PROTO_NODE_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/names.h"

namespace ft::proto {

// What happened to the node (NodeRecord::kind; the stream entry's `kind` field).
enum class NodeRecordKind : uint8_t {
  kSuspect,   // a suspect of an incident (hang, host-frozen, transport-hang, sdc): `nodes` says
              // how many nodes the incident named in all
  kCrash,     // a rank of the node crashed or exited with a failing status (a crash incident)
  kSlow,      // a slow episode: a straggler or slow-link incident naming the node (its
              // eviction for slowness is a straggler incident too, with an kEvicted beside it)
  kEvicted,   // the job evicted the node; `detail` is the reason (evicted_why)
  kHardware,  // a critical hardware signal of the node carried by an incident
  kCordon,    // an operator cordoned the node (ftmaster nodes --cordon); `detail` the reason
  kUncordon,  // an operator lifted the cordon
};
inline constexpr Named<NodeRecordKind> kNodeRecordKindNames[] = {
    {NodeRecordKind::kSuspect, "suspect"}, {NodeRecordKind::kCrash, "crash"},
    {NodeRecordKind::kSlow, "slow"}, {NodeRecordKind::kEvicted, "evicted"},
    {NodeRecordKind::kHardware, "hardware"}, {NodeRecordKind::kCordon, "cordon"},
    {NodeRecordKind::kUncordon, "uncordon"}};
inline constexpr auto kNodeRecordKinds = ValuesIn(kNodeRecordKindNames);
inline constexpr size_t kNodeRecordKindCount = sizeof(kNodeRecordKinds) / sizeof(kNodeRecordKinds[0]);

constexpr const char* NodeRecordKindName(NodeRecordKind k) { return NameIn(kNodeRecordKindNames, k); }
constexpr std::optional<NodeRecordKind> ParseNodeRecordKind(std::string_view name) {
  return ParseIn(kNodeRecordKindNames, name);
}

// The longest `detail` a record keeps (a reason, a signal, a suspect's why): longer ones are cut
// by the writer, so a node's history stays small (at most FT_NODE_HISTORY_LEN records of it).
inline constexpr size_t kNodeRecordDetailBytes = 240;

// `text` cut to at most `max_bytes` bytes on a UTF-8 character boundary, ending in "..." when
// cut: what a record keeps of a long reason.
inline std::string CutText(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  constexpr std::string_view kMore = "...";
  size_t keep = max_bytes > kMore.size() ? max_bytes - kMore.size() : 0;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;  // not mid-character
  return std::string(text.substr(0, keep)) + std::string(kMore.substr(0, max_bytes - keep));
}

// One entry of ft:node:{<node>}:history (fields `kind` and `json`).
struct NodeRecord {
  NodeRecordKind kind = NodeRecordKind::kSuspect;
  std::string node;           // the node (equal to the key's)
  std::string job;            // the job whose master wrote it ("" for an operator's cordon)
  std::string incident;       // the incident's id ("" for cordons)
  std::string incident_kind;  // the incident's kind (IncidentKindName), "" for cordons
  int64_t unix_ms = 0;        // when it was decided (the incident's decided_unix_ms)
  int rank = -1;              // the node's first suspect rank in the incident, -1 none
  int nodes = 1;              // nodes the incident named as suspects in all (>= 1)
  std::string detail;         // the reason, the signal, the suspect's why (<= kNodeRecordDetailBytes)

  bool operator==(const NodeRecord&) const = default;
};

// One field of ft:cordon (field = the node): the operator's cordon of a node for every job.
struct CordonEntry {
  std::string node;           // equal to the field
  std::string reason;         // what the scheduler's drain takes as its reason
  int64_t unix_ms = 0;        // when it was set
  int64_t until_unix_ms = 0;  // when it lapses; 0: until lifted (ftmaster nodes --uncordon)
  std::string by;             // who set it (user@host), for people

  bool operator==(const CordonEntry&) const = default;
  // In force at `now`.
  bool Active(int64_t now_unix_ms) const { return until_unix_ms == 0 || now_unix_ms < until_unix_ms; }
};

}  // namespace ft::proto

#endif  // FT_PROTO_NODE_HISTORY_H_
