// ft::schema hash replies: an HGETALL or HMGET reply of a hash of JSON records as its fields,
// each decoded or kept with why it is not, for the typed hashes (rank_hashes.h, node_hashes.h).
#ifndef FT_SCHEMA_HASH_REPLY_H_
#define FT_SCHEMA_HASH_REPLY_H_

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "redis/reply.h"

namespace ft::schema {

// One field of a hash as its record, or why it is not one.
template <typename T>
struct HashValue {
  std::string field;
  T value;          // when ok()
  Status why;       // why the value did not decode
  std::string raw;  // the value as the hash holds it, kept when it did not decode
  bool ok() const { return why.ok(); }
};

// One field's value decoded by `decode(field, raw, &value)` into `out`.
template <typename T, typename DecodeFn>
void TakeHashValue(std::string field, const redis::Reply& raw, const DecodeFn& decode, std::vector<HashValue<T>>* out) {
  HashValue<T> v;
  v.field = std::move(field);
  v.why = raw.is_string() ? decode(v.field, raw.str(), &v.value) : Status::Corrupt("hash value is not a string");
  if (!v.ok() && raw.is_string()) v.raw = raw.str();
  out->push_back(std::move(v));
}

// An HGETALL reply, in the reply's order. Error: the reply is no hash (a flat array of pairs)
// nor nil (an absent hash: nothing).
template <typename T, typename DecodeFn>
Status DecodeHashReply(const redis::Reply& reply, const DecodeFn& decode, std::vector<HashValue<T>>* out) {
  if (reply.is_nil()) return Status::Ok();
  if (!reply.is_array() || reply.size() % 2 != 0) {
    return Status::Corrupt("not a hash reply (wrong key type?): " + reply.DebugString().substr(0, 64));
  }
  for (size_t i = 0; i + 1 < reply.size(); i += 2) {
    TakeHashValue(reply[i].is_string() ? reply[i].str() : std::string(), reply[i + 1], decode, out);
  }
  return Status::Ok();
}

// An HMGET reply for `fields`, in their order; a field the hash does not hold is left out.
// Error: the reply is not one value per field.
template <typename T, typename DecodeFn>
Status DecodeFieldsReply(const std::vector<std::string>& fields, const redis::Reply& reply, const DecodeFn& decode,
                         std::vector<HashValue<T>>* out) {
  if (!reply.is_array() || reply.size() != fields.size()) {
    return Status::Corrupt("not an HMGET reply for " + std::to_string(fields.size()) +
                           " fields: " + reply.DebugString().substr(0, 64));
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!reply[i].is_nil()) TakeHashValue(fields[i], reply[i], decode, out);
  }
  return Status::Ok();
}

}  // namespace ft::schema

#endif  // FT_SCHEMA_HASH_REPLY_H_
