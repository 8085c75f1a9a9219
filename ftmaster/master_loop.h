// ft::master::MasterLoop: the loop of `ftmaster run`. Single-threaded; every tick (~20 ms) it
// keeps the leader lease (lease.h) and, while leading:
//   - reads new events from ft:{J}:events after the cursor kept in the master hash
//     (`events_cursor`), so a restarted or standby master continues where the last one stopped;
//   - opens an incident window at the first timeout/exit/error event (`open_incident` in the master
//     hash: its first event and time), collects events and the progress tables of the window's
//     communicators' members (window_reads.h) until WindowCanClose or hang_window, attributes (attribution.h), decides (decision.h),
//     and writes each incident exactly once: a Lua script fenced by the lease key does
//     `HSETNX master decided:<id>` and, only when that succeeds, XADDs the incident, SADDs the
//     evicted nodes and stores the action (`action`, `job_state`), all atomically;
//   - executes the stored action: save commands to the save targets' nodes, acks awaited until
//     save_deadline, then stop commands to every node in ft:{J}:workers; job_state goes
//     running → stopping → stopped. A new leader resumes an action where it stands;
//   - busy outcomes (a rank others wait on is still working) are written when they change,
//     re-evaluated every hang_window until the wait resolves or turns into a hang;
//   - reads the summary hash in chunks, a pass every ~500 ms or longer: adaptive timeouts (timeouts.h, published as
//     ft:{J}:timeouts then ft:{J}:timeouts:version) and stragglers (straggler.h, one incident
//     per rank and episode, the episode kept as `straggler:<rank>` in the master hash);
//   - keeps the job's peer-transfer secret (ft:{J}:transfer:secret) in Redis: created when
//     absent, never replaced, never printed;
//   - appends each incident to its nodes' histories across jobs (node_history.h) and keeps the
//     cluster-wide cordons in the job's eviction list (cordon_round.h);
//   - accounts the job's time (goodput_round.h: productive, or lost by cause), kept as
//     `goodput` in the master hash;
//   - once every rank has exited cleanly, job_state becomes "finished"; the topology inferred
//     while the ranks ran is kept (`inferred_topology`), not re-inferred from departed ranks.
// Classes by job, each owning its fields (MasterLoop only sequences them, in this order, each
// tick): WindowRound (window_round.h: events, the window, its decision — the decision itself a
// pure function, core/window_decision.h), ActionRunner (action_runner.h: carrying out a decision),
// SummaryRound (summary_round.h: timeouts and stragglers), CkptRound (ckpt_round.h: verdicts,
// sdc incidents, the restore plan), around JobMembership (job_membership.h: the membership and
// the topology every job reads) and LoopContext (loop_context.h: options, store, the fenced
// writer, job_state, stats). MasterLoop itself (master_loop.cc): the lease term, the tick, the
// transfer secret, and what a membership read means for the other jobs (a relaunch, the end).
// Holds no state Redis does not have: every new lease term reloads it (the membership in
// HSCAN chunks, whatever ranks:version says: a Redis that lost its data counts it anew). Steady reads (summaries) are spaced so that they take about 1/12
// of the loop's time, and no single read holds the loop for long (131k ranks on one core;
// docs/redis-schema.md, "What the master reads"). Garbled values are logged once and skipped
// (store.h).
#ifndef FT_FTMASTER_MASTER_LOOP_H_
#define FT_FTMASTER_MASTER_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "ftmaster/action_runner.h"
#include "ftmaster/ckpt_round.h"
#include "ftmaster/cordon_round.h"
#include "ftmaster/goodput_round.h"
#include "ftmaster/job_membership.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/node_history.h"
#include "ftmaster/store.h"
#include "ftmaster/summary_round.h"
#include "ftmaster/window_round.h"
#include "proto/keys.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::master {

class MasterLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Stats = LoopStats;

  // `endpoint`: the job's Redis (a RedisStore). Call Init() before the first Tick.
  MasterLoop(MasterOptions options, redis::Endpoint endpoint);
  // Any Store: tests pass a redis::FakeStore and drive Tick(now, unix_ms).
  MasterLoop(MasterOptions options, std::unique_ptr<redis::Store> store);
  MasterLoop(const MasterLoop&) = delete;  // the jobs point at its context and at each other
  MasterLoop& operator=(const MasterLoop&) = delete;

  // Parses an explicit topology (an error names the bad part).
  Status Init();

  // One round with the real clocks, or with given ones (tests).
  void Tick();
  void Tick(Clock::time_point now, int64_t unix_ms);

  // Ticks until `stop` is set (or, with exit_when_stopped, until the job ended:
  // proto::JobEnded, stopped or finished),
  // then releases the lease.
  void Run(const std::atomic<bool>& stop, bool exit_when_stopped);
  // Hands the lease over (clean shutdown).
  void Release();

  bool leading() const { return leading(Clock::now()); }
  bool leading(Clock::time_point now) const { return ctx_.lease.leading(now); }
  const std::string& id() const { return ctx_.lease.id(); }
  // As last seen in Redis ("" before the first read).
  std::optional<proto::JobState> job_state() const { return ctx_.job_state; }
  bool incident_open() const { return window_.open(); }
  const Stats& stats() const { return ctx_.stats; }
  const GoodputLedger& goodput() const { return goodput_.ledger(); }
  const BadValues& bad_values() const { return ctx_.bad; }
  const proto::Keys& keys() const { return ctx_.keys; }

 private:
  void StartTerm(Clock::time_point now, int64_t unix_ms);
  // The job's peer-transfer secret (transfer_secret.h): created with SET NX when absent — at
  // the start of every term and, should Redis lose it (flushed, restarted without
  // persistence), at the next check (kSecretCheck). An existing secret is kept as it is.
  void EnsureTransferSecret(Clock::time_point now);
  // A window closed with an action: the runner starts ours, or loads the one another master
  // stored (with the job state it wrote).
  // `decided_for`: the processes the action is for (ActionRunner::Start); empty: the membership now.
  void TakeAction(WindowAction decided, std::vector<proto::Membership> decided_for);
  // The ranks of a launch restored different steps (CkptRound::TakeRestoreMismatch): the incident
  // written and the job stopped, as a window's stop decision would.
  void StopForRestoreMismatch(const proto::Incident& incident);
  // The slow policy evicts a straggler's node (SummaryRound::TakeEviction): the incident written
  // with the node evicted, and the job stopped so that its relaunch runs without it.
  void StopForSlowness(SlowEviction slow, int64_t unix_ms);
  // After every membership read (JobMembership::OnRead): when it moved, the stragglers' ranks,
  // whether every rank exited, the inferred topology, and a stopped or finished job launched
  // again; then MaybeFinish.
  void OnRanksRead();
  // job_state running → finished once every rank exited cleanly (no window open, no action).
  void MaybeFinish();

  LoopContext ctx_;
  JobMembership membership_;
  CkptRound ckpt_;
  ActionRunner actions_;
  WindowRound window_;
  SummaryRound summary_;
  NodeHistoryRound history_;  // nodes across jobs: the incidents in the nodes' histories
  CordonRound cordons_;       // the cluster-wide cordons in the job's eviction list
  GoodputRound goodput_;

  uint64_t term_ = 0;
  bool term_loaded_ = false;
  bool leading_ = false;
  uint64_t ranks_version_seen_ = 0;  // the membership version OnRanksRead last acted on
  bool all_exited_ = false;          // every rank in the membership exited cleanly
  int64_t tick_unix_ms_ = 0;         // the current tick's wall clock
  Clock::time_point next_state_poll_{};
  Clock::time_point next_secret_check_{};
  bool secret_seen_ = false;  // the transfer secret was there at a check of this master's
};

}  // namespace ft::master

#endif  // FT_FTMASTER_MASTER_LOOP_H_
