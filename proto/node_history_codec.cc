#include "proto/node_history_codec.h"

#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

// Room for any real job: 131,072 ranks, nodes of one or more ranks.
constexpr int kMaxRank = 1 << 24;

const auto kNodeRecordFields = [](auto& io, auto& v) {
  io.Name("kind", v.kind, "node record kind", ParseNodeRecordKind, kNodeRecordKinds, NodeRecordKindName);
  io.Str("node", v.node, Need::kRequired, Empty::kRejected);
  io.Str("job", v.job, Need::kOptional);
  io.If(!v.incident.empty()).Str("incident", v.incident, Need::kOptional);
  io.If(!v.incident_kind.empty()).Str("incident_kind", v.incident_kind, Need::kOptional);
  io.Int("unix_ms", v.unix_ms, Need::kRequired, 0);
  io.If(v.rank >= 0).Int("rank", v.rank, Need::kOptional, -1, kMaxRank);
  io.Int("nodes", v.nodes, Need::kOptional, 1, kMaxRank);
  io.If(!v.detail.empty()).Str("detail", v.detail, Need::kOptional);
};

const auto kCordonFields = [](auto& io, auto& c) {
  io.Str("node", c.node, Need::kRequired, Empty::kRejected);
  io.Str("reason", c.reason, Need::kRequired, Empty::kRejected);
  io.Int("unix_ms", c.unix_ms, Need::kRequired, 0);
  io.Int("until_unix_ms", c.until_unix_ms, Need::kOptional, 0);
  io.If(!c.by.empty()).Str("by", c.by, Need::kOptional);
};

}  // namespace

// --- NodeRecord ---------------------------------------------------------------------------

std::string Encode(const NodeRecord& r) { return EncodeFields(r, kNodeRecordFields); }

Status Decode(std::string_view json, NodeRecord* out) {
  return DecodeValue(json, out, [](const Reader& r, NodeRecord* v) -> Status {
    FT_RETURN_IF_ERROR(FieldReader::Read(r, *v, kNodeRecordFields));
    const bool operator_record = v->kind == NodeRecordKind::kCordon || v->kind == NodeRecordKind::kUncordon;
    if (!operator_record && (v->job.empty() || v->incident.empty())) {
      return Status::Corrupt(r.Path(v->job.empty() ? "job" : "incident") + ": missing (required in records of kind '" +
                             NodeRecordKindName(v->kind) + "')");
    }
    return Status::Ok();
  });
}

// --- CordonEntry --------------------------------------------------------------------------

std::string Encode(const CordonEntry& c) { return EncodeFields(c, kCordonFields); }

Status Decode(std::string_view json, CordonEntry* out) { return DecodeFields(json, out, kCordonFields); }

}  // namespace ft::proto
