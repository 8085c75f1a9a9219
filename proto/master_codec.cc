#include "proto/master_codec.h"

#include "proto/json_codec.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

// A stream id "<ms>-<seq>": a window's first event.
Status CheckStreamId(const Reader& r, const char* key, const std::string& id) {
  const size_t dash = id.find('-');
  bool ok = dash != std::string::npos && dash > 0 && dash + 1 < id.size();
  for (size_t i = 0; ok && i < id.size(); ++i) ok = i == dash || (id[i] >= '0' && id[i] <= '9');
  if (!ok) return Status::Corrupt(r.Path(key) + ": expected a stream id (<ms>-<seq>)");
  return Status::Ok();
}

}  // namespace

// --- MasterAction ---------------------------------------------------------------------------

std::string Encode(const MasterAction& a) {
  OJson j = Versioned();
  j["incident"] = a.incident;
  j["decision"] = a.decision;
  OJson save = OJson::array();
  for (const SaveTarget& t : a.save) {
    OJson o = OJson::object();
    o["rank"] = t.rank;
    o["node"] = t.node;
    save.push_back(std::move(o));
  }
  j["save"] = std::move(save);
  j["phase"] = a.phase;
  j["sent"] = a.sent;
  j["acks_from"] = a.acks_from;
  j["deadline_unix_ms"] = a.deadline_unix_ms;
  j["nodes"] = a.nodes;
  j["decided_unix_ms"] = a.decided_unix_ms;
  return Dump(j);
}

Status Decode(std::string_view json, MasterAction* out) {
  return DecodeValue(json, out, [](const Reader& r, MasterAction* a) -> Status {
    FT_RETURN_IF_ERROR(r.Str("incident", Need::kRequired, &a->incident));
    FT_RETURN_IF_ERROR(r.Str("decision", Need::kRequired, &a->decision));
    FT_RETURN_IF_ERROR(r.Objects("save", Need::kOptional, &a->save,
                                 [](const Reader& o, SaveTarget* t) -> Status {
                                   FT_RETURN_IF_ERROR(o.Int("rank", Need::kRequired, &t->rank, -1));
                                   return o.Str("node", Need::kRequired, &t->node);
                                 }));
    FT_RETURN_IF_ERROR(r.Str("phase", Need::kRequired, &a->phase, Empty::kRejected));
    if (a->phase != "save" && a->phase != "stop" && a->phase != "done") {
      return Status::Corrupt(r.Path("phase") + ": unknown phase '" + a->phase.substr(0, 16) +
                             "' (save, stop, done)");
    }
    FT_RETURN_IF_ERROR(r.Bool("sent", Need::kRequired, &a->sent));
    FT_RETURN_IF_ERROR(r.Str("acks_from", Need::kRequired, &a->acks_from));
    FT_RETURN_IF_ERROR(r.Int("deadline_unix_ms", Need::kRequired, &a->deadline_unix_ms));
    FT_RETURN_IF_ERROR(r.List("nodes", Need::kOptional, &a->nodes,
                              [](Elem e, const FieldPath& path, std::string* s) {
                                return CheckStr(e, path, s);
                              }));
    return r.Int("decided_unix_ms", Need::kRequired, &a->decided_unix_ms);
  });
}

// --- OpenIncident ---------------------------------------------------------------------------

std::string Encode(const OpenIncident& o) {
  OJson j = Versioned();
  j["first_event_id"] = o.first_event_id;
  j["first_event_unix_ms"] = o.first_event_unix_ms;
  j["opened_unix_ms"] = o.opened_unix_ms;
  j["outcomes"] = o.outcomes;
  j["last_outcome"] = o.last_outcome;
  j["watching"] = o.watching;
  return Dump(j);
}

Status Decode(std::string_view json, OpenIncident* out) {
  return DecodeValue(json, out, [](const Reader& r, OpenIncident* o) -> Status {
    FT_RETURN_IF_ERROR(r.Str("first_event_id", Need::kRequired, &o->first_event_id, Empty::kRejected));
    FT_RETURN_IF_ERROR(CheckStreamId(r, "first_event_id", o->first_event_id));
    FT_RETURN_IF_ERROR(r.Int("first_event_unix_ms", Need::kRequired, &o->first_event_unix_ms));
    FT_RETURN_IF_ERROR(r.Int("opened_unix_ms", Need::kRequired, &o->opened_unix_ms));
    FT_RETURN_IF_ERROR(r.Int("outcomes", Need::kOptional, &o->outcomes, 0));
    FT_RETURN_IF_ERROR(r.Str("last_outcome", Need::kOptional, &o->last_outcome));
    return r.Bool("watching", Need::kOptional, &o->watching);
  });
}

}  // namespace ft::proto
