// Timeouts of in-flight ops.
//
// TimeoutPolicy: the timeout of a (communicator, op, size bucket): the master's TimeoutTable
// entry for it, else the table's default_ms (once a table with version > 0 was set), else
// FT_TIMEOUT_WARMUP. The first op of a communicator (seq 1) is never given less than
// FT_TIMEOUT_WARMUP, nor less than FT_RESTORE_WAIT: it is where a process's peers meet after
// their start-up, which includes each one's ft_restore, and ft_restore waits up to
// FT_RESTORE_WAIT for its node's plan file (ranks whose node's plan settles later arrive
// seconds after the others: adapted timeouts of a second named them hung and stopped the
// healthy relaunch in the campaign; a worker that met a Redis failover at start-up wrote its
// node's plan 2.4 s late, and a warm-up of 2 s named the other node's ranks in a transport
// hang); and NCCL sets a communicator's connections up at its first collective.
//
// TimeoutDetector (one per rank): an op the rank's GPU has started but not completed
// (started_seq > completed_seq) for longer than its timeout raises one Timeout for
// (comm, seq), seq = completed_seq + 1, the op the GPU is in (ops of a communicator complete
// in order). Such a rank waits on peers. An op entered but not started raises nothing: the
// GPU is still busy with this rank's own earlier work, so this rank may be the stuck one, and
// the master finds it from the progress tables of the ranks that wait on it. Re-armed when
// completed_seq advances, so the next stuck op of the same comm raises again.
//
// Not thread-safe; owned by the node monitor.
#ifndef FT_FTWORKER_TIMEOUT_DETECTOR_H_
#define FT_FTWORKER_TIMEOUT_DETECTOR_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "proto/messages.h"

namespace ft::worker {

class TimeoutPolicy {
 public:
  TimeoutPolicy(double warmup_ms, double restore_wait_ms)
      : warmup_ms_(warmup_ms), first_op_ms_(std::max(warmup_ms, restore_wait_ms)) {}

  void Set(const proto::TimeoutTable& table);
  double TimeoutMs(uint64_t comm_id, proto::OpKind op, int bucket) const;
  // The timeout of the op numbered `seq` on its communicator: TimeoutMs, for the first at least
  // the warmup and the restore wait.
  double TimeoutMs(uint64_t comm_id, proto::OpKind op, int bucket, uint64_t seq) const;
  uint64_t version() const { return version_; }

 private:
  double warmup_ms_;
  double first_op_ms_;
  uint64_t version_ = 0;
  double default_ms_ = 0;
  std::map<std::tuple<uint64_t, proto::OpKind, int>, double> entries_;
};

// An op the GPU has started and not completed, as read from a comm slot.
struct InFlightOp {
  uint64_t comm_id = 0;     // the communicator (for a p2p slot: the communicator it belongs to)
  bool p2p = false;
  uint64_t seq = 0;         // completed_seq + 1
  proto::OpKind op = proto::OpKind::kNone;
  uint64_t bytes = 0;
  double started_age_ms = 0;
};

// A timeout that is still in effect (its op has not completed).
struct ActiveTimeout {
  uint64_t comm_id = 0;
  bool p2p = false;
  uint64_t seq = 0;
  proto::OpKind op = proto::OpKind::kNone;
};

class TimeoutDetector {
 public:
  // Appends an event (kind "timeout", progress attached) for each op past its timeout that
  // has not raised one yet. `ops` are the rank's started, uncompleted ops now.
  void Check(const std::vector<InFlightOp>& ops, const TimeoutPolicy& policy,
             const proto::RankProgress& progress, int64_t unix_ms, std::vector<proto::Event>* out);

  // The timeouts raised whose op is still in flight.
  const std::vector<ActiveTimeout>& active() const { return active_; }

 private:
  struct Key {
    uint64_t comm_id;
    bool p2p;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.comm_id) ^ (k.p2p ? 1 : 0); }
  };
  std::unordered_map<Key, uint64_t, KeyHash> raised_;  // highest seq that raised, per comm row
  std::vector<ActiveTimeout> active_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_TIMEOUT_DETECTOR_H_
