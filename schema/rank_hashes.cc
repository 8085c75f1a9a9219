#include "schema/rank_hashes.h"

#include <fmt/format.h>

#include <charconv>

#include "proto/codec.h"

namespace ft::schema {

namespace {

// KEYS: the hash to write (ckpt:<step> or ckpt:<step>:buddy), ckpt:steps. ARGV: rank, value, step.
constexpr const char* kSetCopyScript =
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[3]) return 1";
// KEYS: the hash to remove from, ckpt:steps, the step's other hash. ARGV: rank, step. The step
// leaves ckpt:steps once neither its own copies' nor its buddy copies' hash holds anything.
constexpr const char* kRemoveCopyScript =
    "redis.call('HDEL', KEYS[1], ARGV[1]) "
    "if redis.call('HLEN', KEYS[1]) == 0 and redis.call('HLEN', KEYS[3]) == 0 then "
    "redis.call('ZREM', KEYS[2], ARGV[2]) end return 1";
// KEYS: ckpt:<step>:buddy, ckpt:steps, ckpt:<step>. ARGV: rank, step, holder node.
constexpr const char* kRemoveBuddyScript =
    "local v = redis.call('HGET', KEYS[1], ARGV[1]) "
    "if v and cjson.decode(v)['node'] == ARGV[3] then redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "if redis.call('HLEN', KEYS[1]) == 0 and redis.call('HLEN', KEYS[3]) == 0 then "
    "redis.call('ZREM', KEYS[2], ARGV[2]) end return 1";

redis::Argv SetCopyIn(const proto::Keys& keys, const std::string& hash, const proto::CkptCopy& copy) {
  return {"EVAL", kSetCopyScript, "2", hash, keys.CkptSteps(), RankField(copy.rank), proto::Encode(copy),
          std::to_string(copy.step)};
}

// `raw` decoded as T, whose rank must be the one `field` names.
template <typename T>
Status DecodeChecked(std::string_view field, std::string_view raw, T* out) {
  T value;
  FT_RETURN_IF_ERROR(proto::Decode(raw, &value));
  int rank = -1;
  auto r = std::from_chars(field.data(), field.data() + field.size(), rank);
  if (r.ec != std::errc() || r.ptr != field.data() + field.size() || rank != value.rank) {
    return Status::Corrupt(fmt::format("hash field '{}' does not name the value's rank {}",
                                       field.substr(0, 32), value.rank));
  }
  *out = std::move(value);
  return Status::Ok();
}

}  // namespace

std::string RankField(int rank) { return std::to_string(rank); }

redis::Argv SetProgress(const proto::Keys& keys, const proto::RankProgress& progress) {
  return {"HSET", keys.ProgressOf(progress.rank), RankField(progress.rank), proto::Encode(progress)};
}

redis::Argv SetSummary(const proto::Keys& keys, const proto::RankSummary& summary) {
  return {"HSET", keys.SummaryOf(summary.rank), RankField(summary.rank), proto::Encode(summary)};
}

redis::Argv SetMembership(const proto::Keys& keys, const proto::Membership& membership) {
  return {"HSET", keys.Ranks(), RankField(membership.rank), proto::Encode(membership)};
}

redis::Argv BumpRanksVersion(const proto::Keys& keys) { return {"INCR", keys.RanksVersion()}; }

redis::Argv SetCopy(const proto::Keys& keys, const proto::CkptCopy& copy) {
  return SetCopyIn(keys, keys.CkptStep(copy.step), copy);
}

redis::Argv SetBuddyCopy(const proto::Keys& keys, const proto::CkptCopy& copy) {
  return SetCopyIn(keys, keys.CkptBuddy(copy.step), copy);
}

redis::Argv RemoveCopy(const proto::Keys& keys, int64_t step, int rank) {
  return {"EVAL", kRemoveCopyScript, "3", keys.CkptStep(step), keys.CkptSteps(), keys.CkptBuddy(step),
          RankField(rank), std::to_string(step)};
}

redis::Argv RemoveBuddyCopy(const proto::Keys& keys, int64_t step, int rank, std::string_view holder) {
  return {"EVAL", kRemoveBuddyScript, "3", keys.CkptBuddy(step), keys.CkptSteps(), keys.CkptStep(step),
          RankField(rank), std::to_string(step), std::string(holder)};
}

redis::Argv GetRanks(std::string_view key, const std::vector<int>& ranks) {
  redis::Argv argv = {"HMGET", std::string(key)};
  for (int rank : ranks) argv.push_back(RankField(rank));
  return argv;
}

redis::Argv GetMemberships(const proto::Keys& keys) { return {"HGETALL", keys.Ranks()}; }
redis::Argv GetMembership(const proto::Keys& keys, int rank) { return {"HGET", keys.Ranks(), RankField(rank)}; }
redis::Argv GetRanksVersion(const proto::Keys& keys) { return {"GET", keys.RanksVersion()}; }
redis::Argv GetProgress(const proto::Keys& keys, int rank) {
  return {"HGET", keys.ProgressOf(rank), RankField(rank)};
}
redis::Argv GetCopies(const proto::Keys& keys, int64_t step) { return {"HGETALL", keys.CkptStep(step)}; }
redis::Argv GetBuddyCopies(const proto::Keys& keys, int64_t step) { return {"HGETALL", keys.CkptBuddy(step)}; }
redis::Argv CountCopies(const proto::Keys& keys, int64_t step) { return {"HLEN", keys.CkptStep(step)}; }
redis::Argv CountBuddyCopies(const proto::Keys& keys, int64_t step) { return {"HLEN", keys.CkptBuddy(step)}; }

redis::Argv SetRewinds(const proto::Keys& keys, const proto::CkptRewinds& rewinds) {
  return {"SET", keys.CkptRewinds(), proto::Encode(rewinds)};
}

redis::Argv GetRewinds(const proto::Keys& keys) { return {"GET", keys.CkptRewinds()}; }

redis::Argv NewestSteps(const proto::Keys& keys, int64_t count) {
  return {"ZREVRANGE", keys.CkptSteps(), "0", std::to_string(count > 0 ? count - 1 : -1)};
}

Status DecodeRankValue(std::string_view field, std::string_view raw, proto::RankProgress* out) {
  return DecodeChecked(field, raw, out);
}
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::RankSummary* out) {
  return DecodeChecked(field, raw, out);
}
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::Membership* out) {
  return DecodeChecked(field, raw, out);
}
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::CkptCopy* out) {
  return DecodeChecked(field, raw, out);
}

}  // namespace ft::schema
