#include "proto/ckpt_codec.h"

#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

// The places a committed copy can be held (tier.h names them the same way). A name this build
// does not know is refused: the master plans restores from these, and a rank must never be
// sent to a tier its worker cannot read.
// "replica": a buddy copy of another node's rank in this node's memory (ftworker/prefetch/replicator.h).
bool KnownTier(const std::string& tier) {
  return tier == "arena" || tier == "local" || tier == "remote" || tier == "replica";
}

Status ReadTiers(const Reader& r, const char* key, Need need, std::vector<std::string>* tiers) {
  return r.List(key, need, tiers, [](Elem e, const FieldPath& path, std::string* s) -> Status {
    FT_RETURN_IF_ERROR(CheckStr(e, path, s, Empty::kRejected));
    if (!KnownTier(*s)) {
      return Status::Corrupt(path.Str() + ": unknown tier '" + s->substr(0, 16) + "' (arena, local, remote, replica)");
    }
    return Status::Ok();
  });
}

// A content digest: 16 hex digits (a JSON number would lose the top bits in many readers).
Status ReadDigest(const Reader& r, const char* key, Need need, uint64_t* out) {
  Elem j;
  bool present;
  FT_RETURN_IF_ERROR(r.Find(key, need, &j, &present));
  if (!present) return Status::Ok();
  if (j.type() != element_type::STRING) {
    return Status::Corrupt(r.Path(key) + ": expected a digest string (16 hex digits), got " + TypeName(j));
  }
  if (!ParseCommIdHex(j.get_string().value_unsafe(), out)) {
    return Status::Corrupt(r.Path(key) + ": expected 16 hex digits");
  }
  return Status::Ok();
}

OJson DigestJson(uint64_t digest) { return CommIdHex(digest); }

// Who saved a copy: empty (a copy of an older writer), or one of the three saves.
Status ReadOrigin(const Reader& r, const char* key, Need need, std::string* origin) {
  FT_RETURN_IF_ERROR(r.Str(key, need, origin));
  if (!origin->empty() && *origin != "periodic" && *origin != "just-in-time" && *origin != "termination") {
    return Status::Corrupt("origin '" + origin->substr(0, 32) + "' is not periodic, just-in-time or termination");
  }
  return Status::Ok();
}

const auto kCkptCopyFields = [](auto& io, auto& c) {
  io.Int("step", c.step, Need::kRequired, 0);
  io.Int("rank", c.rank, Need::kRequired, 0);
  io.Str("node", c.node, Need::kRequired, Empty::kRejected);
  io.Int("tp", c.tp, Need::kOptional, -1);
  io.Int("pp", c.pp, Need::kOptional, -1);
  io.Int("dp", c.dp, Need::kOptional, -1);
  io.Custom("digest", c.digest, Need::kRequired, DigestJson, ReadDigest);
  io.Bool("torn", c.torn, Need::kOptional);
  io.If(c.buddy).Bool("buddy", c.buddy, Need::kOptional);
  io.If(!c.origin.empty()).Custom("origin", c.origin, Need::kOptional, AsIs, ReadOrigin);
  io.Int("bytes", c.bytes, Need::kRequired);
  io.Custom("tiers", c.tiers, Need::kOptional, StringsAsIs, ReadTiers);
  io.Str("error", c.error, Need::kOptional);
  io.Int("unix_ms", c.unix_ms, Need::kRequired);
  io.If(c.saved_unix_ms > 0).Int("saved_unix_ms", c.saved_unix_ms, Need::kOptional, 0);
};

const auto kRewindFields = [](auto& io, auto& w) {
  io.Int("step", w.step, Need::kRequired, -1);
  io.Int("unix_ms", w.unix_ms, Need::kRequired, 0);
  io.Str("why", w.why, Need::kOptional);
};

}  // namespace

// --- CkptCopy --------------------------------------------------------------------------------

std::string Encode(const CkptCopy& c) { return EncodeFields(c, kCkptCopyFields); }

Status Decode(std::string_view json, CkptCopy* out) { return DecodeFields(json, out, kCkptCopyFields); }

// --- StepVerdict -----------------------------------------------------------------------------

namespace {

OJson ReasonsJson(const std::vector<VerdictReason>& reasons) {
  OJson list = OJson::array();
  for (VerdictReason r : reasons) list.push_back(VerdictReasonName(r));
  return list;
}

// A name this reader does not know is a newer master's reason: dropped, not refused.
Status ReadReasons(const Reader& r, const char* key, Need need, std::vector<VerdictReason>* reasons) {
  std::vector<std::string> names;
  FT_RETURN_IF_ERROR(r.List(key, need, &names, [](Elem e, const FieldPath& path, std::string* name) {
    return CheckStr(e, path, name, Empty::kRejected);
  }));
  for (const std::string& name : names) {
    if (std::optional<VerdictReason> known = ParseVerdictReason(name)) reasons->push_back(*known);
  }
  return Status::Ok();
}

const auto kVerdictFields = [](auto& io, auto& v) {
  io.Int("step", v.step, Need::kRequired, 0);
  io.Name("state", v.state, "state", ParseVerdictState, kVerdictStates, VerdictStateName);
  io.Int("shards", v.shards, Need::kRequired, 0);
  io.Int("verified_shards", v.verified_shards, Need::kRequired, 0);
  io.Int("copies", v.copies, Need::kRequired, 0);
  io.Ints("sdc_ranks", v.sdc_ranks, Need::kOptional, 0);
  io.Str("why", v.why, Need::kOptional);
  // Written only when known (a verdict of an older master has none).
  io.If(!v.reasons.empty()).Custom("reasons", v.reasons, Need::kOptional, ReasonsJson, ReadReasons);
  io.Int("unix_ms", v.unix_ms, Need::kRequired);
};

}  // namespace

