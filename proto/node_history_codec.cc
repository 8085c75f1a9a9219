#include "proto/node_history_codec.h"

#include "proto/json_codec.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

// Room for any real job: 131,072 ranks, nodes of one or more ranks.
constexpr int kMaxRank = 1 << 24;

}  // namespace

// --- NodeRecord ---------------------------------------------------------------------------

std::string Encode(const NodeRecord& r) {
  OJson j = Versioned();
  j["kind"] = NodeRecordKindName(r.kind);
  j["node"] = r.node;
  j["job"] = r.job;
  if (!r.incident.empty()) j["incident"] = r.incident;
  if (!r.incident_kind.empty()) j["incident_kind"] = r.incident_kind;
  j["unix_ms"] = r.unix_ms;
  if (r.rank >= 0) j["rank"] = r.rank;
  j["nodes"] = r.nodes;
  if (!r.detail.empty()) j["detail"] = r.detail;
  return Dump(j);
}

Status Decode(std::string_view json, NodeRecord* out) {
  return DecodeValue(json, out, [](const Reader& r, NodeRecord* v) -> Status {
    FT_RETURN_IF_ERROR(ReadName(r, "kind", "node record kind", ParseNodeRecordKind, kNodeRecordKinds,
                                NodeRecordKindName, &v->kind));
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &v->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("job", Need::kOptional, &v->job));
    FT_RETURN_IF_ERROR(r.Str("incident", Need::kOptional, &v->incident));
    FT_RETURN_IF_ERROR(r.Str("incident_kind", Need::kOptional, &v->incident_kind));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kRequired, &v->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kOptional, &v->rank, -1, kMaxRank));
    FT_RETURN_IF_ERROR(r.Int("nodes", Need::kOptional, &v->nodes, 1, kMaxRank));
    FT_RETURN_IF_ERROR(r.Str("detail", Need::kOptional, &v->detail));
    const bool operator_record = v->kind == NodeRecordKind::kCordon || v->kind == NodeRecordKind::kUncordon;
    if (!operator_record && (v->job.empty() || v->incident.empty())) {
      return Status::Corrupt(r.Path(v->job.empty() ? "job" : "incident") + ": missing (required in records of kind '" +
                             NodeRecordKindName(v->kind) + "')");
    }
    return Status::Ok();
  });
}

// --- CordonEntry --------------------------------------------------------------------------

std::string Encode(const CordonEntry& c) {
  OJson j = Versioned();
  j["node"] = c.node;
  j["reason"] = c.reason;
  j["unix_ms"] = c.unix_ms;
  j["until_unix_ms"] = c.until_unix_ms;
  if (!c.by.empty()) j["by"] = c.by;
  return Dump(j);
}

Status Decode(std::string_view json, CordonEntry* out) {
  return DecodeValue(json, out, [](const Reader& r, CordonEntry* c) -> Status {
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &c->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("reason", Need::kRequired, &c->reason, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kRequired, &c->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("until_unix_ms", Need::kOptional, &c->until_unix_ms, 0));
    return r.Str("by", Need::kOptional, &c->by);
  });
}

}  // namespace ft::proto
