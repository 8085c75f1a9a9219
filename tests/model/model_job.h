// The model's training job: one process per rank of a dp x tp grid, each with its arena
// (model_arena.h), stepping in lockstep through one collective per step (a step's collective
// completes once every rank of the launch entered it, so ranks are at most one step apart), then
// its optimizer update window, then ft_step_done. Saves follow libft.so's rules:
//   - periodic: at ft_step_done of every K-th step, a whole copy (the snapshot is ordered on the
//     device before the next update);
//   - just-in-time (a save command via the worker): the step held now, torn when it lands
//     inside the update window;
//   - termination (SIGTERM; preload/ckpt/ckpt_agent_term.cc): an update in progress finishes,
//     the held step is saved (unless already committed), then the rank trains exactly one step
//     more (updates after it are held) and saves that one too if it completes within about two
//     step times; a rank whose next step cannot complete (a peer gone) keeps the first copy.
// A relaunched process restores from its node's plan file (ft_restore: waits while it is
// missing or settling, FT_RESTORE_WAIT), from any slot of a source arena that holds the planned
// step whole with the planned digest. No threads, no clock of its own: Tick(now) moves it.
#ifndef FT_TESTS_MODEL_MODEL_JOB_H_
#define FT_TESTS_MODEL_MODEL_JOB_H_

#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "tests/model/model_arena.h"
#include "tests/model/model_draw.h"

namespace ft::model {

// How a process ended, as its worker sees it (ftworker/monitor/rank_monitor.cc Finish).
struct ExitNote {
  int rank = -1;
  int64_t unix_ms = 0;
  int64_t code = 0;            // exit status or -signal
  bool stopped_by_worker = false;
  int terminated_by_signal = 0;
  int64_t terminate_unix_ms = 0;
  int64_t step = -1;           // the last ft_step_done
};

// A save command's answer (the mailbox's ack: "done" with "saved step=..", or "failed").
struct SaveAck {
  std::string command_id;
  int rank = -1;
  std::string result;
  std::string message;
};

// What one rank of one launch did at its restore.
struct RestoreRecord {
  int launch = 0;
  int rank = -1;
  bool done = false;         // ft_restore returned
  bool ok = false;           // it returned a step (or none)
  int64_t step = -1;         // restored step; -1 none (from scratch)
  uint64_t digest = 0;       // the restored copy's digest
  uint64_t planned_digest = 0;
  int64_t plan_version = 0;
  std::string why;           // a failure, for people
};

class ModelJob {
 public:
  using Trace = std::function<void(const std::string&)>;

  ModelJob(const Draw& draw, std::mt19937_64* rng, Trace trace);

  // Starts every rank as launch `launch` (a relaunch in place: the arenas stay).
  void Launch(int launch, int64_t now_ms);
  void Tick(int64_t now_ms, const std::function<std::string(int rank)>& plan_path_of);

  void Kill(int rank, int64_t now_ms);               // SIGKILL
  void FailExit(int rank, int64_t now_ms);           // exit status 1
  void Terminate(int rank, int64_t now_ms, bool by_worker);  // SIGTERM (idempotent)
  // A save command reached the rank's mailbox.
  void JitSave(int rank, const std::string& command_id, int64_t now_ms);

  std::vector<ExitNote> TakeExits() { return std::exchange(exits_, {}); }
  std::vector<SaveAck> TakeAcks() { return std::exchange(acks_, {}); }

  int world() const { return static_cast<int>(ranks_.size()); }
  int ShardOf(int rank) const { return draw_.sharded ? rank : rank % draw_.tp; }
  bool alive(int rank) const { return ranks_[rank].alive; }
  bool any_alive() const;
  bool terminating(int rank) const { return ranks_[rank].terminating; }
  uint64_t incarnation(int rank) const { return ranks_[rank].incarnation; }
  int64_t done_step(int rank) const { return ranks_[rank].done_step; }
  bool in_update(int rank) const { return ranks_[rank].phase == Phase::kUpdate; }
  int launch() const { return launch_; }
  const ModelArena& arena(int rank) const { return arenas_[rank]; }
  const std::vector<RestoreRecord>& restores() const { return restores_; }
  // Every rank of the current launch restored and trained `steps` steps past it.
  bool Settled(int steps) const;
  // The newest step every shard holds whole in some arena slot, counting only copies of this
  // launch's lineage (saved by it, or at or below the step it restored); 0 when some shard has none.
  int64_t NewestWholeEverywhere() const;
  int64_t NewestReached() const;  // the newest ft_step_done of any alive rank
  // A rank's phase and its time left, for aiming a fault inside or outside an update.
  int64_t UpdateStartsIn(int rank, int64_t now_ms) const;

 private:
  enum class Phase { kRestoring, kCompute, kCollective, kGap, kUpdate, kHeld, kGone };
  struct Rank {
    bool alive = false;
    uint64_t incarnation = 0;
    Phase phase = Phase::kGone;
    int64_t until_ms = 0;
    int64_t done_step = 0;
    int64_t restored_step = -2;  // -2: not restored yet
    int64_t restore_started_ms = 0;
    // A save in progress.
    int save_slot = -1;
    int64_t save_end_ms = 0;
    SlotCopy save_copy;
    std::vector<std::string> save_waiters;  // save commands answered when it ends
    // Termination (SIGTERM).
    bool terminating = false;
    bool by_worker = false;
    int64_t term_at_ms = 0;
    int term_phase = 0;          // 0 finish the update, 1 held step saving, 2 one step more, 3 its save
    int64_t hold_after = INT64_MAX;  // no update of a later step starts
    int64_t more_deadline_ms = 0;
    int64_t kill_at_ms = INT64_MAX;  // the SIGKILL after the grace
    size_t restore_index = 0;
  };

  void StartSave(int rank, int64_t now_ms, bool torn, const std::string& origin);
  void FinishSave(int rank, int64_t now_ms);
  void StepDone(int rank, int64_t now_ms);
  void Exit(int rank, int64_t now_ms, int64_t code, bool signalled);
  void TryRestore(int rank, int64_t now_ms, const std::string& plan_path);
  void AdvanceTermination(int rank, int64_t now_ms);
  void CompleteCollective(int64_t now_ms);
  int64_t Jitter(int64_t lo, int64_t hi);

  const Draw& draw_;
  std::mt19937_64* rng_;
  Trace trace_;
  std::vector<Rank> ranks_;
  std::vector<ModelArena> arenas_;
  std::vector<ExitNote> exits_;
  std::vector<SaveAck> acks_;
  std::vector<RestoreRecord> restores_;
  int launch_ = 0;
  int64_t launched_ms_ = 0;
  int64_t lineage_step_ = 0;  // the step this launch restored (0: from scratch)
};

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_JOB_H_
