// ft::schema verdict hash: the job's checkpoint verdicts (ckpt:verdicts), typed in one place.
// The field is the step in decimal and the value its proto::StepVerdict, which names its step
// again; a reader refuses a verdict whose step is not its field's.
//
//   written by                       read by
//   the master's checkpoint round    the master's metrics, the page, `ftmaster checkpoints`,
//   (SetVerdict, RemoveVerdict)      the workers' arena sweep
//
// Readers take foreign bytes: a value that does not decode is returned with why. Pure: the
// caller runs the argv.
#ifndef FT_SCHEMA_VERDICT_HASH_H_
#define FT_SCHEMA_VERDICT_HASH_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "redis/reply.h"
#include "redis/store.h"
#include "schema/hash_reply.h"

namespace ft::schema {

redis::Argv SetVerdict(const proto::Keys& keys, const proto::StepVerdict& verdict);
redis::Argv RemoveVerdict(const proto::Keys& keys, int64_t step);
redis::Argv GetVerdicts(const proto::Keys& keys);                                  // HGETALL
redis::Argv GetVerdictsOf(const proto::Keys& keys, const std::vector<int64_t>& steps);  // HMGET

// One value: decoded, and its step checked against `field`.
Status DecodeVerdictValue(std::string_view field, std::string_view raw, proto::StepVerdict* out);
// GetVerdicts' reply, in the reply's order. Error: the reply is no hash nor nil.
Status DecodeVerdicts(const redis::Reply& reply, std::vector<HashValue<proto::StepVerdict>>* out);
// GetVerdictsOf(keys, steps)'s reply: the steps judged, in `steps`' order (a step not judged
// yet is left out). Error: the reply is not one value per step.
Status DecodeVerdictsOf(const std::vector<int64_t>& steps, const redis::Reply& reply,
                        std::vector<HashValue<proto::StepVerdict>>* out);

}  // namespace ft::schema

#endif  // FT_SCHEMA_VERDICT_HASH_H_
