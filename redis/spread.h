// Reading a hash that a job spreads over several keys (one per group, proto/keys.h) as if it
// were one: every key's HGETALL in one pipeline (one round trip to each node of a cluster),
// the replies' field/value pairs concatenated into the array one HGETALL would return.
#ifndef FT_REDIS_SPREAD_H_
#define FT_REDIS_SPREAD_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "redis/reply.h"
#include "redis/store.h"

namespace ft::redis {

// A missing key adds nothing. An error reply (WRONGTYPE, NOPERM) fails the whole read with the
// server's message; `merged` is set only on success.
Status HGetAllOf(Commands& db, const std::vector<std::string>& keys, Reply* merged);

}  // namespace ft::redis

#endif  // FT_REDIS_SPREAD_H_
