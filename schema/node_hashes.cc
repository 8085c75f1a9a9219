#include "schema/node_hashes.h"

#include <string>

namespace ft::schema {

redis::Argv SetEndpoint(const proto::Keys& keys, std::string_view node, const proto::TransferEndpoint& endpoint) {
  return {"HSET", keys.Endpoints(), std::string(node), proto::Encode(endpoint)};
}

redis::Argv GetEndpoint(const proto::Keys& keys, std::string_view node) {
  return {"HGET", keys.Endpoints(), std::string(node)};
}

redis::Argv RemoveEndpoint(const proto::Keys& keys, std::string_view node) {
  return {"HDEL", keys.Endpoints(), std::string(node)};
}

redis::Argv GetEndpoints(const proto::Keys& keys) { return {"HGETALL", keys.Endpoints()}; }

Status DecodeEndpoint(std::string_view raw, proto::TransferEndpoint* out) { return proto::Decode(raw, out); }

Status DecodeEndpoints(const redis::Reply& reply, std::vector<HashValue<proto::TransferEndpoint>>* out) {
  return DecodeHashReply(
      reply, [](std::string_view, std::string_view raw, proto::TransferEndpoint* v) { return DecodeEndpoint(raw, v); },
      out);
}

}  // namespace ft::schema
