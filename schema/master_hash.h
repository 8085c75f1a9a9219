// ft::schema master hash: the fields of the job's master hash (ft:{J}:master), in one place: each
// field's name, what its value is and how it is encoded, and the makers of the writes more than
// one place makes. Written only by the leading master, behind its fence (ftmaster/fenced_writer.h);
// read by the master that takes over (LoadTerm), the page, the metrics, the CLI and the workers'
// arena sweep (docs/redis-schema.md).
//
//   field                     value
//   job_state                 proto::JobState's name (JobStateName / ParseJobState)
//   action                    proto::MasterAction json: the stop or save in progress
//   checkpoint                the newest save outcome (ftmaster/core/save_outcome.h)
//   checkpoint:<incident>     that incident's save outcome
//   goodput                   proto::Goodput json: the ETTR ledger
//   open_incident             proto::OpenIncident json: the incident window a takeover resumes
//   events_cursor             the events stream id the window has read up to
//   history_cursor            the incidents stream id node histories are written up to
//   topology, order           the job's declared topology and rank order
//   inferred_topology, inferred_order   those inferred from the communicators
//   last_recovery_ms          the last incident's stop to the job running again
//   slow_evictions            when slow nodes were evicted: Unix ms, comma-separated
//   failures:<node>           the node's recent crashes and stops: Unix ms, comma-separated
//   evicted_why:<node>        why the node was evicted (a sentence)
//   straggler:<rank>          the open straggler episode's incident id
//   slow-link:<comm hex>      the open slow-link episode's incident id
//   decided:<incident>        the decision gate: set once, by the master that decided it
//
// Pure: the caller runs the argv.
#ifndef FT_SCHEMA_MASTER_HASH_H_
#define FT_SCHEMA_MASTER_HASH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "redis/reply.h"
#include "redis/store.h"

namespace ft::schema::master_hash {

inline constexpr const char* kJobState = "job_state";
inline constexpr const char* kAction = "action";
inline constexpr const char* kCheckpoint = "checkpoint";
inline constexpr const char* kGoodput = "goodput";
inline constexpr const char* kOpenIncident = "open_incident";
inline constexpr const char* kEventsCursor = "events_cursor";
inline constexpr const char* kHistoryCursor = "history_cursor";
inline constexpr const char* kTopology = "topology";
inline constexpr const char* kOrder = "order";
inline constexpr const char* kInferredTopology = "inferred_topology";
inline constexpr const char* kInferredOrder = "inferred_order";
inline constexpr const char* kLastRecoveryMs = "last_recovery_ms";
inline constexpr const char* kSlowEvictions = "slow_evictions";
// The prefixes of the fields one per node, rank, communicator or incident.
inline constexpr std::string_view kEvictedWhyPrefix = "evicted_why:";
inline constexpr std::string_view kStragglerPrefix = "straggler:";
inline constexpr std::string_view kSlowLinkPrefix = "slow-link:";
inline constexpr std::string_view kFailuresPrefix = "failures:";

std::string CheckpointOf(std::string_view incident);
std::string EvictedWhy(std::string_view node);
std::string Straggler(int rank);
std::string SlowLink(uint64_t comm);  // the communicator id in hex
std::string Failures(std::string_view node);
std::string Decided(std::string_view incident);
// The rank a straggler field names, the communicator a slow-link field names, the node a
// failures field names; false for another field or a malformed one.
bool ParseStraggler(std::string_view field, int* rank);
bool ParseSlowLink(std::string_view field, uint64_t* comm);
bool ParseFailures(std::string_view field, std::string* node);

// The makers.
redis::Argv Set(const proto::Keys& keys, std::vector<std::pair<std::string, std::string>> fields);
redis::Argv Delete(const proto::Keys& keys, std::vector<std::string> fields);
redis::Argv SetJobState(const proto::Keys& keys, proto::JobState state);
// The action and the job state it puts the job in, together: a reader never sees one without the
// other.
redis::Argv SetAction(const proto::Keys& keys, const proto::MasterAction& action, proto::JobState state);

// The readers: one field (HGET; read its reply with the field's decoder), or the whole hash.
redis::Argv Get(const proto::Keys& keys, std::string_view field);
redis::Argv GetFields(const proto::Keys& keys, const std::vector<std::string>& fields);  // HMGET, in their order
redis::Argv GetAll(const proto::Keys& keys);  // HGETALL, read back by DecodeAll
using Fields = std::unordered_map<std::string, std::string>;
// An HGETALL reply as its fields. Error: the reply is no hash (nil is an empty one).
Status DecodeAll(const redis::Reply& reply, Fields* out);

}  // namespace ft::schema::master_hash

#endif  // FT_SCHEMA_MASTER_HASH_H_
