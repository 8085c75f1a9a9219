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
//   - once every rank has exited cleanly, job_state becomes "finished"; the topology inferred
//     while the ranks ran is kept (`inferred_topology`), not re-inferred from departed ranks.
// Files by job: master_loop.cc (term, tick), incident_window.cc (events, the window, its
// decision), action_runner.cc (carrying out a decision), summary_round.cc (timeouts and
// stragglers), fenced_writer.h (every write, fenced by the lease).
// Holds no state Redis does not have: every new lease term reloads it (the membership only
// when ranks:version moved). Steady reads (summaries) are spaced so that they take about 1/12
// of the loop's time, and no single read holds the loop for long (131k ranks on one core;
// docs/redis-schema.md, "What the master reads"). Garbled values are logged once and skipped
// (store.h).
#ifndef FT_FTMASTER_MASTER_LOOP_H_
#define FT_FTMASTER_MASTER_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/config.h"
#include "ftmaster/core/attribution.h"
#include "ftmaster/core/ckpt_verify.h"
#include "ftmaster/core/decision.h"
#include "ftmaster/fenced_writer.h"
#include "ftmaster/incident_window.h"
#include "ftmaster/lease.h"
#include "ftmaster/store.h"
#include "ftmaster/core/straggler.h"
#include "ftmaster/core/timeouts.h"
#include "ftmaster/core/topology.h"
#include "ftmaster/core/window_reads.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "proto/rank_ranges.h"
#include "redis/store.h"
#include "redis/url.h"

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

// A persisted decision being carried out (`action` in the master hash; proto/master_codec.h).
using Action = proto::MasterAction;

class MasterLoop {
 public:
  using Clock = std::chrono::steady_clock;

  struct Stats {
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

  // `endpoint`: the job's Redis (a RedisStore). Call Init() before the first Tick.
  MasterLoop(MasterOptions options, redis::Endpoint endpoint);
  // Any Store: tests pass a redis::FakeStore and drive Tick(now, unix_ms).
  MasterLoop(MasterOptions options, std::unique_ptr<redis::Store> store);

  // Parses an explicit topology (an error names the bad part).
  Status Init();

  // One round with the real clocks, or with given ones (tests).
  void Tick();
  void Tick(Clock::time_point now, int64_t unix_ms);

  // Ticks until `stop` is set (or, with exit_when_stopped, until job_state is "stopped" or
  // "finished"),
  // then releases the lease.
  void Run(const std::atomic<bool>& stop, bool exit_when_stopped);
  // Hands the lease over (clean shutdown).
  void Release();

  bool leading() const { return leading(Clock::now()); }
  bool leading(Clock::time_point now) const { return lease_.leading(now); }
  const std::string& id() const { return lease_.id(); }
  // As last seen in Redis ("" before the first read).
  const std::string& job_state() const { return job_state_; }
  bool incident_open() const { return open_.open; }
  const Stats& stats() const { return stats_; }
  const BadValues& bad_values() const { return bad_; }
  const proto::Keys& keys() const { return keys_; }

