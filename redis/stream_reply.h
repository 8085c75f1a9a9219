// ft::redis stream replies: the one reader of XRANGE / XREVRANGE / XREAD entries
// ([[id, [field, value, ...]], ...]) for the master's and the workers' stream consumers
// (events, acks, incidents, commands, notices), and stream ids.
#ifndef FT_REDIS_STREAM_REPLY_H_
#define FT_REDIS_STREAM_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/reply.h"

namespace ft::redis {

// One entry of a stream: its id and its field/value pairs.
struct StreamEntry {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields;

  // The value of `name`, or nullptr.
  const std::string* Get(std::string_view name) const;
  // field, value, field, value, ...: as the stream holds them.
  std::vector<std::string> Flat() const;
};

// An XRANGE / XREVRANGE reply, or one stream's entries in an XREAD reply, into entries.
// Malformed entries (not [id, [f, v, ...]] with an even count) are skipped; returns how many
// were.
size_t ParseStream(const Reply& reply, std::vector<StreamEntry>* out);

// "1700000000000-5" → true with its parts. Stream ids compare by (ms, seq).
bool ParseStreamId(std::string_view id, uint64_t* ms, uint64_t* seq);

}  // namespace ft::redis

#endif  // FT_REDIS_STREAM_REPLY_H_
