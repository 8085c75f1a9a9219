// ft::master::LoopContext: what every job of the master's loop shares (master_loop.h). The jobs
// — the incident window (window_round.h), the action runner (action_runner.h), the checkpoint
// round (ckpt_round.h), the summary round (summary_round.h) and the membership they all read
// (job_membership.h) — each own their fields; only these are common, and each is here for a
// reason:
//   - options, keys, store, lease: fixed for the master's life (the store reconnects itself);
//   - writer: every write of a leader goes through the one fenced writer (fenced_writer.h);
//   - bad: a garbled value is logged once however many jobs read it;
//   - stats: one public view of counters (MasterLoop::stats()), each counter bumped by one job;
//   - job_state: the job's state in the master hash as last read or written. Several jobs move
//     it (a decision → stopping, the runner → stopped, the loop → running / finished), each
//     writing Redis first and this copy only once the write was accepted;
//   - tick_started: what the tick has cost so far (an incident's decided time).
// Single-threaded: owned by MasterLoop, which outlives the jobs that point at it.
#ifndef FT_FTMASTER_LOOP_CONTEXT_H_
#define FT_FTMASTER_LOOP_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "ftmaster/core/decision.h"  // Action: the decision the jobs carry out
#include "ftmaster/fenced_writer.h"
#include "ftmaster/lease.h"
#include "ftmaster/store.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "redis/store.h"
#include "schema/master_hash.h"

namespace ft::master {

struct MasterOptions {
  std::string job;
  std::string id;                 // the lease value; empty: host:pid:random
  Config config;                  // timeout_*, hang_window, lease, straggler_steps,
                                  // sharded_optimizer, save_deadline, report_interval
  std::string topology;           // "dp=2,tp=4,pp=2"; empty: inferred from membership
  std::string order;              // "tp-dp-pp" (with topology)
  std::chrono::milliseconds tick{20};
  std::chrono::milliseconds summary_period{500};  // timeouts and stragglers
  std::chrono::milliseconds ranks_period{2000};   // membership while no incident is open
  std::chrono::milliseconds ckpt_period{500};     // checkpoint steps: which changed
  std::chrono::milliseconds ckpt_refresh{2000};   // re-read of the planned step (tier changes)
  std::chrono::milliseconds copy_wait{5000};      // after a save: its copies' reports awaited
  double stop_grace_s = 10;       // the stop command's SIGTERM → SIGKILL grace
  std::FILE* out = stdout;        // decided incidents for people; nullptr: not printed
};

// The master hash (ft:{J}:master) as read at the start of a term: field -> value
// (schema/master_hash.h names the fields).
using MasterHash = schema::master_hash::Fields;

struct LoopStats {
  uint64_t ticks = 0;
  uint64_t events = 0;              // decoded events read
  uint64_t incidents_written = 0;   // incidents this master won the gate for
  uint64_t windows = 0;             // windows attributed
  uint64_t timeouts_published = 0;
  uint64_t commands = 0;            // commands written
  uint64_t fenced_out = 0;          // writes refused because the lease was not ours
  double last_close_to_written_ms = -1;  // window close decided → incident written
  double last_attribute_ms = -1;    // Attribute + Decide alone
  double progress_read_ms = 0;      // the last read of the window's tables, with decoding
  uint64_t progress_rows_read = 0;  // progress tables read by HMGET (the window's members)
  uint64_t ranks_reads = 0;         // whole reads of the membership hash
  uint64_t ckpt_step_reads = 0;     // whole reads of a step's copies (ft:{J}:ckpt:<step>)
  uint64_t plans_published = 0;
};

// "host:pid:random" for --id's default.
std::string DefaultMasterId();

struct LoopContext {
  using Clock = std::chrono::steady_clock;

  LoopContext(MasterOptions options, std::unique_ptr<redis::Store> store);
  LoopContext(const LoopContext&) = delete;  // the writer points into it
  LoopContext& operator=(const LoopContext&) = delete;

  // A won incident, for people (options.out) and the stats.
  void Print(const proto::Incident& incident, const std::vector<std::string>& evicted);

  const MasterOptions options;
  const proto::Keys keys;
  const std::unique_ptr<redis::Store> store;
  LeaderLease lease;
  LoopStats stats;
  FencedWriter writer;
  BadValues bad;
  std::optional<proto::JobState> job_state;  // as last read or written (none before the first read,
                                             // or while what was read is unknown)
  Clock::time_point tick_started{};  // by the real clock
  // Per node, the newest end of one of its ranks without a clean finish (an exit event read from
  // the events stream: a crash, a kill, a teardown), in that node's clock. The checkpoint round
  // echoes it in the plan (RestorePlan::ends_seen); ftworker reports an ended rank's copies
  // before its exit event, so copies read after an end was read include its last saves.
  std::map<std::string, int64_t> rank_ends;
  uint64_t rank_ends_version = 0;  // moves whenever rank_ends does: the round echoes it at once
};

}  // namespace ft::master

#endif  // FT_FTMASTER_LOOP_CONTEXT_H_
