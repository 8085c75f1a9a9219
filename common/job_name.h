// ft::JobToken: a job's name as ft spells it wherever the name becomes part of another name —
// shm segment names (/ft.<token>.r3.p77), arena and plan files (ft-ckpt.<token>.3), the tier
// directories (<dir>/<token>/), Redis keys (ft:{<token>}:...). One rule for all of them, so two
// jobs that differ anywhere in their names never share a file, a directory or a key.
//
//   - a name of 1 to 48 characters from [A-Za-z0-9_-] is its own token;
//   - any other name (empty, longer, or with another byte: '.', '/', '{', a space, UTF-8) is
//     its first 31 bytes with every byte outside that set as '_', then '-' and 16 lowercase hex
//     digits of a 64-bit hash of the whole name (FNV-1a 64, then splitmix64's finalizer;
//     common/hash.h): "exp.1" -> "exp_1-<16 hex>"; never more than 48 characters.
//
// A token is its own token (JobToken(JobToken(j)) == JobToken(j)): a reader can tell a file
// name's job part from anything else by that test. It never holds '.', so the separators of
// segment and arena names stay unambiguous. Pure; any thread.
#ifndef FT_COMMON_JOB_NAME_H_
#define FT_COMMON_JOB_NAME_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/hash.h"

namespace ft {

inline constexpr size_t kMaxJobToken = 48;
inline constexpr size_t kJobTokenPrefix = kMaxJobToken - 17;  // the name's part before "-<hex>"

inline bool IsJobTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

inline std::string JobToken(std::string_view job) {
  bool plain = !job.empty() && job.size() <= kMaxJobToken;
  for (char c : job) plain = plain && IsJobTokenChar(c);
  if (plain) return std::string(job);
  std::string out;
  for (char c : job.substr(0, kJobTokenPrefix)) out += IsJobTokenChar(c) ? c : '_';
  uint64_t h = Mix64(Fnv1a64(job));
  static constexpr char kHex[] = "0123456789abcdef";
  out += '-';
  for (int shift = 60; shift >= 0; shift -= 4) out += kHex[(h >> shift) & 0xf];
  return out;
}

}  // namespace ft

#endif  // FT_COMMON_JOB_NAME_H_