 private:
  // master_loop.cc
  void StartTerm(Clock::time_point now, int64_t unix_ms);
  // The job's peer-transfer secret (transfer_secret.h): created with SET NX when absent — at
  // the start of every term and, should Redis lose it (flushed, restarted without
  // persistence), at the next check (kSecretCheck). An existing secret is kept as it is.
  void EnsureTransferSecret(Clock::time_point now);
  // Tells every worker that a window opened (and again every kWindowNoticeRenew while it
  // stays open, or at once when its members changed) or closed (proto/notice.h): while it is
  // open they write the progress tables of the window's members at every report, which calm
  // ranks otherwise write only on a change. The open notice waits for the window's first read
  // of its members (the same tick), so that it can name them.
  void NoticeWindow(Clock::time_point now);
  // The ranks an open window's notice names: its members, or none (every rank) when the
  // membership is not known or too many to name.
  std::optional<proto::RankRanges> WindowNoticeRanks() const;
  void Print(const proto::Incident& incident, const std::vector<std::string>& evicted);
  // incident_window.cc
  void ReadEvents(Clock::time_point now, int64_t unix_ms);
  void TakeEvent(const std::string& id, proto::Event event, int64_t unix_ms);
  void CollectAndMaybeDecide(Clock::time_point now, int64_t unix_ms);
  // closed_at: when the window was found closed (real clock, for the stats).
  void DecideWindow(Clock::time_point closed_at, int64_t unix_ms);
  void CloseIncident(const std::string& why);
  bool ReadProgress(Clock::time_point now);
  bool ReadRanks(Clock::time_point now);
  void OnRanksRead();  // after a whole read (or a version check): what follows the membership
  AttributionInput Input(int64_t unix_ms) const;
  // Clean exits (not after a terminate signal) that tell a dying job's teardown from a crash
  // (attribution.h): NoteCleanExit keeps those read in the events (within the teardown
  // horizon), CollectCleanExits adds the membership's and fills clean_exit_times_ for Input.
  void NoteCleanExit(int64_t unix_ms);
  void CollectCleanExits();
  const Topology& CurrentTopology();
  // job_state running → finished once every rank exited cleanly (no window open, no action).
  void MaybeFinish();
  // action_runner.cc
  void RunAction(Clock::time_point now, int64_t unix_ms);
  std::string LastAckId();  // "" when Redis failed
  void LoadPending();
  void ReadAcks();
  // The acknowledgements of the action's commands, read every kAckPoll: true once none is
  // pending or the deadline has passed.
  bool AcksSettled(Clock::time_point now, int64_t unix_ms, int64_t deadline_unix_ms);
  // At the end of a save phase: how many shards were saved, kept as `checkpoint` in the master
  // state, logged and printed with the incidents. false when the write was fenced out.
  bool RecordSaveOutcome(const Action& a, const StepJudgement* judged);
  // ckpt_round.cc: checkpoint steps → verdicts, sdc incidents and the restore plan.
  void CkptRound(Clock::time_point now, int64_t unix_ms);
  // Reads `step`'s copies again and judges them (verdict, sdc incidents). False when Redis failed.
  // `settled`: the caller knows every copy it waits for is in (a save round's acknowledged
  // copies), so the step is judged now even if some replica never reported.
  bool ReadAndJudgeStep(int64_t step, Clock::time_point now, int64_t unix_ms, bool settled = false);
  bool ReportSdc(const StepJudgement& judged, int64_t unix_ms);
  // The newest restorable step's plan, published when it differs from the last one.
  bool PublishPlan(int64_t unix_ms);
  // ft:{J}:evicted, and which of those nodes' workers still serve (their heartbeat keys), into
  // evicted_; a change makes the plan dirty. False when Redis failed.
  bool ReadEvicted();
  void LoadPlan();  // at a new term: the published plan and its version
  // After the save acks settled: true once the ranks that answered done have reported their
  // copies (or copy_wait passed); then the step is judged and *judged set (nullptr: none).
  bool SaveCopiesSettled(Clock::time_point now, int64_t unix_ms, const StepJudgement** judged);
  // summary_round.cc
  void SummaryRound(Clock::time_point now, int64_t unix_ms);
  void Stragglers(int64_t unix_ms);

  MasterOptions options_;
  proto::Keys keys_;
  std::unique_ptr<redis::Store> store_;
  LeaderLease lease_;
  FencedWriter writer_;
  uint64_t term_ = 0;
  bool term_loaded_ = false;
  bool leading_ = false;
  Topology explicit_topology_;
  bool have_explicit_ = false;
  std::optional<Topology> inferred_;
  uint64_t inferred_for_ = 0;
  // The last topology inferred while the ranks ran (`inferred_topology` in the master hash):
  // kept once they have left (Topology::InferOrKeep).
  std::optional<Topology> last_inferred_;
  bool all_exited_ = false;       // every rank in the membership exited cleanly

  TimeoutModel timeouts_;
  bool unpublished_ = false;      // a table computed but not yet written
  StragglerDetector stragglers_;
  std::unordered_set<int> named_before_;
  std::unordered_map<int, std::string> straggler_fields_;  // rank -> incident id (episodes)
  std::unordered_map<int, int> inherited_seen_;            // inherited episode -> summaries since
  std::unordered_map<int, int64_t> summary_ms_;

