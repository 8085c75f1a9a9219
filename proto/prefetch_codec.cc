#include "proto/prefetch_codec.h"

#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

const auto kPrefetchRankFields = [](auto& io, auto& r) {
  io.Int("rank", r.rank, Need::kRequired, 0);
  io.Name("outcome", r.outcome, "outcome", ParsePrefetchOutcome, kPrefetchOutcomes, PrefetchOutcomeName);
  io.Bool("ok", r.ok, Need::kRequired);
  io.Int("bytes", r.bytes, Need::kOptional);
  io.Num("seconds", r.seconds, Need::kOptional, 0);
  io.Str("source", r.source, Need::kOptional);
  io.Int("source_rank", r.source_rank, Need::kOptional, -1);
  io.Str("transport", r.transport, Need::kOptional);
  io.Str("error", r.error, Need::kOptional);
};

const auto kPrefetchFields = [](auto& io, auto& p) {
  io.Str("node", p.node, Need::kRequired, Empty::kRejected);
  io.Int("step", p.step, Need::kRequired, 0);
  io.Name("state", p.state, "state", ParsePrefetchState, kPrefetchStates, PrefetchStateName);
  io.Int("started_unix_ms", p.started_unix_ms, Need::kRequired, 0);
  io.Int("done_unix_ms", p.done_unix_ms, Need::kOptional, 0);
  io.Num("pull_s", p.pull_s, Need::kOptional, 0);
  io.Objects("ranks", p.ranks, Need::kOptional, kPrefetchRankFields);
};

}  // namespace

std::string Encode(const PrefetchReport& p) { return EncodeFields(p, kPrefetchFields); }

Status Decode(std::string_view json, PrefetchReport* out) { return DecodeFields(json, out, kPrefetchFields); }

}  // namespace ft::proto
