// ft::master::NodeHistoryRound: the leading master's part of a node's history across jobs
// (docs/nodes.md; keys and values: proto/node_history.h). It reads the job's incident stream
// after its own cursor (`history_cursor` in the master hash) and appends, per incident, the
// records core/node_records.h says to each named node's stream ft:node:{<node>}:history
// (XADD MAXLEN ~ FT_NODE_HISTORY_LEN, the stream's expiry refreshed to FT_NODE_HISTORY_TTL),
// and puts the node in the index ft:nodes (score: the record's time; the index is trimmed to
// FT_NODE_HISTORY_NODES and expires like the histories). Every incident is seen, whoever wrote
// it: window decisions, straggler and slow-link episodes, evictions for slowness, hardware and
// sdc incidents.
//
// What it promises:
//   - never blocks or breaks the loop: every read and write is one bounded round trip (at
//     most kMaxRecordsPerRun records, kBatch incidents, per run, a run every kPeriod); a
//     failure is logged once, retried at the next run after a backoff (up to kMaxBackoff), and
//     nothing else of the master waits for it. A record Redis refuses (NOPERM from an older
//     ACL, WRONGTYPE at the key) is logged once per kind of refusal and skipped;
//   - bounded per incident: at most FT_NODE_HISTORY_PER_INCIDENT nodes (core/node_records.h
//     says which), the rest counted in the log line and in each record's `nodes`;
//   - idempotent across a takeover: the history keys are in other slots than the job's, so they
//     cannot be written in the fenced script with the cursor. The records go first, the cursor
//     (fenced) after; a run whose records may already be there (the first of a term, or after
//     a failed write) first reads each node's newest records and leaves out those already
//     written (same job, incident, kind and detail). Readers drop duplicates too
//     (core/lemon_score.h), for a deposed leader's late write.
// Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_NODE_HISTORY_H_
#define FT_FTMASTER_NODE_HISTORY_H_

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"
#include "proto/node_history.h"

namespace ft::master {

class NodeHistoryRound {
 public:
  using Clock = LoopContext::Clock;

  static constexpr std::chrono::milliseconds kPeriod{1000};
  static constexpr std::chrono::milliseconds kMaxBackoff{30000};
  static constexpr size_t kBatch = 32;               // incidents per XRANGE
  static constexpr size_t kMaxRecordsPerRun = 1024;  // records per run (whole incidents)
  static constexpr size_t kVerifyDepth = 64;         // newest records of a node read to verify

  explicit NodeHistoryRound(LoopContext* ctx);

  // A new term: due now, and its first run verifies what a previous leader may have written.
  void NewTerm(Clock::time_point now);
  // The cursor (`history_cursor`) the last leader wrote; none: the stream from its start.
  void LoadTerm(const MasterHash& state);
  bool Due(Clock::time_point now) const { return now >= next_; }
  void Run(Clock::time_point now, int64_t unix_ms);

  // For tests and logs.
  const std::string& cursor() const { return cursor_; }
  uint64_t records_written() const { return written_; }
  uint64_t records_already_there() const { return already_there_; }

 private:
  struct Pending;
  // The records of the incidents after the cursor (at most kMaxRecordsPerRun); false when
  // Redis failed.
  bool Collect(Pending* pending);
  // Leaves out the records the nodes' streams already hold; false when Redis failed.
  bool LeaveOutWritten(Pending* pending);
  bool Write(const Pending& pending);
  void Failed(Clock::time_point now, const std::string& what);

  LoopContext* ctx_;
  std::string cursor_;      // the last incident whose records are written ("" none)
  bool verify_ = true;      // the next run's records may be there already
  Clock::time_point next_{};
  std::chrono::milliseconds backoff_{0};
  bool warned_ = false;     // a failure was logged; the next success says so
  std::set<std::string> refusals_logged_;  // kinds of refusal logged once
  uint64_t written_ = 0;
  uint64_t already_there_ = 0;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_NODE_HISTORY_H_
