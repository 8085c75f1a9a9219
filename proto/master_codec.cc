#include "proto/master_codec.h"

#include <unordered_map>

#include "proto/json_codec.h"
#include "proto/json_fields.h"
#include "proto/rank_ranges.h"

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

// One entry of an action's save list: "<node>:<rank ranges>" (every rank of the list on that
// node), or {"rank":R,"node":N} as masters wrote it before (read so that an action in flight
// across an upgrade resumes).
// `budget`: how many more targets the list may hold (a garbled "0-1073741823" is one span).
Status DecodeSaveEntry(Elem e, const FieldPath& path, size_t* budget, std::vector<SaveTarget>* out) {
  if (e.type() == element_type::OBJECT) {
    SaveTarget t;
    const Reader o(e.get_object().value_unsafe(), path);
    Status s = o.Int("rank", Need::kRequired, &t.rank, -1);
    if (s.ok()) s = o.Str("node", Need::kRequired, &t.node);
    if (!s.ok()) {
      return Status::Corrupt(path.Str() + ": neither <node>:<ranks> nor an earlier {rank, node}: " +
                             std::string(s.message()));
    }
    out->push_back(std::move(t));
    return *budget > 0 ? (--*budget, Status::Ok())
                       : Status::Corrupt(path.Str() + ": more ranks than the limit of " + std::to_string(kMaxListEntries));
  }
  std::string text;
  FT_RETURN_IF_ERROR(CheckStr(e, path, &text));
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return Status::Corrupt(path.Str() + ": expected <node>:<ranks>");
  RankRanges ranks;
  if (Status s = RankRanges::Parse(std::string_view(text).substr(colon + 1), &ranks); !s.ok()) {
    return Status::Corrupt(path.Str() + ": " + std::string(s.message()));
  }
  if (ranks.empty()) return Status::Corrupt(path.Str() + ": a node without ranks");
  if (ranks.count() > *budget) {
    return Status::Corrupt(path.Str() + ": more ranks than the limit of " + std::to_string(kMaxListEntries));
  }
  *budget -= ranks.count();
  const std::string node = text.substr(0, colon);
  for (int rank : ranks.Ranks()) out->push_back({rank, node});
  return Status::Ok();
}

}  // namespace

// --- JobState --------------------------------------------------------------------------------

Status DecodeJobState(std::string_view text, JobState* out) {
  const std::optional<JobState> state = ParseJobState(text);
  if (!state.has_value()) return UnknownName("job_state", "job state", text, kJobStates, JobStateName);
  *out = *state;
  return Status::Ok();
}

// --- MasterAction ---------------------------------------------------------------------------

namespace {

// One "<node>:<rank ranges>" per node (131k targets were 4 MB of objects, and as long to encode
// as the rest of a decision).
OJson SaveJson(const std::vector<SaveTarget>& targets) {
  std::vector<std::string> nodes;
  std::unordered_map<std::string, std::vector<int>> ranks_of;
  for (const SaveTarget& t : targets) {
    auto [it, added] = ranks_of.try_emplace(t.node);
    if (added) nodes.push_back(t.node);
    it->second.push_back(t.rank);
  }
  OJson save = OJson::array();
  for (const std::string& node : nodes) save.push_back(node + ":" + RankRanges::Of(ranks_of[node]).Format());
  return save;
}

Status ReadSave(const Reader& r, const char* key, Need need, std::vector<SaveTarget>* targets) {
  std::vector<std::vector<SaveTarget>> save;
  size_t budget = kMaxListEntries;
  FT_RETURN_IF_ERROR(r.List(key, need, &save, [&budget](Elem e, const FieldPath& path, std::vector<SaveTarget>* out) {
    return DecodeSaveEntry(e, path, &budget, out);
  }));
  size_t count = 0;
  for (const auto& of_node : save) count += of_node.size();
  targets->clear();
  targets->reserve(count);
  for (auto& of_node : save) targets->insert(targets->end(), of_node.begin(), of_node.end());
  return Status::Ok();
}

// An action decided something: "none" is refused with the names it may hold.
constexpr DecisionKind kActing[] = {DecisionKind::kSaveThenStop, DecisionKind::kStop};

const auto kActionFields = [](auto& io, auto& a) {
  io.Str("incident", a.incident, Need::kRequired);
  io.Name("decision", a.decision, "decision", ParseDecisionKind, kActing, DecisionKindName);
  io.Custom("save", a.save, Need::kOptional, SaveJson, ReadSave);
  io.Name("phase", a.phase, "phase", ParseActionPhase, kActionPhases, ActionPhaseName);
  io.Bool("sent", a.sent, Need::kRequired);
  io.Str("acks_from", a.acks_from, Need::kRequired);
  io.Int("deadline_unix_ms", a.deadline_unix_ms, Need::kRequired);
  io.Strs("nodes", a.nodes, Need::kOptional);
  io.Int("decided_unix_ms", a.decided_unix_ms, Need::kRequired);
};

}  // namespace

