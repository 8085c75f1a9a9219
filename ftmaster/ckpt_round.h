// ft::master::CkptRound: the master loop's checkpoint round, every ckpt_period. Which steps'
// copies changed (ft:{J}:ckpt:steps, then HLEN per step: O(steps) per round, a step's copies read
// only when their count moved, the planned step re-read on a spaced refresh for tier changes),
// their verdicts (ckpt_verify.h) into ft:{J}:ckpt:verdicts, an `sdc` incident per odd replica,
// and the restore plan (ft:{J}:restore, ft:{J}:restore:version) whenever its content changes —
// also when the evicted set (ft:{J}:evicted, read every round: a handful of nodes) or the membership moves, since the sources' order
// and tiers depend on them. The action runner asks it to judge a save's step at once
// (JudgeSavedStep) before the job is stopped. Single-threaded, owned by MasterLoop.
// ckpt_round_launches.cc holds what follows the launches: ends, relaunches, the finish, how
// long the plan settles after them, and the rewinds they come to.
#ifndef FT_FTMASTER_CKPT_ROUND_H_
#define FT_FTMASTER_CKPT_ROUND_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ftmaster/core/ckpt_verify.h"
#include "ftmaster/core/gone_nodes.h"
#include "ftmaster/job_membership.h"
#include "ftmaster/core/hw_evidence.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"
#include "proto/ckpt_codec.h"

namespace ft::master {

// A step number as written in ft:{J}:ckpt:steps and the acks ("123"; no sign, nothing after).
bool ParseStep(std::string_view text, int64_t* step);

class CkptRound {
 public:
  using Clock = LoopContext::Clock;

  CkptRound(LoopContext* ctx, JobMembership* membership) : ctx_(ctx), membership_(membership) {}
  // The workers' hardware signals (hw_evidence.h): attached to sdc incidents (an ECC error on
  // the replica's GPU says why its bytes differ). Null: none.
  void SetHardware(const HwLog* hardware) { hardware_ = hardware; }

  // A new term: steps, verdicts written and the plan are read again; the round is due now.
  void NewTerm(Clock::time_point now);
  // Due every ckpt_period, and at once when an end was read: its node's ranks may be relaunched
  // and waiting for the plan to echo it.
  bool Due(Clock::time_point now) const {
    return now >= next_round_ || ctx_->rank_ends_version != ends_version_ ||
           (plan_loaded_ && membership_->version() != plan_ranks_version_);
  }
  void Run(Clock::time_point now, int64_t unix_ms);

  // A save's step, its copies acknowledged: judged now even if some replica never reported,
  // the evicted set read and the plan published. *judged: the step's judgement (nullptr: none).
  // False when Redis failed.
  bool JudgeSavedStep(int64_t step, Clock::time_point now, int64_t unix_ms, const StepJudgement** judged);
  // The newest step in ft:{J}:ckpt:steps (-1 none). False when Redis failed.
  bool NewestStep(int64_t* step);

  // Every rank of the job exited cleanly, the last report of it at `last_exit_unix_ms`, at step
  // `end_step` (-1 unknown). A run that saved the step it ended at stays restorable as a running
  // job's (its newest trustworthy step: a launch after it continues); one that ended past its
  // last checkpoint holds only states it went past, so a launch after it starts from scratch: a
  // rewind to -1 (ckpt_lineage.h) in ft:{J}:ckpt:rewinds. Decided once the end step's copies are
  // seen, or when the copies of ranks that ended had their while to come; the plan settles
  // meanwhile. Unknown end step (older libft.so or worker): nothing changes.
  void NoteFinished(int64_t last_exit_unix_ms, int64_t end_step);
  const std::vector<proto::CkptRewind>& rewinds() const { return rewinds_.rewinds; }

  // The ranks of the launch now running (started after the newest end of a rank, so a teardown's
  // survivors do not count) reported restoring different steps (Membership::restored_step): the
  // incident to stop the job for, once per launch; else nullopt. Such a launch trains, and
  // saves, a mixed state: once none of its ranks runs any more a rewind to the step most of them
  // restored (stored then, so its last copies are covered) keeps its later copies out of every
  // plan.
  std::optional<proto::Incident> TakeRestoreMismatch(int64_t unix_ms);

