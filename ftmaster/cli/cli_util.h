// What the job commands of cli.h share (internal to ftmaster/cli/): the JSON type they write,
// a decoded value as JSON, a Redis command whose error names it, and an age for people.
#ifndef FT_FTMASTER_CLI_CLI_UTIL_H_
#define FT_FTMASTER_CLI_CLI_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "ftmaster/core/text.h"
#include "proto/codec.h"
#include "redis/store.h"

namespace ft::master::cli {

using Json = nlohmann::ordered_json;

// A decoded value as JSON (the codec's own encoding, parsed back for embedding). Encode is found
// by argument-dependent lookup where AsJson is used, so each codec header may come after this one.
template <typename T>
Json AsJson(const T& value) {
  return Json::parse(Encode(value), nullptr, false);
}

inline Status Run(redis::Commands& client, const redis::Argv& argv, redis::Reply* reply) {
  return client.Run(argv, reply).WithContext(argv[0]);
}

inline std::string Age(int64_t now, int64_t then) {
  if (then <= 0) return "?";
  return HumanMs(static_cast<double>(std::max<int64_t>(0, now - then))) + " ago";
}

// "N garbled values skipped ..." when any were (their warnings went to the log).
inline std::string GarbledNote(size_t count) {
  if (count == 0) return "";
  return std::to_string(count) + (count == 1 ? " garbled value" : " garbled values") +
         " skipped (see the warnings above)\n";
}

}  // namespace ft::master::cli

#endif  // FT_FTMASTER_CLI_CLI_UTIL_H_
