// ft::worker::RestorePlanSync: hands the master's restore plan to the training processes of
// this node. About once a second it reads ft:{J}:restore:version; when that changed it reads
// ft:{J}:restore, converts the plan to this node's ckpt::NodePlan (the tier directories are
// this worker's) and rewrites the plan file ft_restore reads (jitckpt/node_plan.h). With no
// plan in Redis it writes a `step none` plan, so ft_restore of a fresh job starts at once
// instead of waiting FT_RESTORE_WAIT. A plan that does not decode is logged once and the
// previous file is kept. The first poll runs as soon as Redis answers. A worker that stops
// removes the file: ranks started before the next worker has read Redis then wait for its
// plan instead of reading a stale one (e.g. `step none` from before a save).
// A PlanGate (the node's Prefetcher, when FT_NODE_RANKS is set) sees every new plan first and
// may withhold the file (the pulls for this node's ranks are running: a rank that read the
// plan now would pick a worse source) or add sources to it (the prefetched copies); whenever
// its generation() changes the file is shaped and written again, without waiting for Redis.
// Settling: a plan the master marks settling is written so (`settling <why>`): ft_restore waits
// for the final one. A rank of this node that ended without a clean exit (NoteRankEnded, not
// one this worker stopped) makes the file settling too, whatever plan it holds, until the
// master's plan echoes that end (RestorePlan::ends_seen, in this node's clock): until then the
// master has not read the copies the rank saved on its way out (a preempted rank's last two
// saves), and a rank relaunched in place would restore an older step than every shard holds
// (at most end_wait_for, for a master that is away). Over a `step none` plan it settles at
// least settle_for — the master may not have heard of the copies its peers on other nodes
// saved as they were torn down.
// Not thread-safe: the daemon loop owns it.
#ifndef FT_FTWORKER_RESTORE_PLAN_SYNC_H_
#define FT_FTWORKER_RESTORE_PLAN_SYNC_H_

#include <cstdint>
#include <string>

#include "jitckpt/node_plan.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "redis/store.h"

namespace ft::worker {

// Decides, for the node's plan file, what the master's plan alone does not know. The daemon's
// thread calls everything.
class PlanGate {
 public:
  virtual ~PlanGate() = default;
  // A plan from the master that differs from the last one (its version changed).
  virtual void OnPlan(const proto::RestorePlan& plan, redis::Commands& redis) = 0;
  // False: withhold the file for now. True: write *plan, to which the gate may add sources.
  virtual bool Shape(ckpt::NodePlan* plan) = 0;
  // Changes whenever Shape's answer may have changed.
  virtual uint64_t generation() const = 0;
};

struct RestorePlanSyncOptions {
  std::string job;
  std::string node;
  std::string arena_dir;   // where the plan file goes (FT_CKPT_ARENA_DIR)
  std::string local_dir;   // FT_CKPT_DIR
  std::string remote_dir;  // FT_CKPT_REMOTE_DIR
  uint64_t poll_interval_ns = 1'000'000'000;
  // How long a rank's end on this node keeps the file settling (a worker's copy scan, about a
  // second, and a master's round after it).
  uint64_t settle_for_ns = 3'000'000'000;
  // How long a rank's end keeps any plan settling while the master has not echoed it.
  uint64_t end_wait_for_ns = 6'000'000'000;  // below ft_restore's default wait (FT_RESTORE_WAIT, 10 s)
};

// The node's view of the master's plan (version, step, every rank's digest and sources).
ckpt::NodePlan ToNodePlan(const proto::RestorePlan& plan, const RestorePlanSyncOptions& options);

class RestorePlanSync {
 public:
  explicit RestorePlanSync(RestorePlanSyncOptions options);

  // Not owned; null: the master's plan is written as it is.
  void SetGate(PlanGate* gate) { gate_ = gate; }

