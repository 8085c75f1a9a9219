// ft::schema node sets and liveness: which nodes the job has, which it must not use, and who is
// alive, typed in one place.
//
//   key                written by                                   read by
//   workers (set)      each worker's reporter (AddWorker)           the master's stop commands,
//                                                                   `ftmaster save`
//   evicted (set)      the master behind its fence (AddEvicted),    the checkpoint, summary and
//                      its cordon round                             cordon rounds, the metrics,
//                                                                   the prefetch, `ftmaster evicted`
//   heartbeat:<node>   each worker, every second, with a TTL        the checkpoint round (lost
//   (WorkerHeartbeat)  (SetHeartbeat)                               nodes), the buddy replicator
//   leader             the leading master's lease (ClaimLease)      the metrics, the page,
//                                                                   `ftmaster status`
//
// A set's members are node names as their workers were given them; DecodeNodes keeps the
// non-empty strings of an SMEMBERS reply (anything else in it is foreign bytes, not a node).
// Pure: the caller runs the argv.
#ifndef FT_SCHEMA_NODE_SETS_H_
#define FT_SCHEMA_NODE_SETS_H_

#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/reply.h"
#include "redis/store.h"

namespace ft::schema {

redis::Argv AddWorker(const proto::Keys& keys, std::string_view node);
redis::Argv GetWorkers(const proto::Keys& keys);  // SMEMBERS
redis::Argv AddEvicted(const proto::Keys& keys, const std::vector<std::string>& nodes);
redis::Argv RemoveEvicted(const proto::Keys& keys, std::string_view node);  // a cordon lifted
redis::Argv GetEvicted(const proto::Keys& keys);  // SMEMBERS
redis::Argv CountEvicted(const proto::Keys& keys);  // SCARD
// The members of an SMEMBERS reply that name a node (none for a reply that is no set).
std::set<std::string> DecodeNodes(const redis::Reply& reply);

// A worker's heartbeat under its node's key, gone `ttl` after the last one.
redis::Argv SetHeartbeat(const proto::Keys& keys, const proto::WorkerHeartbeat& beat, std::chrono::seconds ttl);
redis::Argv GetHeartbeat(const proto::Keys& keys, std::string_view node);
redis::Argv HeartbeatExists(const proto::Keys& keys, std::string_view node);  // EXISTS: 1 while it beats

// The leader lease at `key` (Keys::Leader(), or a test's): taken only where nobody holds it,
// for `lease`; its holder's id.
redis::Argv ClaimLease(std::string_view key, std::string_view id, std::chrono::milliseconds lease);
redis::Argv GetLeaseHolder(std::string_view key);
redis::Argv GetLeader(const proto::Keys& keys);  // GetLeaseHolder(keys.Leader())

}  // namespace ft::schema

#endif  // FT_SCHEMA_NODE_SETS_H_