std::string Encode(const StepVerdict& v) { return EncodeFields(v, kVerdictFields); }

Status Decode(std::string_view json, StepVerdict* out) {
  return DecodeValue(json, out, [](const Reader& r, StepVerdict* v) -> Status {
    FT_RETURN_IF_ERROR(FieldReader::Read(r, *v, kVerdictFields));
    if (v->verified_shards > v->shards) {
      return Status::Corrupt(r.Path("verified_shards") + ": " + std::to_string(v->verified_shards) +
                             " is more than the " + std::to_string(v->shards) + " shards");
    }
    return Status::Ok();
  });
}

// --- RestorePlan -----------------------------------------------------------------------------

namespace {

const auto kRestoreSourceFields = [](auto& io, auto& s) {
  io.Int("rank", s.rank, Need::kRequired, 0);
  io.Str("node", s.node, Need::kRequired, Empty::kRejected);
  io.Custom("tiers", s.tiers, Need::kOptional, StringsAsIs, ReadTiers);
};

const auto kRestoreRankFields = [](auto& io, auto& rr) {
  io.Int("rank", rr.rank, Need::kRequired, 0);
  io.Custom("digest", rr.digest, Need::kRequired, DigestJson, ReadDigest);
  io.Objects("sources", rr.sources, Need::kOptional, kRestoreSourceFields);
};

// One end a plan echoes: a node, and its ranks' newest end the master had heard of.
struct PlanEnd {
  std::string node;
  int64_t unix_ms = 0;
};

const auto kPlanEndFields = [](auto& io, auto& e) {
  io.Str("node", e.node, Need::kRequired, Empty::kRejected);
  io.Int("unix_ms", e.unix_ms, Need::kRequired, 0);
};

OJson EndsJson(const std::map<std::string, int64_t>& ends) {
  OJson list = OJson::array();
  for (const auto& [node, unix_ms] : ends) {
    OJson o = OJson::object();
    WriteFields(PlanEnd{node, unix_ms}, kPlanEndFields, &o);
    list.push_back(std::move(o));
  }
  return list;
}

// Came with the ends' echo (2026-12): a plan without it echoes none (a worker whose rank ended
// waits its bounded while, then takes the plan). A node listed twice keeps its newest end.
Status ReadEnds(const Reader& r, const char* key, Need need, std::map<std::string, int64_t>* ends) {
  std::vector<PlanEnd> list;
  FT_RETURN_IF_ERROR(r.Objects(key, need, &list, [](const Reader& o, PlanEnd* e) {
    return FieldReader::Read(o, *e, kPlanEndFields);
  }));
  for (PlanEnd& e : list) {
    int64_t& at = (*ends)[std::move(e.node)];
    at = std::max(at, e.unix_ms);
  }
  return Status::Ok();
}

// `state` came with settling plans (2026-12): a plan without it is final.
Status ReadPlanState(const Reader& r, const char* key, Need need, std::string* state) {
  FT_RETURN_IF_ERROR(r.Str(key, need, state));
  if (*state != "final" && *state != "settling") {
    return Status::Corrupt(r.Path(key) + ": '" + state->substr(0, 32) + "' is neither 'final' nor 'settling'");
  }
  return Status::Ok();
}

const auto kPlanFields = [](auto& io, auto& p) {
  io.Int("version", p.version, Need::kRequired, 0);
  io.Int("step", p.step, Need::kRequired, -1);
  io.Objects("ranks", p.ranks, Need::kOptional, kRestoreRankFields);
  io.Int("unix_ms", p.unix_ms, Need::kRequired);
  // No member of its own: a plan is settling when it says why.
  std::string state = p.settling.empty() ? "final" : "settling";
  io.Custom("state", state, Need::kOptional, AsIs, ReadPlanState);
  io.When(state == "settling").Str("why", p.settling, Need::kRequired, Empty::kRejected);
  io.If(!p.ends_seen.empty()).Custom("ends_seen", p.ends_seen, Need::kOptional, EndsJson, ReadEnds);
};

}  // namespace

std::string Encode(const RestorePlan& p) { return EncodeFields(p, kPlanFields); }

Status Decode(std::string_view json, RestorePlan* out) {
  return DecodeValue(json, out, [](const Reader& r, RestorePlan* p) -> Status {
    FT_RETURN_IF_ERROR(FieldReader::Read(r, *p, kPlanFields));
    if (p->step < 0 && !p->ranks.empty()) {
      return Status::Corrupt(r.Path("ranks") + ": a plan with no step (-1) names no ranks");
    }
    return Status::Ok();
  });
}

// --- CkptRewinds -----------------------------------------------------------------------------

std::string Encode(const CkptRewinds& value) {
  OJson j = Versioned();
  FieldWriter(&j).Objects("rewinds", value.rewinds, Need::kRequired, kRewindFields);
  return Dump(j);
}

Status Decode(std::string_view json, CkptRewinds* out) {
  return DecodeValue(json, out, [](const Reader& r, CkptRewinds* v) -> Status {
    FieldReader io(r);
    io.Objects("rewinds", v->rewinds, Need::kRequired, kRewindFields);
    FT_RETURN_IF_ERROR(io.status());
    if (v->rewinds.size() > kMaxCkptRewinds) {
      return Status::Corrupt(r.Path("rewinds") + ": " + std::to_string(v->rewinds.size()) + " rewinds, more than the " +
                             std::to_string(kMaxCkptRewinds) + " kept");
    }
    return Status::Ok();
  });
}

}  // namespace ft::proto
