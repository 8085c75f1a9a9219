// The CommandAck codec (codec.h), beside the save's typed copy it carries (shm/save_ack.h).
#include "proto/codec.h"
#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

const auto kSavedCopyFields = [](auto& io, auto& c) {
  io.Int("step", c.step, Need::kRequired, 0);
  io.Hex("digest", c.digest, Need::kRequired);
  io.Bool("torn", c.torn, Need::kOptional);
  io.Int("bytes", c.bytes, Need::kOptional);
  io.Int("ms", c.ms, Need::kOptional, 0);
};

const auto kAckFields = [](auto& io, auto& a) {
  io.Str("id", a.id, Need::kRequired, Empty::kRejected);
  io.Str("node", a.node, Need::kRequired, Empty::kRejected);
  io.Int("rank", a.rank, Need::kOptional, -1);
  io.Str("result", a.result, Need::kRequired, Empty::kRejected);
  io.Str("message", a.message, Need::kOptional);
  io.Int("unix_ms", a.unix_ms, Need::kOptional, 0);
  io.Object("saved", a.saved, Need::kOptional, kSavedCopyFields);  // a save's ack only
};

}  // namespace

std::string Encode(const CommandAck& a) { return EncodeFields(a, kAckFields); }

Status Decode(std::string_view json, CommandAck* out) {
  return DecodeValue(json, out, [](const Reader& r, CommandAck* a) -> Status {
    FT_RETURN_IF_ERROR(FieldReader::Read(r, *a, kAckFields));
    // A worker of the previous release said what it saved in the message only.
    if (!a->saved && a->result == "done") a->saved = shm::ParseSaveAck(a->message);
    return Status::Ok();
  });
}

}  // namespace ft::proto