  // Reads Redis when a poll is due; writes the file when the plan changed.
  void Poll(uint64_t mono_ns, redis::Commands& redis);
  // The next Poll reads Redis (the master noticed a new plan: proto/notice.h).
  void PollSoon() { next_poll_ns_ = 0; }
  // Redis may have lost its data (the connection came back, or it lost this node's ranks): the
  // next Poll reads the plan whatever its version says — a master that published again after
  // the loss may have begun its versions anew.
  void ForgetVersion() {
    have_version_ = false;
    next_poll_ns_ = 0;
  }
  // While the daemon hears notices, polls only catch a missed one: every `ns` instead of
  // poll_interval_ns (0: back to poll_interval_ns).
  void StretchPolls(uint64_t ns) { stretched_poll_ns_ = ns; }
  // Writes the file again when the gate's generation changed (no Redis needed).
  void Refresh();
  // A rank of this node ended without a clean exit (`how`, for people) at `end_unix_ms` (this
  // node's clock: its ended Membership.unix_ms): the file says settling until the master's plan
  // echoes the end (or end_wait_for_ns passed), over `step none` at least settle_for_ns after
  // `mono_ns` (and longer while the master says settling).
  void NoteRankEnded(int rank, const std::string& how, uint64_t mono_ns, int64_t end_unix_ms);
  // What the file says it waits for of this node's own ("" : nothing).
  std::string local_settling() const;

  // Takes the plan lock (jitckpt/node_plan.h, PlanWriterLock): a plan file left by a killed
  // worker is removed and ranks read this worker's plans only. While another live worker holds
  // it (a restarted worker whose predecessor has not exited yet), tried again at each Poll.
  void Claim();
  // Removes the plan file this worker wrote, then the lock (at a clean stop).
  void RemoveFile();

  const std::string& path() const { return path_; }
  int64_t files_written() const { return files_written_; }
  bool withholding() const { return withholding_; }
  // Whether a plan from the master was read since the start (a `step none` one counts), and
  // its step (-1: none). What checkpoint retention must keep.
  bool have_plan() const { return have_plan_; }
  int64_t planned_step() const { return plan_.step; }

 private:
  // Shapes the last plan through the gate, then writes or withholds it.
  void WriteCurrent(const std::string& version);
  void Write(const ckpt::NodePlan& plan, const std::string& version);
  void Withhold(const ckpt::NodePlan& plan, const std::string& version);
  // Redis holds no plan and this worker has read none: arenas of the job on this node with a
  // committed copy mean the plan is gone (Redis restarted empty or flushed), not that the job
  // is new. The `step none` file settles then (end_wait_for_ns), for the master to judge them.
  void NoteUnplannedCopies(uint64_t mono_ns);

  RestorePlanSyncOptions options_;
  proto::Keys keys_;
  std::string path_;
  ckpt::PlanWriterLock lock_;
  bool claim_logged_ = false;   // a failed claim said once
  bool claiming_ = false;       // Claim was called: keep trying until it holds
  uint64_t next_poll_ns_ = 0;
  uint64_t stretched_poll_ns_ = 0;  // StretchPolls; 0: options_.poll_interval_ns
  bool have_version_ = false;
  std::string version_;  // restore:version of the plan last handled ("" when absent)
  int64_t files_written_ = 0;
  bool write_failing_ = false;  // the last write failed (logged once until one succeeds)
  PlanGate* gate_ = nullptr;
  uint64_t gate_generation_ = 0;  // the gate's generation the file was last shaped at
  bool have_plan_ = false;        // plan_ holds the last plan decoded
  ckpt::NodePlan plan_;
  std::string plan_version_;      // its restore:version
  bool withholding_ = false;
  // NoteRankEnded: the newest end not yet echoed, and until when it is waited for.
  std::string end_why_;         // "" none pending
  int64_t end_unix_ms_ = 0;
  uint64_t end_until_ns_ = 0;
  int64_t plan_echo_ms_ = 0;    // the plan in hand's ends_seen for this node
  bool plan_lost_ = false;      // Redis holds no plan since this worker read one
  std::string lost_why_;        // then the one in hand settles until lost_until_ns_
  uint64_t lost_until_ns_ = 0;
  std::string none_why_;        // over `step none`: settles at least until none_until_ns_
  uint64_t none_until_ns_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_RESTORE_PLAN_SYNC_H_