 private:
  // An incident the round finds by itself (no window collected it): seen, closed and decided
  // at once.
  static void DecidedNow(proto::Incident* i, int64_t unix_ms, proto::DecisionKind decision);
  struct Step {
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
  // GoneNodes (core/gone_nodes.h): the nodes the plan names whose worker's heartbeat is gone,
  // looked at in one pipeline every kGoneLookMs. False when Redis failed.
  bool ReadGone(const std::set<std::string>& evicted);
  void LoadPlan();  // at a new term: the published plan and its version, and the rewinds
  // Adds a rewind and stores the list (ft:{J}:ckpt:rewinds); every step is judged again. False
  // when the write failed (the caller keeps it pending).
  bool StoreRewind(proto::CkptRewind rewind);
  // A relaunch seen (relaunched_from_ms_) is a rewind to the step its ranks restore: the plan's
  // once it is final. A finish noted (finished_at_ms_) is a rewind to -1.
  void RecordRewinds(int64_t unix_ms);
  bool EndStepSaved() const;  // the finished run's end step has a copy (of this run)
  // After ranks ended or were relaunched (or the job finished), how long their copies may still
  // be on their way; Moving: a rank moved less than that ago.
  std::chrono::milliseconds SettleWindow() const;
  bool Moving(Clock::time_point now) const;
  // Why a plan published now would not be final yet (empty: it is): after ranks ended or were
  // relaunched, copies newer than `planned_step` waiting for their replicas. Notes relaunches
  // and ends on the way.
  std::string SettlingWhy(Clock::time_point now, int64_t planned_step);
  // Each rank's newest membership (by incarnation), and the newest end of a rank (dead or
  // stopped there, or read from the events) in its node's clock (0: none).
  std::map<int, const proto::Membership*> NewestMembers() const;
  int64_t NewestEndMs(const std::map<int, const proto::Membership*>& newest) const;
  // Some ranks of the launch now running restored from plan `version` and some have not yet
  // restored: how many of each, for people ("" otherwise).
  std::string LaunchRestoringFrom(int64_t version) const;
  // Folds the ends read from the events (LoopContext::rank_ends) into ends_seen_, before a round
  // reads the copies: a plan carrying an end was built on every copy its worker reported before
  // the exit event (ftworker reports an ended rank's copies first). Not from the membership: a
  // rank relaunched at once overwrites its end there before a round may see it.
  void NoteEnds();

  const HwLog* hardware_ = nullptr;
  LoopContext* ctx_;
  JobMembership* membership_;
  std::map<int64_t, std::unique_ptr<Step>> steps_;  // the newest kCkptSteps steps
  std::string topology_;               // the topology the verdicts were judged with
  bool topology_warned_ = false;
  std::set<std::string> sdc_reported_; // incident ids written (or found written)
  proto::RestorePlan plan_;            // as published
  bool plan_loaded_ = false;
  bool plan_dirty_ = true;             // a step was judged anew or the membership moved
  uint64_t plan_ranks_version_ = 0;    // membership version the plan's node order used
  EvictedNodes evicted_;               // as last read (the plan puts their copies last); the
                                       // lost nodes (gone_) among them, as not serving
  GoneNodes gone_;
  static constexpr int64_t kGoneLookMs = 2000;
  int64_t next_gone_look_ms_ = 0;
  uint64_t gone_members_version_ = 0;  // the membership version SawAlive last walked
  std::vector<std::string> unplannable_;  // verified steps held only on gone evicted nodes (warned)
  struct Seen {
    uint64_t incarnation = 0;
    bool gone = false;  // dead or stopped: ended without a clean exit
  };
  std::map<int, Seen> seen_;              // each rank's newest incarnation as last looked at
  uint64_t ends_version_ = 0;                 // LoopContext::rank_ends_version folded
  std::map<std::string, int64_t> ends_seen_;  // NoteEnds: per node its newest end (its clock);
                                              // never lowered (a relaunch hides the end it followed)
  proto::CkptRewinds rewinds_;            // as stored (ckpt_lineage.h)
  int64_t relaunched_from_ms_ = 0;        // the latest start of relaunched ranks not yet a rewind
  int64_t held_plan_step_ = -2;           // a plan held back while a launch restores (logged once)
  std::optional<Clock::time_point> held_since_;  // since when (bounded: kMaxPlanHold)
  std::pair<uint64_t, uint64_t> mismatch_looked_at_{UINT64_MAX, 0};  // (membership, ends) versions
  uint64_t mismatch_launch_ = 0;          // the launch (its first start) a mismatch was reported of
  std::optional<int64_t> mismatch_rewind_;  // the step most of it restored: a rewind once it is gone
  int64_t finished_at_ms_ = 0;            // a finish not yet decided (NoteFinished)
  int64_t finished_step_ = -1;            // the step it ended at
  Clock::time_point finished_seen_{};     // when it was noted
  Clock::time_point moved_at_{};          // a rank was last seen relaunched or newly gone
  bool moved_ = false;                    // moved_at_ is set
  Clock::time_point now_{};               // the round's (or the save's judgement's) time
  Clock::time_point next_round_{};
};

}  // namespace ft::master

#endif  // FT_FTMASTER_CKPT_ROUND_H_
