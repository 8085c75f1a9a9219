#include "proto/transfer_codec.h"

#include <algorithm>

#include "proto/json_codec.h"
#include "proto/json_fields.h"

namespace ft::proto {
namespace {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

// A transport this build does not know is refused rather than skipped: a client must never be
// sent down a path it cannot speak, and a newer worker bumps "v" when it adds one.
Status ReadTransports(const Reader& r, const char* key, Need need, std::vector<std::string>* transports) {
  FT_RETURN_IF_ERROR(r.List(key, need, transports, [](Elem j, const FieldPath& path, std::string* s) -> Status {
    FT_RETURN_IF_ERROR(CheckStr(j, path, s, Empty::kRejected));
    if (*s != "tcp" && *s != "verbs") {
      return Status::Corrupt(path.Str() + ": unknown transport '" + s->substr(0, 16) + "' (tcp, verbs)");
    }
    return Status::Ok();
  }));
  if (std::find(transports->begin(), transports->end(), "tcp") == transports->end()) {
    return Status::Corrupt(r.Path(key) + ": no \"tcp\" (every connection starts on the TCP control channel)");
  }
  return Status::Ok();
}

const auto kEndpointFields = [](auto& io, auto& e) {
  io.Str("node", e.node, Need::kRequired, Empty::kRejected);
  io.Str("address", e.address, Need::kRequired, Empty::kRejected);
  io.Int("port", e.port, Need::kRequired, 1);
  io.Custom("transports", e.transports, Need::kRequired, StringsAsIs, ReadTransports);
  io.Int("unix_ms", e.unix_ms, Need::kRequired, 0);
};

}  // namespace

std::string Encode(const TransferEndpoint& e) { return EncodeFields(e, kEndpointFields); }

Status Decode(std::string_view json, TransferEndpoint* out) { return DecodeFields(json, out, kEndpointFields); }

}  // namespace ft::proto