  BadValues bad_;
  DecodedHash<proto::RankProgress> progress_{"progress"};
  DecodedHash<proto::Membership> ranks_{"ranks"};
  DecodedHash<proto::RankSummary> summaries_{"summary"};
  uint64_t ranks_version_seen_ = 0;
  bool ranks_loaded_ = false;          // ranks_ read once (kept across terms, by version)
  std::string ranks_version_read_;     // ranks:version at that read ("" none)
  std::string ranks_cursor_;           // HSCAN cursor of the membership pass ("": none open)
  std::string ranks_pass_version_;     // ranks:version when that pass began
  WindowReads window_reads_;           // over ranks_.values(), rebuilt when they change
  uint64_t window_reads_for_ = 0;      // the ranks_.version() it was built for
  std::vector<proto::Membership> window_membership_;  // the open window's members
  bool window_whole_ = false;          // progress_ holds every table (no membership known)
  std::string membership_of_window_;   // the window (first event id) those were read for
  std::string summary_cursor_;         // HSCAN cursor of the pass under way ("": none open)
  int summary_group_ = 0;              // the group (proto/keys.h) that cursor scans
  uint64_t summary_passes_ = 0;        // in this term

  static constexpr size_t kMaxCleanExits = 4096;
  std::deque<int64_t> clean_exits_;        // unix_ms of clean exits read in the events
  std::vector<int64_t> clean_exit_times_;  // Input()'s, by CollectCleanExits
  std::string cursor_;            // last event id processed ("" none)
  IncidentWindow open_;
  std::optional<Action> action_;
  std::set<std::string> pending_acks_;
  std::map<int, std::string> save_results_;  // rank -> ack result of the current save phase
  std::map<int, std::string> save_messages_; // rank -> ack message ("saved step=<S> ...")
  std::optional<Clock::time_point> copies_deadline_;  // waiting for the saved copies' reports

  struct CkptStep {
    DecodedHash<proto::CkptCopy> copies{"ckpt copy"};
    DecodedHash<proto::CkptCopy> buddies{"ckpt buddy copy"};  // ckpt:<step>:buddy
    std::vector<proto::CkptCopy> of_step;  // the copies that name this step (buddy copies too)
    int64_t fields = -1;                   // HLEN of both hashes at the last read
    std::optional<StepJudgement> judged;   // points into of_step; empty while provisional
    Clock::time_point first_seen{};        // when this master first read the step: the
                                           // deadline for its missing replicas starts there
    bool held_logged = false;              // "waiting for replicas" said once
    bool settled = false;                  // judged for good once: never provisional again
    std::string verdict;                   // as last written (without its time)
    Clock::time_point refresh_at{};
  };
  std::map<int64_t, std::unique_ptr<CkptStep>> ckpt_;  // the newest kCkptSteps steps
  std::string ckpt_topology_;          // the topology the verdicts were judged with
  std::set<std::string> sdc_reported_; // incident ids written (or found written)
  proto::RestorePlan plan_;            // as published
  EvictedNodes evicted_;               // as last read (the plan puts their copies last)
  std::vector<std::string> unplannable_;  // verified steps held only on gone evicted nodes (warned)
  bool plan_loaded_ = false;
  bool plan_dirty_ = true;             // a step was judged anew or the membership moved
  uint64_t plan_ranks_version_ = 0;    // ranks_.version() the plan's node order used
  bool ckpt_topology_warned_ = false;
  Clock::time_point next_ckpt_{};
  bool pending_loaded_ = false;
  std::string ack_cursor_;
  std::string job_state_;

  Clock::time_point next_progress_{};
  Clock::time_point next_ranks_{};
  Clock::time_point next_summary_{};
  Clock::time_point next_state_poll_{};
  Clock::time_point next_secret_check_{};
  bool window_noticed_ = false;  // the last window notice written said "open"
  std::string noticed_window_;   // and named this window
  std::string noticed_ranks_;    // and these ranks ("*": none named, every rank)
  Clock::time_point next_window_notice_{};
  bool secret_seen_ = false;  // the transfer secret was there at a check of this master's
  Clock::time_point next_acks_{};
  Clock::time_point tick_started_{};  // by the real clock: what a tick has cost so far
  Stats stats_;
};

// "host:pid:random" for --id's default.
std::string DefaultMasterId();

}  // namespace ft::master

#endif  // FT_FTMASTER_MASTER_LOOP_H_
