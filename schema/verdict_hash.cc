#include "schema/verdict_hash.h"

#include <fmt/format.h>

#include <charconv>
#include <string>

namespace ft::schema {

redis::Argv SetVerdict(const proto::Keys& keys, const proto::StepVerdict& verdict) {
  return {"HSET", keys.CkptVerdicts(), std::to_string(verdict.step), proto::Encode(verdict)};
}

redis::Argv RemoveVerdict(const proto::Keys& keys, int64_t step) {
  return {"HDEL", keys.CkptVerdicts(), std::to_string(step)};
}

redis::Argv GetVerdicts(const proto::Keys& keys) { return {"HGETALL", keys.CkptVerdicts()}; }

redis::Argv GetVerdictsOf(const proto::Keys& keys, const std::vector<int64_t>& steps) {
  redis::Argv argv = {"HMGET", keys.CkptVerdicts()};
  for (int64_t step : steps) argv.push_back(std::to_string(step));
  return argv;
}

Status DecodeVerdictValue(std::string_view field, std::string_view raw, proto::StepVerdict* out) {
  proto::StepVerdict v;
  FT_RETURN_IF_ERROR(proto::Decode(raw, &v));
  int64_t step = -1;
  auto r = std::from_chars(field.data(), field.data() + field.size(), step);
  if (r.ec != std::errc() || r.ptr != field.data() + field.size() || step != v.step) {
    return Status::Corrupt(fmt::format("verdicts field '{}' holds the verdict of step {}", field.substr(0, 32), v.step));
  }
  *out = std::move(v);
  return Status::Ok();
}

Status DecodeVerdicts(const redis::Reply& reply, std::vector<HashValue<proto::StepVerdict>>* out) {
  return DecodeHashReply(reply, DecodeVerdictValue, out);
}

Status DecodeVerdictsOf(const std::vector<int64_t>& steps, const redis::Reply& reply,
                        std::vector<HashValue<proto::StepVerdict>>* out) {
  std::vector<std::string> fields;
  for (int64_t step : steps) fields.push_back(std::to_string(step));
  return DecodeFieldsReply(fields, reply, DecodeVerdictValue, out);
}

}  // namespace ft::schema
