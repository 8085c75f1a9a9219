#include "proto/transfer_codec.h"

#include <algorithm>

#include "proto/json_codec.h"

namespace ft::proto {

using namespace ft::proto::json;  // NOLINT: the codec's vocabulary (json_codec.h)

std::string Encode(const TransferEndpoint& e) {
  OJson j = Versioned();
  j["node"] = e.node;
  j["address"] = e.address;
  j["port"] = e.port;
  OJson transports = OJson::array();
  for (const std::string& t : e.transports) transports.push_back(t);
  j["transports"] = std::move(transports);
  j["unix_ms"] = e.unix_ms;
  return Dump(j);
}

Status Decode(std::string_view json, TransferEndpoint* out) {
  return DecodeValue(json, out, [](const Reader& r, TransferEndpoint* e) -> Status {
    FT_RETURN_IF_ERROR(r.Str("node", Need::kRequired, &e->node, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Str("address", Need::kRequired, &e->address, Empty::kRejected));
    FT_RETURN_IF_ERROR(r.Int("port", Need::kRequired, &e->port, 1));
    // A transport this build does not know is refused rather than skipped: a client must never
    // be sent down a path it cannot speak, and a newer worker bumps "v" when it adds one.
    FT_RETURN_IF_ERROR(r.List("transports", Need::kRequired, &e->transports,
                              [](Elem j, const FieldPath& path, std::string* s) -> Status {
                                FT_RETURN_IF_ERROR(CheckStr(j, path, s, Empty::kRejected));
                                if (*s != "tcp" && *s != "verbs") {
                                  return Status::Corrupt(path.Str() + ": unknown transport '" +
                                                         s->substr(0, 16) + "' (tcp, verbs)");
                                }
                                return Status::Ok();
                              }));
    if (std::find(e->transports.begin(), e->transports.end(), "tcp") == e->transports.end()) {
      return Status::Corrupt(r.Path("transports") + ": no \"tcp\" (every connection starts on the TCP control channel)");
    }
    return r.Int("unix_ms", Need::kRequired, &e->unix_ms, 0);
  });
}

}  // namespace ft::proto
