// The CommandAck codec (codec.h), beside the save's typed copy it carries (shm/save_ack.h).
#include <utility>

#include "proto/codec.h"
#include "proto/json_codec.h"

namespace ft::proto {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

std::string Encode(const CommandAck& a) {
  OJson j = Versioned();
  j["id"] = a.id;
  j["node"] = a.node;
  j["rank"] = a.rank;
  j["result"] = a.result;
  j["message"] = a.message;
  j["unix_ms"] = a.unix_ms;
  if (a.saved) {
    OJson saved;
    saved["step"] = a.saved->step;
    saved["digest"] = CommIdHex(a.saved->digest);
    saved["torn"] = a.saved->torn;
    saved["bytes"] = a.saved->bytes;
    saved["ms"] = a.saved->ms;
    j["saved"] = std::move(saved);
  }
  return Dump(j);
}

Status Decode(std::string_view json, CommandAck* out) {
  return DecodeValue(json, out, [](const Reader& r, CommandAck* a) -> Status {
    FT_RETURN_IF_ERROR(r.Str("id", Need::kRequired, &a->id, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &a->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("rank", Need::kOptional, &a->rank, -1));
    FT_RETURN_IF_ERROR(r.Str("result", Need::kRequired, &a->result, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("message", Need::kOptional, &a->message));
    FT_RETURN_IF_ERROR(r.Int("unix_ms", Need::kOptional, &a->unix_ms, 0));
    FT_RETURN_IF_ERROR(r.Object("saved", Need::kOptional, [a](const Reader& o) -> Status {
      SavedCopy& c = a->saved.emplace();
      FT_RETURN_IF_ERROR(o.Int("step", Need::kRequired, &c.step, 0));
      FT_RETURN_IF_ERROR(o.Hex("digest", Need::kRequired, &c.digest));
      FT_RETURN_IF_ERROR(o.Bool("torn", Need::kOptional, &c.torn));
      FT_RETURN_IF_ERROR(o.Int("bytes", Need::kOptional, &c.bytes));
      return o.Int("ms", Need::kOptional, &c.ms, 0);
    }));
    // A worker of the previous release said what it saved in the message only.
    if (!a->saved && a->result == "done") a->saved = shm::ParseSaveAck(a->message);
    return Status::Ok();
  });
}

}  // namespace ft::proto
