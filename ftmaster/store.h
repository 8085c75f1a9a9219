// Reading a job's Redis values defensively, for the master's loop and its CLI. Redis replies
// come in as redis::Reply; stream entries and hashes of JSON values go out as proto:: structs.
// A value that does not decode (garbled, truncated, another schema version, a hash field
// that does not match the rank inside) is logged once per distinct value and skipped: one bad
// value never stops the master. Not thread-safe: one thread owns each object.
#ifndef FT_FTMASTER_STORE_H_
#define FT_FTMASTER_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "redis/reply.h"
#include "redis/stream_reply.h"

namespace ft::master {

// Stream replies are read by redis/stream_reply.h, for every consumer of a stream.
using redis::ParseStream;
using redis::ParseStreamId;
using redis::StreamEntry;

// Remembers which garbled values were reported, so each distinct value is logged once (a
// value rewritten with another garbling is logged again). Bounded memory.
class BadValues {
 public:
  // Logs "<where>: <why>" the first time this (where, raw) is seen. True when it logged.
  bool Report(std::string_view where, std::string_view raw, const Status& why);
  uint64_t count() const { return count_; }  // every report, logged or not

 private:
  static constexpr size_t kMaxRemembered = 100000;
  std::unordered_set<uint64_t> seen_;
  uint64_t count_ = 0;
};

// `job_state` of the master hash as read: nullopt when absent ("") or garbled (reported to
// `bad` once, as "master job_state"). What an unknown state means is the reader's to say.
std::optional<proto::JobState> ReadJobState(std::string_view raw, BadValues* bad);
// A state as read, for people: its name, or "unknown".
inline const char* JobStateText(std::optional<proto::JobState> s) { return s ? proto::JobStateName(*s) : "unknown"; }

// A hash of rank -> JSON value (progress, summary, ranks) as decoded values, read whole
// (HGETALL), in chunks (HSCAN: BeginPass, LoadPairs per chunk, EndPass) or field by field
// (HMGET: LoadFields). A value whose bytes equal the previous read's is not decoded again, so
// reading a large hash often costs little more than the transfer. values() holds the valid
// values in no particular order; changed() those decoded anew since the last Load, LoadPairs
// or LoadFields began.
template <typename T>
class DecodedHash {
 public:
  explicit DecodedHash(std::string what) : what_(std::move(what)) {}

  // `reply`: an HGETALL reply (a flat [field, value, ...] array; anything else is ignored and
  // logged). Fields whose value is not a valid T for that rank are skipped; fields not in the
  // reply are removed.
  void Load(const redis::Reply& reply, BadValues* bad);

  // A whole hash in chunks: BeginPass, then LoadPairs with each chunk's flat [field, value,
  // ...] array (an HSCAN reply's second element; a field may come twice), then EndPass, which
  // removes the fields no chunk of the pass named.
  void BeginPass();
  void LoadPairs(const redis::Reply& pairs, BadValues* bad);
  void EndPass();

  // Only `fields`: `reply` is the HMGET reply for them (a nil removes the field). The other
  // fields stay as they are.
  void LoadFields(const std::vector<std::string>& fields, const redis::Reply& reply,
                  BadValues* bad);

  const std::vector<T>& values() const { return values_; }
  size_t changed() const { return changed_; }
  // The values decoded anew by the last Load, LoadPairs or LoadFields call (valid until the
  // next call).
  std::vector<const T*> ChangedValues() const;
  // Changes whenever the values do (a read that changed, added or removed something).
  uint64_t version() const { return version_; }
  bool empty() const { return values_.empty(); }
  void Clear();

 private:
  struct Slot {
    std::string raw;
    int index = -1;  // into values_, -1 when the raw value is garbled
    uint64_t gen = 0;
  };
  // One field's new value (nullptr: gone). True when anything changed.
  bool Take(const std::string& field, const std::string* raw, BadValues* bad);
  void RemoveAt(int index);

  std::string what_;
  std::unordered_map<std::string, Slot> slots_;
  std::vector<T> values_;
  std::vector<std::string> owners_;  // field of each value, for swap-removal
  std::vector<std::string> changed_fields_;  // by the last call
  uint64_t gen_ = 0;
  size_t changed_ = 0;
  uint64_t version_ = 0;
};

extern template class DecodedHash<proto::RankProgress>;
extern template class DecodedHash<proto::RankSummary>;
extern template class DecodedHash<proto::Membership>;
extern template class DecodedHash<proto::CkptCopy>;

}  // namespace ft::master

#endif  // FT_FTMASTER_STORE_H_