std::string Encode(const MasterAction& a) { return EncodeFields(a, kActionFields); }

Status Decode(std::string_view json, MasterAction* out) { return DecodeFields(json, out, kActionFields); }

// --- OpenIncident ---------------------------------------------------------------------------

namespace {

Status ReadStreamId(const Reader& r, const char* key, Need need, std::string* id) {
  FT_RETURN_IF_ERROR(r.Str(key, need, id, Empty::kRejected));
  return CheckStreamId(r, key, *id);
}

const auto kOpenIncidentFields = [](auto& io, auto& o) {
  io.Custom("first_event_id", o.first_event_id, Need::kRequired, AsIs, ReadStreamId);
  io.Int("first_event_unix_ms", o.first_event_unix_ms, Need::kRequired);
  io.Int("opened_unix_ms", o.opened_unix_ms, Need::kRequired);
  io.Int("outcomes", o.outcomes, Need::kOptional, 0);
  io.Str("last_outcome", o.last_outcome, Need::kOptional);
  io.Bool("watching", o.watching, Need::kOptional);
};

}  // namespace

std::string Encode(const OpenIncident& o) { return EncodeFields(o, kOpenIncidentFields); }

Status Decode(std::string_view json, OpenIncident* out) { return DecodeFields(json, out, kOpenIncidentFields); }

// --- Goodput ---------------------------------------------------------------------------------

namespace {

OJson SecondsJson(const GoodputSeconds& seconds, bool with_productive) {
  OJson j = OJson::object();
  for (GoodputCause c : kGoodputCauses) {
    if (c == GoodputCause::kProductive && !with_productive) continue;
    j[GoodputCauseName(c)] = Finite(seconds[static_cast<size_t>(c)]);
  }
  return j;
}
OJson AllSecondsJson(const GoodputSeconds& seconds) { return SecondsJson(seconds, true); }
OJson LostSecondsJson(const GoodputSeconds& seconds) { return SecondsJson(seconds, false); }

// Every cause optional (a value written before a cause existed reads it as 0); a cause this build
// does not know is left alone, as any other field is (a newer master's); a negative figure is
// refused.
Status ReadSeconds(const Reader& r, const char* key, Need need, GoodputSeconds* out) {
  *out = {};
  return r.Object(key, need, [out](const Reader& o) -> Status {
    for (GoodputCause c : kGoodputCauses) {
      FT_RETURN_IF_ERROR(o.Num(GoodputCauseName(c), Need::kOptional, &(*out)[static_cast<size_t>(c)], 0, 1e15));
    }
    return Status::Ok();
  });
}

const auto kGoodputIncidentFields = [](auto& io, auto& i) {
  io.Str("id", i.id, Need::kRequired);
  io.Int("fault_unix_ms", i.fault_unix_ms, Need::kRequired, 0);
  io.Custom("rank_s", i.rank_s, Need::kRequired, LostSecondsJson, ReadSeconds);
  io.Bool("open", i.open, Need::kRequired);
};

const auto kGoodputFields = [](auto& io, auto& g) {
  io.Int("since_unix_ms", g.since_unix_ms, Need::kRequired, 0);
  io.Int("last_unix_ms", g.last_unix_ms, Need::kRequired, 0);
  io.Custom("rank_s", g.rank_s, Need::kRequired, AllSecondsJson, ReadSeconds);
  io.Custom("wall_s", g.wall_s, Need::kRequired, AllSecondsJson, ReadSeconds);
  io.Name("phase", g.phase, "goodput cause", ParseGoodputCause, kGoodputCauses, GoodputCauseName);
  io.Int("furthest_step", g.furthest_step, Need::kRequired, -1);
  io.Int("redo_until_step", g.redo_until_step, Need::kRequired, -1);
  io.Num("redo_left_s", g.redo_left_s, Need::kRequired, -1, 1e12);
  io.Int("launch_incarnation", g.launch_incarnation, Need::kRequired);
  io.Int("incarnation", g.incarnation, Need::kRequired);
  io.Bool("stepping", g.stepping, Need::kRequired);
  io.Num("normal_step_ms", g.normal_step_ms, Need::kRequired, 0, 1e12);
  io.Objects("incidents", g.incidents, Need::kRequired, kGoodputIncidentFields);
};

}  // namespace

std::string Encode(const Goodput& g) { return EncodeFields(g, kGoodputFields); }

Status Decode(std::string_view json, Goodput* out) {
  return DecodeValue(json, out, [](const Reader& r, Goodput* g) -> Status {
    FT_RETURN_IF_ERROR(FieldReader::Read(r, *g, kGoodputFields));
    if (g->incidents.size() > Goodput::kMaxIncidents) {
      return Status::Corrupt(r.Path("incidents") + ": " + std::to_string(g->incidents.size()) +
                             " entries, more than the " + std::to_string(Goodput::kMaxIncidents) + " kept");
    }
    return Status::Ok();
  });
}

}  // namespace ft::proto
