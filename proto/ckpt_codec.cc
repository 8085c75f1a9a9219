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

OJson TiersJson(const std::vector<std::string>& tiers) {
  OJson list = OJson::array();
  for (const std::string& t : tiers) list.push_back(t);
  return list;
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
  io.Custom("tiers", c.tiers, Need::kOptional, TiersJson, ReadTiers);
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

std::string Encode(const CkptCopy& c) {
  OJson j = Versioned();
  WriteFields(c, kCkptCopyFields, &j);
  return Dump(j);
}

Status Decode(std::string_view json, CkptCopy* out) {
  return DecodeValue(json, out, [](const Reader& r, CkptCopy* c) { return FieldReader::Read(r, *c, kCkptCopyFields); });
}

// --- StepVerdict -----------------------------------------------------------------------------

std::string Encode(const StepVerdict& v) {
  OJson j = Versioned();
  j["step"] = v.step;
  j["state"] = VerdictStateName(v.state);
  j["shards"] = v.shards;
  j["verified_shards"] = v.verified_shards;
  j["copies"] = v.copies;
  j["sdc_ranks"] = v.sdc_ranks;
  j["why"] = v.why;
  if (!v.reasons.empty()) {  // written only when known (a verdict of an older master has none)
    OJson reasons = OJson::array();
    for (VerdictReason r : v.reasons) reasons.push_back(VerdictReasonName(r));
    j["reasons"] = reasons;
  }
  j["unix_ms"] = v.unix_ms;
  return Dump(j);
}

Status Decode(std::string_view json, StepVerdict* out) {
  return DecodeValue(json, out, [](const Reader& r, StepVerdict* v) -> Status {
    FT_RETURN_IF_ERROR(ReadName(r, "state", "state", ParseVerdictState, kVerdictStates, VerdictStateName, &v->state));
    FT_RETURN_IF_ERROR(r.Int("step", Need::kRequired, &v->step, 0));
    FT_RETURN_IF_ERROR(r.Int("shards", Need::kRequired, &v->shards, 0));
    FT_RETURN_IF_ERROR(r.Int("verified_shards", Need::kRequired, &v->verified_shards, 0));
    if (v->verified_shards > v->shards) {
      return Status::Corrupt(r.Path("verified_shards") + ": " + std::to_string(v->verified_shards) +
                             " is more than the " + std::to_string(v->shards) + " shards");
    }
    FT_RETURN_IF_ERROR(r.Int("copies", Need::kRequired, &v->copies, 0));
    FT_RETURN_IF_ERROR(r.List("sdc_ranks", Need::kOptional, &v->sdc_ranks,
                              [](Elem e, const FieldPath& path, int* rank) {
                                return CheckInt(e, path, rank, 0);
                              }));
    FT_RETURN_IF_ERROR(r.Str("why", Need::kOptional, &v->why));
    // A name this reader does not know is a newer master's reason: dropped, not refused.
    std::vector<std::string> reasons;
    FT_RETURN_IF_ERROR(r.List("reasons", Need::kOptional, &reasons,
                              [](Elem e, const FieldPath& path, std::string* name) {
                                return CheckStr(e, path, name, Empty::kRejected);
                              }));
    for (const std::string& name : reasons) {
      if (std::optional<VerdictReason> known = ParseVerdictReason(name)) v->reasons.push_back(*known);
    }
    return r.Int("unix_ms", Need::kRequired, &v->unix_ms);
  });
}

// --- RestorePlan -----------------------------------------------------------------------------

std::string Encode(const RestorePlan& p) {
  OJson j = Versioned();
  j["version"] = p.version;
  j["step"] = p.step;
  OJson ranks = OJson::array();
  for (const RestoreRank& rr : p.ranks) {
    OJson o = OJson::object();
    o["rank"] = rr.rank;
    o["digest"] = CommIdHex(rr.digest);
    OJson sources = OJson::array();
    for (const RestoreSource& s : rr.sources) {
      OJson so = OJson::object();
      so["rank"] = s.rank;
      so["node"] = s.node;
      so["tiers"] = TiersJson(s.tiers);
      sources.push_back(std::move(so));
    }
    o["sources"] = std::move(sources);
    ranks.push_back(std::move(o));
  }
  j["ranks"] = std::move(ranks);
  j["unix_ms"] = p.unix_ms;
  j["state"] = p.settling.empty() ? "final" : "settling";
  if (!p.settling.empty()) j["why"] = p.settling;
  if (!p.ends_seen.empty()) {
    OJson ends = OJson::array();
    for (const auto& [node, unix_ms] : p.ends_seen) ends.push_back(OJson{{"node", node}, {"unix_ms", unix_ms}});
    j["ends_seen"] = std::move(ends);
  }
  return Dump(j);
}

Status Decode(std::string_view json, RestorePlan* out) {
  return DecodeValue(json, out, [](const Reader& r, RestorePlan* p) -> Status {
    FT_RETURN_IF_ERROR(r.Int("version", Need::kRequired, &p->version, 0));
    FT_RETURN_IF_ERROR(r.Int("step", Need::kRequired, &p->step, -1));
    FT_RETURN_IF_ERROR(r.Objects("ranks", Need::kOptional, &p->ranks, [](const Reader& o, RestoreRank* rr) -> Status {
      FT_RETURN_IF_ERROR(o.Int("rank", Need::kRequired, &rr->rank, 0));
      FT_RETURN_IF_ERROR(ReadDigest(o, "digest", Need::kRequired, &rr->digest));
      return o.Objects("sources", Need::kOptional, &rr->sources, [](const Reader& so, RestoreSource* s) -> Status {
        FT_RETURN_IF_ERROR(so.Int("rank", Need::kRequired, &s->rank, 0));
        FT_RETURN_IF_ERROR(so.Str("node", Need::kRequired, &s->node, Empty::kRejected));
        return ReadTiers(so, "tiers", Need::kOptional, &s->tiers);
      });
    }));
    if (p->step < 0 && !p->ranks.empty()) {
      return Status::Corrupt(r.Path("ranks") + ": a plan with no step (-1) names no ranks");
    }
    // `state` came with settling plans (2026-12): a plan without it is final.
    std::string state = "final";
    FT_RETURN_IF_ERROR(r.Str("state", Need::kOptional, &state));
    if (state == "settling") {
      FT_RETURN_IF_ERROR(r.Str("why", Need::kRequired, &p->settling, Empty::kRejected));
    } else if (state != "final") {
      return Status::Corrupt(r.Path("state") + ": '" + state.substr(0, 32) + "' is neither 'final' nor 'settling'");
    }
    // Came with the ends' echo (2026-12): a plan without it echoes none (a worker whose rank
    // ended waits its bounded while, then takes the plan).
    struct End {
      std::string node;
      int64_t unix_ms = 0;
    };
    std::vector<End> ends;
    FT_RETURN_IF_ERROR(r.Objects("ends_seen", Need::kOptional, &ends, [](const Reader& o, End* e) -> Status {
      FT_RETURN_IF_ERROR(o.Str("node", Need::kRequired, &e->node, Empty::kRejected));
      return o.Int("unix_ms", Need::kRequired, &e->unix_ms, 0);
    }));
    for (End& e : ends) {
      int64_t& at = p->ends_seen[std::move(e.node)];
      at = std::max(at, e.unix_ms);
    }
    return r.Int("unix_ms", Need::kRequired, &p->unix_ms);
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
