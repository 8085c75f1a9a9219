#include "proto/prefetch_codec.h"

#include "proto/json_codec.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

}  // namespace

std::string Encode(const PrefetchReport& p) {
  OJson j = Versioned();
  j["node"] = p.node;
  j["step"] = p.step;
  j["state"] = PrefetchStateName(p.state);
  j["started_unix_ms"] = p.started_unix_ms;
  j["done_unix_ms"] = p.done_unix_ms;
  j["pull_s"] = Finite(p.pull_s);
  OJson ranks = OJson::array();
  for (const PrefetchRank& r : p.ranks) {
    OJson o = OJson::object();
    o["rank"] = r.rank;
    o["outcome"] = PrefetchOutcomeName(r.outcome);
    o["ok"] = r.ok;
    o["bytes"] = r.bytes;
    o["seconds"] = Finite(r.seconds);
    o["source"] = r.source;
    o["source_rank"] = r.source_rank;
    o["transport"] = r.transport;
    o["error"] = r.error;
    ranks.push_back(std::move(o));
  }
  j["ranks"] = std::move(ranks);
  return Dump(j);
}

Status Decode(std::string_view json, PrefetchReport* out) {
  return DecodeValue(json, out, [](const Reader& r, PrefetchReport* p) -> Status {
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &p->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("step", Need::kRequired, &p->step, 0));
    FT_RETURN_IF_ERROR(ReadName(r, "state", "state", ParsePrefetchState, kPrefetchStates, PrefetchStateName, &p->state));
    FT_RETURN_IF_ERROR(r.Int("started_unix_ms", Need::kRequired, &p->started_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Int("done_unix_ms", Need::kOptional, &p->done_unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Num("pull_s", Need::kOptional, &p->pull_s, 0));
    return r.Objects("ranks", Need::kOptional, &p->ranks, [](const Reader& o, PrefetchRank* rank) -> Status {
      FT_RETURN_IF_ERROR(o.Int("rank", Need::kRequired, &rank->rank, 0));
      FT_RETURN_IF_ERROR(ReadName(o, "outcome", "outcome", ParsePrefetchOutcome, kPrefetchOutcomes,
                                  PrefetchOutcomeName, &rank->outcome));
      FT_RETURN_IF_ERROR(o.Bool("ok", Need::kRequired, &rank->ok));
      FT_RETURN_IF_ERROR(o.Int("bytes", Need::kOptional, &rank->bytes));
      FT_RETURN_IF_ERROR(o.Num("seconds", Need::kOptional, &rank->seconds, 0));
      FT_RETURN_IF_ERROR(o.Str("source", Need::kOptional, &rank->source));
      FT_RETURN_IF_ERROR(o.Int("source_rank", Need::kOptional, &rank->source_rank, -1));
      FT_RETURN_IF_ERROR(o.Str("transport", Need::kOptional, &rank->transport));
      return o.Str("error", Need::kOptional, &rank->error);
    });
  });
}

}  // namespace ft::proto
