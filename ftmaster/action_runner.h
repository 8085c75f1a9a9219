// ft::master::ActionRunner: carries out a decided action (`action` in the master hash,
// proto/master_codec.h): save commands to the save targets' nodes, their acknowledgements
// awaited until save_deadline, the saved copies verified (bounded by copy_wait) and the restore
// plan published (through the checkpoint round), then stop commands to every node in
// ft:{J}:workers and of the ranks it was decided for; job_state goes stopping → stopped.
// Every phase change is written to the master hash with the commands that start it, so a new
// leader resumes an action where it stands.
// Each phase's commands are computed as a value (SaveBatch, StopBatch: no Redis) and written as
// one fenced batch. Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_ACTION_RUNNER_H_
#define FT_FTMASTER_ACTION_RUNNER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ftmaster/core/ckpt_verify.h"
#include "ftmaster/ckpt_round.h"
#include "ftmaster/job_membership.h"
#include "ftmaster/loop_context.h"

namespace ft::master {

// A phase's commands and the action as it stands once they are written (sent, acks_from, the
// phase's deadline). Pure: the runner writes `writes` fenced, then takes `next`.
struct CommandBatch {
  Action next;
  std::vector<redis::Argv> writes;  // the commands' XADDs, then the action's HSET
  uint64_t commands = 0;
  std::vector<int> nodeless;        // save targets with no node known: not asked
};
// The processes a command decided at `decided_unix_ms` is for (proto::Command::incarnations),
// by node. A rank relaunched since (in place by its launcher, while the action ran) is not
// named, and the worker refuses it the command. `at_decision`: `members` is the membership as
// the master knew it when it decided, every process in it is decided for — no clock compared.
// Otherwise (a master that took over the action) the members whose process had started by
// `decided_unix_ms`: a process's start is its node's clock, the decision the master's, so a skew
// past the gap between them names the wrong processes.
class DecidedFor {
 public:
  DecidedFor(std::span<const proto::Membership> members, int64_t decided_unix_ms, bool at_decision = false);
  std::vector<proto::RankIncarnation> OfNode(const std::string& node) const;
  std::vector<proto::RankIncarnation> OfRank(int rank) const;

 private:
  std::map<std::string, std::vector<proto::RankIncarnation>> by_node_;
  std::map<int, uint64_t> by_rank_;
};

// `acks_from`: the acks stream's last id before the commands go out; `members`: the membership
// as the master knows it (DecidedFor).
CommandBatch SaveBatch(const Action& a, const std::string& acks_from, int64_t unix_ms,
                       const proto::Keys& keys, int64_t save_deadline_ms,
                       std::span<const proto::Membership> members, bool at_decision = false);
CommandBatch StopBatch(const Action& a, const std::string& acks_from, std::vector<std::string> nodes,
                       int64_t unix_ms, const proto::Keys& keys, double grace_s,
                       std::span<const proto::Membership> members, bool at_decision = false);

class ActionRunner {
 public:
  using Clock = LoopContext::Clock;

  ActionRunner(LoopContext* ctx, JobMembership* membership, CkptRound* ckpt)
      : ctx_(ctx), membership_(membership), ckpt_(ckpt) {}

  // A new term: no action until LoadTerm reads the stored one; the acks are due now.
  void NewTerm(Clock::time_point now);
  void LoadTerm(const MasterHash& state);
  // An action this master just decided and wrote (the window round's). `decided_for`: the
  // processes it is for — the membership as it was when the incident's window opened (a rank
  // relaunched since is not one of them), and the ranks it lacked then as the membership holds
  // them now. Either way only the processes that had started by the action's decided_unix_ms.
  void Start(Action action, std::vector<proto::Membership> decided_for = {});
  // The action another master stored (it decided the window first). Unchanged when Redis failed.
  void LoadStored();
  // The job was launched again after its action: the action is forgotten (its `action` field
  // deleted by the caller).
  void Drop();

  // One step of the action; call while active().
  void Run(Clock::time_point now, int64_t unix_ms);

  bool active() const { return action_ && action_->phase != proto::ActionPhase::kDone; }
  const std::optional<Action>& action() const { return action_; }
  // Whether `m`'s process started after the action was decided (a relaunch): another process
  // than the one of its rank this master knew when it decided; for a rank it did not know then,
  // or an action taken over from another master, by the clocks (DecidedFor).
  bool StartedAfterDecision(const proto::Membership& m) const;

 private:
  std::string LastAckId();  // "" when Redis failed
  void LoadPending();
  void ReadAcks();
  // The acknowledgements of the action's commands, read every kAckPoll: true once none is
  // pending or the deadline has passed.
  bool AcksSettled(Clock::time_point now, int64_t unix_ms, int64_t deadline_unix_ms);
  // After the save acks settled: true once the ranks that answered done have reported their
  // copies (or copy_wait passed); then the step is judged and *judged set (nullptr: none).
  bool SaveCopiesSettled(Clock::time_point now, int64_t unix_ms, const StepJudgement** judged);
  // At the end of a save phase: how many shards were saved, kept as `checkpoint` in the master
  // state, logged and printed with the incidents. false when the write was fenced out.
  bool RecordSaveOutcome(const Action& a, const StepJudgement* judged);

  LoopContext* ctx_;
  JobMembership* membership_;
  CkptRound* ckpt_;
  std::optional<Action> action_;
  // The membership when this master decided action_ (Start); none for a stored one (LoadStored).
  std::optional<std::vector<proto::Membership>> decided_members_;
  std::set<std::string> pending_acks_;
  bool pending_loaded_ = false;
  std::string ack_cursor_;
  std::map<int, std::string> save_results_;  // rank -> ack result of the current save phase
  std::map<int, std::optional<proto::SavedCopy>> save_copies_;  // rank -> the copy its ack reports
  std::optional<Clock::time_point> copies_deadline_;  // waiting for the saved copies' reports
  Clock::time_point next_acks_{};
};

}  // namespace ft::master

#endif  // FT_FTMASTER_ACTION_RUNNER_H_
