#include "schema/node_hashes.h"

#include <string>

#include <fmt/format.h>

#include "proto/node_history_codec.h"

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

redis::Argv SetPrefetch(const proto::Keys& keys, const proto::PrefetchReport& report) {
  return {"HSET", keys.Prefetch(), report.node, proto::Encode(report)};
}

redis::Argv GetPrefetch(const proto::Keys& keys) { return {"HGETALL", keys.Prefetch()}; }

Status DecodePrefetch(const redis::Reply& reply, std::vector<HashValue<proto::PrefetchReport>>* out) {
  return DecodeHashReply(
      reply,
      [](std::string_view field, std::string_view raw, proto::PrefetchReport* v) {
        FT_RETURN_IF_ERROR(proto::Decode(raw, v));
        return v->node == field ? Status::Ok() : Status::Corrupt("the report of another node");
      },
      out);
}

redis::Argv SetCordon(const proto::CordonEntry& cordon) {
  return {"HSET", proto::Keys::Cordons(), cordon.node, proto::Encode(cordon)};
}

redis::Argv RemoveCordons(const std::vector<std::string>& nodes) {
  redis::Argv argv = {"HDEL", proto::Keys::Cordons()};
  argv.insert(argv.end(), nodes.begin(), nodes.end());
  return argv;
}

redis::Argv GetCordons() { return {"HGETALL", proto::Keys::Cordons()}; }

Status DecodeCordons(const redis::Reply& reply, std::vector<HashValue<proto::CordonEntry>>* out) {
  return DecodeHashReply(
      reply,
      [](std::string_view field, std::string_view raw, proto::CordonEntry* v) {
        FT_RETURN_IF_ERROR(proto::Decode(raw, v));
        if (v->node == field) return Status::Ok();
        return Status::Corrupt(fmt::format("node '{}' in the field of '{}'", v->node.substr(0, 64), field));
      },
      out);
}

}  // namespace ft::schema
