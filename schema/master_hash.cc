#include "schema/master_hash.h"

#include <fmt/format.h>

#include <charconv>

namespace ft::schema::master_hash {

namespace {

std::string Prefixed(std::string_view prefix, std::string_view name) {
  std::string field(prefix);
  field += name;
  return field;
}

}  // namespace

std::string CheckpointOf(std::string_view incident) { return fmt::format("{}:{}", kCheckpoint, incident); }
std::string EvictedWhy(std::string_view node) { return Prefixed(kEvictedWhyPrefix, node); }
std::string Straggler(int rank) { return Prefixed(kStragglerPrefix, std::to_string(rank)); }
std::string SlowLink(uint64_t comm) { return Prefixed(kSlowLinkPrefix, fmt::format("{:016x}", comm)); }
std::string Failures(std::string_view node) { return Prefixed(kFailuresPrefix, node); }
std::string Decided(std::string_view incident) { return fmt::format("decided:{}", incident); }

bool ParseStraggler(std::string_view field, int* rank) {
  if (!field.starts_with(kStragglerPrefix)) return false;
  field.remove_prefix(kStragglerPrefix.size());
  int r = -1;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), r);
  if (ec != std::errc() || end != field.data() + field.size() || r < 0) return false;
  *rank = r;
  return true;
}

bool ParseSlowLink(std::string_view field, uint64_t* comm) {
  if (!field.starts_with(kSlowLinkPrefix)) return false;
  field.remove_prefix(kSlowLinkPrefix.size());
  uint64_t c = 0;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), c, 16);
  if (ec != std::errc() || end != field.data() + field.size() || c == 0) return false;
  *comm = c;
  return true;
}

bool ParseFailures(std::string_view field, std::string* node) {
  if (!field.starts_with(kFailuresPrefix) || field.size() == kFailuresPrefix.size()) return false;
  *node = std::string(field.substr(kFailuresPrefix.size()));
  return true;
}

redis::Argv Set(const proto::Keys& keys, std::vector<std::pair<std::string, std::string>> fields) {
  redis::Argv argv = {"HSET", keys.MasterState()};
  for (auto& [field, value] : fields) {
    argv.push_back(std::move(field));
    argv.push_back(std::move(value));
  }
  return argv;
}

redis::Argv Delete(const proto::Keys& keys, std::vector<std::string> fields) {
  redis::Argv argv = {"HDEL", keys.MasterState()};
  for (std::string& field : fields) argv.push_back(std::move(field));
  return argv;
}

redis::Argv SetJobState(const proto::Keys& keys, proto::JobState state) {
  return {"HSET", keys.MasterState(), kJobState, proto::JobStateName(state)};
}

redis::Argv SetAction(const proto::Keys& keys, const proto::MasterAction& action, proto::JobState state) {
  return {"HSET", keys.MasterState(), kAction, proto::Encode(action), kJobState, proto::JobStateName(state)};
}

redis::Argv Get(const proto::Keys& keys, std::string_view field) {
  return {"HGET", keys.MasterState(), std::string(field)};
}

redis::Argv GetFields(const proto::Keys& keys, const std::vector<std::string>& fields) {
  redis::Argv argv = {"HMGET", keys.MasterState()};
  argv.insert(argv.end(), fields.begin(), fields.end());
  return argv;
}

redis::Argv GetAll(const proto::Keys& keys) { return {"HGETALL", keys.MasterState()}; }

Status DecodeAll(const redis::Reply& reply, Fields* out) {
  if (reply.is_nil()) return Status::Ok();
  if (!reply.is_array() || reply.size() % 2 != 0) {
    return Status::Corrupt("the master hash is no hash (wrong key type?): " + reply.DebugString().substr(0, 64));
  }
  for (size_t i = 0; i + 1 < reply.size(); i += 2) {
    if (reply[i].is_string() && reply[i + 1].is_string()) (*out)[reply[i].str()] = reply[i + 1].str();
  }
  return Status::Ok();
}

}  // namespace ft::schema::master_hash
