// ft::worker::Reporter: turns what the node monitor saw into Redis writes (docs/redis-schema.md)
// and keeps them while Redis is away. Events and acknowledgements are ordered appends: all of
// them reach Redis, in order, once it is back (up to FT_REDIS_BUFFER, then the oldest are
// dropped and counted). Progress tables, summaries and memberships are latest-value writes:
// only the newest per rank is kept. Nothing here blocks on Redis; Flush() is the only call
// that talks to it. Not thread-safe: the daemon loop owns it.
#ifndef FT_FTWORKER_REPORTER_H_
#define FT_FTWORKER_REPORTER_H_

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/store.h"
#include "redis/outbox.h"

namespace ft::worker {

class Reporter {
 public:
  Reporter(const proto::Keys& keys, std::string node, size_t buffer);

  void AddEvent(const proto::Event& event);
  void AddAck(const proto::CommandAck& ack);
  // Written only when the value differs from the last one written for that rank.
  void SetProgress(const proto::RankProgress& progress);
  void SetSummary(const proto::RankSummary& summary);
  // Written only when it changed, followed by a bump of ranks:version in the same pipeline
  // (the master reads the membership hash only when that version moved).
  void SetMembership(const proto::Membership& membership);
  // Forgets which memberships were written, so the next SetMembership of each rank writes
  // again: for a Redis that lost them (restart without persistence, failover, FLUSHALL). The
  // workers set is written again at once.
  void ForgetMemberships();
  // The node's heartbeat key (TTL) and its entry in the workers set.
  void Heartbeat(int pid, const std::string& host, const std::vector<int>& ranks, int64_t unix_ms);

  // A checkpoint copy of this node (docs/redis-schema.md, "Checkpoints"): the rank's field in
  // ckpt:<step> and the step in ckpt:steps, written together (one script, atomic). A newer
  // value of the same (step, rank) replaces a pending one.
  void SetCkptCopy(const proto::CkptCopy& copy);
  // The copy is gone from every tier: its field is removed, and the step leaves ckpt:steps
  // when no rank's copy of it is left (atomic, so a concurrent report of another node keeps it).
  void RemoveCkptCopy(int64_t step, int rank);
  // A buddy copy this node holds of another node's rank (ftworker/prefetch/replicator.h), in
  // ft:{J}:ckpt:<step>:buddy; removed only while the field is still this node's.
  void SetBuddyCopy(const proto::CkptCopy& copy);
  void RemoveBuddyCopy(int64_t step, int rank);

  // Sends everything pending; what the server did not take stays for the next call.
  Status Flush(redis::Commands& client);

  uint64_t events_added() const { return events_added_; }
  uint64_t dropped() const { return outbox_.dropped(); }
  size_t pending() const { return outbox_.pending(); }

 private:
  const proto::Keys& keys_;
  std::string node_;
  redis::Outbox outbox_;
  std::map<std::string, std::string> last_written_;  // slot key -> encoded value
  uint64_t events_added_ = 0;
  static constexpr uint64_t kWorkersRefresh = 10;
  uint64_t heartbeats_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_REPORTER_H_
