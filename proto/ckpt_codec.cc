#include "proto/ckpt_codec.h"

#include "proto/json_codec.h"

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

Status CheckTiers(const Reader& r, std::vector<std::string>* tiers) {
  return r.List("tiers", Need::kOptional, tiers, [](Elem e, const FieldPath& path, std::string* s) -> Status {
    FT_RETURN_IF_ERROR(CheckStr(e, path, s, Empty::kRejected));
    if (!KnownTier(*s)) {
      return Status::Corrupt(path.Str() + ": unknown tier '" + s->substr(0, 16) + "' (arena, local, remote, replica)");
    }
    return Status::Ok();
  });
}

// A content digest: 16 hex digits (a JSON number would lose the top bits in many readers).
Status CheckDigest(const Reader& r, const char* key, uint64_t* out) {
  Elem j;
  bool present;
  FT_RETURN_IF_ERROR(r.Find(key, Need::kRequired, &j, &present));
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

}  // namespace

// --- CkptCopy --------------------------------------------------------------------------------

std::string Encode(const CkptCopy& c) {
  OJson j = Versioned();
  j["step"] = c.step;
  j["rank"] = c.rank;
  j["node"] = c.node;
  j["tp"] = c.tp;
  j["pp"] = c.pp;
  j["dp"] = c.dp;
  j["digest"] = CommIdHex(c.digest);
  j["torn"] = c.torn;
  if (c.buddy) j["buddy"] = true;
  if (!c.origin.empty()) j["origin"] = c.origin;
  j["bytes"] = c.bytes;
  j["tiers"] = TiersJson(c.tiers);
  j["error"] = c.error;
  j["unix_ms"] = c.unix_ms;
  if (c.saved_unix_ms > 0) j["saved_unix_ms"] = c.saved_unix_ms;
  return Dump(j);
}

Status Decode(std::string_view json, CkptCopy* out) {
  return DecodeValue(json, out, [](const Reader& r, CkptCopy* c) -> Status {
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &c->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("step", Need::kRequired, &c->step, 0));
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kRequired, &c->rank, 0));
    FT_RETURN_IF_ERROR(r.Int("tp", Need::kOptional, &c->tp, -1));
    FT_RETURN_IF_ERROR(r.Int("pp", Need::kOptional, &c->pp, -1));
    FT_RETURN_IF_ERROR(r.Int("dp", Need::kOptional, &c->dp, -1));
    FT_RETURN_IF_ERROR(CheckDigest(r, "digest", &c->digest));
    FT_RETURN_IF_ERROR(r.Bool("torn", Need::kOptional, &c->torn));
    FT_RETURN_IF_ERROR(r.Bool("buddy", Need::kOptional, &c->buddy));
    FT_RETURN_IF_ERROR(r.Str("origin", Need::kOptional, &c->origin));
    if (!c->origin.empty() && c->origin != "periodic" && c->origin != "just-in-time" && c->origin != "termination") {
      return Status::Corrupt("origin '" + c->origin.substr(0, 32) + "' is not periodic, just-in-time or termination");
    }
    FT_RETURN_IF_ERROR(r.Int("bytes", Need::kRequired, &c->bytes));
    FT_RETURN_IF_ERROR(CheckTiers(r, &c->tiers));
    FT_RETURN_IF_ERROR(r.Str("error", Need::kOptional, &c->error));
    FT_RETURN_IF_ERROR(r.Int("saved_unix_ms", Need::kOptional, &c->saved_unix_ms, 0));
    return r.Int("unix_ms", Need::kRequired, &c->unix_ms);
  });
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
      FT_RETURN_IF_ERROR(CheckDigest(o, "digest", &rr->digest));
      return o.Objects("sources", Need::kOptional, &rr->sources, [](const Reader& so, RestoreSource* s) -> Status {
        FT_RETURN_IF_ERROR(so.Int("rank", Need::kRequired, &s->rank, 0));
        FT_RETURN_IF_ERROR(so.Str("node", Need::kRequired, &s->node, Empty::kRejected));
        return CheckTiers(so, &s->tiers);
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
  OJson rewinds = OJson::array();
  for (const CkptRewind& w : value.rewinds) {
    OJson o = OJson::object();
    o["step"] = w.step;
    o["unix_ms"] = w.unix_ms;
    o["why"] = w.why;
    rewinds.push_back(std::move(o));
  }
  j["rewinds"] = std::move(rewinds);
  return Dump(j);
}

Status Decode(std::string_view json, CkptRewinds* out) {
  return DecodeValue(json, out, [](const Reader& r, CkptRewinds* v) -> Status {
    FT_RETURN_IF_ERROR(r.Objects("rewinds", Need::kRequired, &v->rewinds, [](const Reader& o, CkptRewind* w) -> Status {
      FT_RETURN_IF_ERROR(o.Int("step", Need::kRequired, &w->step, -1));
      FT_RETURN_IF_ERROR(o.Int("unix_ms", Need::kRequired, &w->unix_ms, 0));
      return o.Str("why", Need::kOptional, &w->why);
    }));
    if (v->rewinds.size() > kMaxCkptRewinds) {
      return Status::Corrupt(r.Path("rewinds") + ": " + std::to_string(v->rewinds.size()) + " rewinds, more than the " +
                             std::to_string(kMaxCkptRewinds) + " kept");
    }
    return Status::Ok();
  });
}

}  // namespace ft::proto
