// ft::schema rank hashes: the job's hashes of one JSON record per rank, typed in one place. The
// field is the rank in decimal and the value the record, which names its rank again; a reader
// refuses a value whose rank is not its field's (docs/redis-schema.md).
//
//   hash                  record        written by                       read by
//   progress:{<g>}        RankProgress  worker reporter (SetProgress)    master window, CLI status
//   summary:{<g>}         RankSummary   worker reporter (SetSummary)     master summary round
//   ranks                 Membership    worker reporter (SetMembership)  master membership, page,
//                                                                        worker daemon, transfer
//   ckpt:<step>           CkptCopy      worker reporter (SetCopy)        master action/ckpt, CLI,
//   ckpt:<step>:buddy     CkptCopy      worker reporter (SetBuddyCopy)   replicator, pulls
//
// A copy's hash and the job's sorted set of steps change together, in one script: the step is
// in ckpt:steps exactly while one of its two hashes holds a copy.
//
// Readers take foreign bytes: a value that does not decode is returned with why, never thrown
// away silently. Pure: the caller runs the argv.
#ifndef FT_SCHEMA_RANK_HASHES_H_
#define FT_SCHEMA_RANK_HASHES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/reply.h"
#include "redis/store.h"
#include "schema/hash_reply.h"

namespace ft::schema {

// The makers: one command each.
redis::Argv SetProgress(const proto::Keys& keys, const proto::RankProgress& progress);
redis::Argv SetSummary(const proto::Keys& keys, const proto::RankSummary& summary);
redis::Argv SetMembership(const proto::Keys& keys, const proto::Membership& membership);
// After memberships changed: a master that saw the version unchanged has seen every value.
redis::Argv BumpRanksVersion(const proto::Keys& keys);
redis::Argv SetCopy(const proto::Keys& keys, const proto::CkptCopy& copy);
redis::Argv SetBuddyCopy(const proto::Keys& keys, const proto::CkptCopy& copy);
redis::Argv RemoveCopy(const proto::Keys& keys, int64_t step, int rank);
// A buddy copy is removed only by `holder`, the node holding it: another node may hold (and have
// reported) the rank's copy of that step since the ring moved.
redis::Argv RemoveBuddyCopy(const proto::Keys& keys, int64_t step, int rank, std::string_view holder);

// The field of `rank`.
std::string RankField(int rank);
// HMGET `key` for `ranks`, in that order (read back with DecodeRankFields).
redis::Argv GetRanks(std::string_view key, const std::vector<int>& ranks);
// The readers' commands by hash (HGETALL, HGET, HLEN; each read back as DecodeRankHash or
// DecodeRankValue reads it).
redis::Argv GetMemberships(const proto::Keys& keys);
redis::Argv GetMembership(const proto::Keys& keys, int rank);
redis::Argv GetRanksVersion(const proto::Keys& keys);  // GET: the count BumpRanksVersion keeps
redis::Argv GetProgress(const proto::Keys& keys, int rank);
redis::Argv GetCopies(const proto::Keys& keys, int64_t step);
redis::Argv GetBuddyCopies(const proto::Keys& keys, int64_t step);
redis::Argv CountCopies(const proto::Keys& keys, int64_t step);
redis::Argv CountBuddyCopies(const proto::Keys& keys, int64_t step);
// The newest `count` steps of ckpt:steps, newest first (a reply of step numbers as text; any
// count below 1: every step).
redis::Argv NewestSteps(const proto::Keys& keys, int64_t count);
// Where the job went back to an older step (ckpt:rewinds, proto::CkptRewinds): the master's
// checkpoint round writes it behind its fence and reads it back when it takes over.
redis::Argv SetRewinds(const proto::Keys& keys, const proto::CkptRewinds& rewinds);
redis::Argv GetRewinds(const proto::Keys& keys);

// The reader of one value: `raw` decoded, and its rank checked against `field`.
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::RankProgress* out);
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::RankSummary* out);
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::Membership* out);
Status DecodeRankValue(std::string_view field, std::string_view raw, proto::CkptCopy* out);

// An HGETALL reply as records, in the reply's order; a field that does not decode is kept with
// why. Error: the reply is no hash (a flat array of pairs) nor nil.
template <typename T>
Status DecodeRankHash(const redis::Reply& reply, std::vector<HashValue<T>>* out) {
  return DecodeHashReply(reply, [](std::string_view f, std::string_view raw, T* v) { return DecodeRankValue(f, raw, v); },
                         out);
}

// The HMGET reply for GetRanks(key, ranks) as records: the ranks Redis holds, in `ranks`' order
// (a rank Redis does not hold is left out). Error: the reply is not one value per rank.
template <typename T>
Status DecodeRankFields(const std::vector<int>& ranks, const redis::Reply& reply, std::vector<HashValue<T>>* out) {
  std::vector<std::string> fields;
  for (int rank : ranks) fields.push_back(RankField(rank));
  return DecodeFieldsReply(fields, reply,
                           [](std::string_view f, std::string_view raw, T* v) { return DecodeRankValue(f, raw, v); }, out);
}

}  // namespace ft::schema

#endif  // FT_SCHEMA_RANK_HASHES_H_
