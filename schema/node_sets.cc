#include "schema/node_sets.h"

#include "proto/codec.h"

namespace ft::schema {

redis::Argv AddWorker(const proto::Keys& keys, std::string_view node) {
  return {"SADD", keys.Workers(), std::string(node)};
}

redis::Argv GetWorkers(const proto::Keys& keys) { return {"SMEMBERS", keys.Workers()}; }

redis::Argv AddEvicted(const proto::Keys& keys, const std::vector<std::string>& nodes) {
  redis::Argv argv = {"SADD", keys.Evicted()};
  argv.insert(argv.end(), nodes.begin(), nodes.end());
  return argv;
}

redis::Argv RemoveEvicted(const proto::Keys& keys, std::string_view node) {
  return {"SREM", keys.Evicted(), std::string(node)};
}

redis::Argv GetEvicted(const proto::Keys& keys) { return {"SMEMBERS", keys.Evicted()}; }
redis::Argv CountEvicted(const proto::Keys& keys) { return {"SCARD", keys.Evicted()}; }

std::set<std::string> DecodeNodes(const redis::Reply& reply) {
  std::set<std::string> nodes;
  for (const redis::Reply& member : reply.elements()) {
    if (member.is_string() && !member.str().empty()) nodes.insert(member.str());
  }
  return nodes;
}

redis::Argv SetHeartbeat(const proto::Keys& keys, const proto::WorkerHeartbeat& beat, std::chrono::seconds ttl) {
  return {"SET", keys.WorkerHeartbeat(beat.node), proto::Encode(beat), "EX", std::to_string(ttl.count())};
}

redis::Argv GetHeartbeat(const proto::Keys& keys, std::string_view node) {
  return {"GET", keys.WorkerHeartbeat(node)};
}

redis::Argv HeartbeatExists(const proto::Keys& keys, std::string_view node) {
  return {"EXISTS", keys.WorkerHeartbeat(node)};
}

redis::Argv ClaimLease(std::string_view key, std::string_view id, std::chrono::milliseconds lease) {
  return {"SET", std::string(key), std::string(id), "NX", "PX", std::to_string(lease.count())};
}

redis::Argv GetLeaseHolder(std::string_view key) { return {"GET", std::string(key)}; }

redis::Argv GetLeader(const proto::Keys& keys) { return GetLeaseHolder(keys.Leader()); }

}  // namespace ft::schema
