// ft::schema node hashes: the job's hashes of one JSON record per node, typed in one place.
//
//   hash        record             written by                         read by
//   endpoints   TransferEndpoint   the node's worker (SetEndpoint)    replicator, prefetch, `ftworker pull`
//   prefetch    PrefetchReport     a replacement node's worker        `ftmaster checkpoints`
//                                  (SetPrefetch)
//   ft:cordon   CordonEntry        `ftmaster nodes --cordon`          every job's master (cordon round),
//   (all jobs')                    (SetCordon, RemoveCordons)         `ftmaster nodes`, the page
//
// The field is the node's name as its worker was given it. Readers take foreign bytes: a value
// that does not decode is returned with why, as is a report or a cordon whose own node is not
// its field's. Pure: the caller runs the argv.
#ifndef FT_SCHEMA_NODE_HASHES_H_
#define FT_SCHEMA_NODE_HASHES_H_

#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/keys.h"
#include "proto/node_history.h"
#include "proto/prefetch_codec.h"
#include "proto/transfer_codec.h"
#include "redis/reply.h"
#include "redis/store.h"
#include "schema/hash_reply.h"

namespace ft::schema {

redis::Argv SetEndpoint(const proto::Keys& keys, std::string_view node, const proto::TransferEndpoint& endpoint);
redis::Argv GetEndpoint(const proto::Keys& keys, std::string_view node);
redis::Argv RemoveEndpoint(const proto::Keys& keys, std::string_view node);
redis::Argv GetEndpoints(const proto::Keys& keys);  // HGETALL

// One value (GetEndpoint's reply, when a string).
Status DecodeEndpoint(std::string_view raw, proto::TransferEndpoint* out);
// GetEndpoints' reply, in the reply's order. Error: the reply is no hash nor nil.
Status DecodeEndpoints(const redis::Reply& reply, std::vector<HashValue<proto::TransferEndpoint>>* out);

redis::Argv SetPrefetch(const proto::Keys& keys, const proto::PrefetchReport& report);  // under report.node
redis::Argv GetPrefetch(const proto::Keys& keys);  // HGETALL
// GetPrefetch's reply, in the reply's order. Error: the reply is no hash nor nil.
Status DecodePrefetch(const redis::Reply& reply, std::vector<HashValue<proto::PrefetchReport>>* out);

redis::Argv SetCordon(const proto::CordonEntry& cordon);  // under cordon.node
redis::Argv RemoveCordons(const std::vector<std::string>& nodes);  // HDEL: the reply counts those removed
redis::Argv GetCordons();  // HGETALL
// GetCordons' reply, in the reply's order. Error: the reply is no hash nor nil.
Status DecodeCordons(const redis::Reply& reply, std::vector<HashValue<proto::CordonEntry>>* out);

}  // namespace ft::schema

#endif  // FT_SCHEMA_NODE_HASHES_H_
