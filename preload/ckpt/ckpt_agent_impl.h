// libft.so internal: the checkpoint agent's state, shared by its two halves — the app-facing
// calls (ckpt_agent.cc: registration, ft_update_begin, ft_step_done, ft_restore) and the
// ft-ckpt thread (ckpt_agent_thread.cc: saves, restores, the commands the poller hands over).
// The lock mu_ guards registration and the work queue; it is never held across a CUDA call, a
// file operation or a wait.
#ifndef FT_PRELOAD_CKPT_AGENT_IMPL_H_
#define FT_PRELOAD_CKPT_AGENT_IMPL_H_

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_cuda.h"
#include "preload/ckpt/ckpt_restore.h"
#include "preload/ckpt/ckpt_save.h"
#include "preload/ckpt/step_markers.h"
#include "shm/mailbox.h"

namespace ft::preload::agent {

using host::AppCuda;
using host::kMaxDevices;

constexpr int64_t kNoStep = INT64_MIN;  // no step known yet

// Where registration stands. kOpen → (ft_register_end) kEnding → kReady, kNoArena or kEmpty.
enum class Phase { kOpen, kEnding, kReady, kNoArena, kEmpty };

// What an app thread asks of the agent thread and waits for.
struct AppRequest {
  enum class Kind { kPeriodic, kRestore };
  Kind kind = Kind::kPeriodic;
  int64_t step = 0;     // periodic: the step saved
  // Periodic snapshot that never blocks the host: recorded on the app's stream at
  // ft_step_done; the copies wait for it on the device. Null: a blocking periodic save.
  cudaEvent_t after = nullptr;
  ckpt::NodePlan plan;  // restore
  // Answers, under Agent::mu_.
  bool copied = false;    // periodic: the copy ended, or (snapshot) every copy is issued
  bool finished = false;  // restore: done
  RestoreOutcome outcome;
};

// Where a just-in-time or termination save cuts the app's timeline (ckpt_agent_cut.cc): the
// step its copy is labelled with, and whether the copy turned out torn (asked once every chunk
// has landed).
struct SaveCut {
  int64_t step = 0;
  std::function<bool()> torn;
};

struct SaveOutcome {
  Status status;
  std::string message;  // the ack's words
  int64_t step = kNoStep;  // what was committed (status ok)
  bool torn = false;
};

using ckpt::SaveOrigin;  // why a save runs: in the log and the manifest

// Acknowledges a save command with a save's outcome, or with a refusal.
void Ack(uint64_t seq, const SaveOutcome& o);
void AckNow(uint64_t seq, StatusCode code, const std::string& message);

// Sets the calling thread's last error and returns `result`.
int Fail(int result, std::string message);

class Agent {
 public:
  int SetShard(int tp, int pp, int dp);
  int Register(const char* name, const void* ptr, size_t bytes);
  int RegisterEnd();
  int UpdateBegin(cudaStream_t stream);
  int StepDone(int64_t step);
  int Restore(int64_t* step);
  // What ft_restore did, in the segment for the worker (step -1: nothing restored).
  void RecordRestored(int64_t step, int64_t plan_version);
  void HandOver(const shm::Command& command);
  // At exit() with `status`: a save in progress is finished; a failing exit (non-zero) saves
  // the last completed step first (ckpt_agent_term.cc); then the termination signal's end.
  void FinishAtExit(int status) noexcept;
  // ckpt_agent_term.cc: the save before the process ends (ckpt_agent.h, SaveBeforeEnd);
  // returns when it committed, failed or the grace ran out.
  EndSave SaveBeforeEnd(const char* reason, bool caller_ends);
  int SaveOnFailure();
  // The process is ending: save commands, queued or to come, are refused (ending_).
  void RefuseSavesFromNow();
  // ckpt_agent_term.cc: the save of a process that fails (exit() with a non-zero status,
  // std::terminate): the last completed step, unless the registered state may be gone — a
  // buffer the app freed, host memory main's locals owned, a host buffer no longer mapped —
  // which the log says, led by `cause`.
  void SaveAsTheProcessFails(const std::string& cause);
  // Every registered host buffer is still mapped (the exit save would not fault on it).
  bool HostBuffersMapped(const std::string& cause) const;
  // Once main returned: the first registered host buffer outside static storage (main's locals
  // may have owned it), said for the log; empty while main runs, or when there is none.
  std::string HostBufferMainMayHaveOwned() const;
  // ckpt_agent_freed.cc: memory the app freed (ckpt_agent.h, NoteMemoryFreed).
  void NoteFreed(const void* ptr, uint64_t bytes);

 private:
  // ckpt_agent_freed.cc: why no save or restore may touch the registered buffers now (a buffer
  // the app freed), or empty; short enough for an ack (96 bytes).
  std::string FreedBufferLocked() const REQUIRES(mu_);
  std::string FreedBuffer() EXCLUDES(mu_);
  int OpenArena(std::vector<Registered> buffers, int tp, int pp, int dp);
  void GiveUp(const std::string& message, const std::string& ack, StatusCode code);
  // ckpt_agent_prepare.cc, agent thread, first: the arena's data regions reserved, mapped and
  // pinned — the slot a restore uses first, then a restore asked for meanwhile, then the rest.
  bool PrepareArena(AgentCuda* cuda);
  // `slot` (-1: every slot) reserved, mapped and pinned unless it was; false when the agent
  // gave up (no room). *pinned says how they were pinned, for the log.
  bool PrepareSlots(int slot, int threads, std::string* pinned);
  // The arena could not be reserved: the agent gives up (GiveUp) and says why. Always false.
  bool Unreserved(const Status& reserved);
  // Then every page of the prepared arena's slots touched, a piece at a time between requests.
  void StartWarmUp();
  bool WarmPending() const;
  void WarmNextPiece();
  void Run();
  RestoreOutcome Restore(const AppRequest& request, AgentCuda* cuda);
  // Restore, then the outcome handed to the waiting ft_restore.
  void ServeRestore(const std::shared_ptr<AppRequest>& request, AgentCuda* cuda);
  void Failed(const std::shared_ptr<AppRequest>& request, std::vector<uint64_t>* waiters) noexcept;
  SaveOutcome Save(const std::shared_ptr<AppRequest>& periodic, AgentCuda* cuda, SaveOrigin origin);
  // The helpers that checksum a save's copy of `bytes`, and check a restore's: the configured
  // count, else the rank's share of the node's hardware threads (ckpt_checksummer.h).
  int HelperThreads(uint64_t bytes) const;
  void FinishSave(std::vector<uint64_t> waiters, const SaveOutcome& outcome);
  // The optimizer's work may have begun: an update window is open and its device marker was
  // reached (or there is none to ask).
  bool TornNow();
  // ckpt_agent_cut.cc: the step a save's copy holds — the device's (StepMarkers) when the app
  // names its stream, else the host's — waiting a little for the device to reach a step
  // boundary. Agent thread.
  SaveCut CutForSave(SaveOrigin origin);
  // A blocking periodic save of `step`: the app thread waits until the device finished it
  // (ft_step_done may come with the step's work still queued).
  void WaitStepOnDevice(int64_t step);
  // ft_update_begin and ft_step_done wait here while a termination save holds the state.
  void WaitWhileTermHold();
  // A termination save holds the state: now (term_hold_), or once the next step completed
  // (hold_after_steps_).
  bool HeldNow() const {
    return term_hold_.load(std::memory_order_seq_cst) ||
           steps_done_.load(std::memory_order_seq_cst) > hold_after_steps_.load(std::memory_order_seq_cst);
  }
  // ckpt_agent_term.cc: the save of the held step (requested of the agent thread, waited for);
  // then, after a signal, one step more and its save.
  EndSave SaveHeldStep(const char* name, std::chrono::steady_clock::time_point start,
                       std::chrono::steady_clock::time_point deadline);
  void KeepTheOlderCopyLocked() REQUIRES(mu_);
  // Before a just-in-time or termination save of `saving`: the copy of the step the node's
  // restore plan names stays when a newer copy sits beside it (the save writes over that one).
  void KeepThePlannedCopy(int64_t saving) EXCLUDES(mu_);
  EndSave SaveOneStepMore(const char* name, std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point deadline, EndSave first);
  int64_t StepLabel() const;
  // Neither a step completed nor a restore done in this process: the registered state is what
  // the app initialised, not a checkpoint, and a save of it would commit it as a step over the
  // copy a restore is about to need (applications spend minutes before ft_restore).
  bool NothingToSaveYet() const;
  cudaEvent_t UpdateEventFor(int device, AppCuda* cuda);
  cudaEvent_t StepEventFor(int device, AppCuda* cuda);
  // ft_step_done's snapshot: records the step's end on the app's stream (the one ft_update_begin
  // saw last); null when there is none or it cannot be recorded into (a blocking save then).
  cudaEvent_t RecordStepEnd();
  // ft_update_begin when it could not order the optimizer behind the snapshot's copies on the
  // device (no stream, a capturing one, an error): the host waits for the copies instead.
  void WaitSnapshotLanded();
  // A due snapshot skipped because the previous one still runs (mu_ held).
  void SkippedLocked(int64_t step) REQUIRES(mu_);

  Mutex mu_;
  CondVar work_cv_;  // the agent thread waits for work
  CondVar done_cv_;  // app threads wait for their request
  // Registration (mu_). Immutable once phase_ left kEnding.
  Phase phase_ = Phase::kOpen;
  std::string arena_error_;  // kNoArena: why (ft_last_error)
  std::string arena_ack_;    // kNoArena: why, short enough for an ack (96 bytes)
  int tp_ = -1, pp_ = -1, dp_ = -1;
  std::vector<Registered> buffers_;
  // The first registered buffer the app freed (NoteFreed), or empty; set once (mu_).
  std::string freed_buffer_ GUARDED_BY(mu_);
  ckpt::Manifest base_;  // identity and layout of every save
  ckpt::Arena arena_;
  int device_ = -1;
  bool has_host_buffers_ = false;    // copied as the host left them
  bool has_device_buffers_ = false;  // copied as the device left them (StepMarkers)
  // The agent thread prepared the arena (PrepareArena): saves and restores run only after it,
  // and a periodic snapshot due before it waits for it.
  bool arena_prepared_ GUARDED_BY(mu_) = false;
  // Set at exit: a preparation still running stops populating and skips pinning.
  std::atomic<bool> stop_preparing_{false};
  // Pinning a range of slots failed (agent thread only): the rest is not tried.
  bool pin_failed_ = false;
  // The warm-up's progress (agent thread only): warm_done_ of warm_total_ slot bytes touched,
  // from the offset warm_from_ on, wrapping around.
  uint64_t warm_total_ = 0;
  uint64_t warm_done_ = 0;
  uint64_t warm_from_ = 0;
  double warm_seconds_ = 0;
  // Work (mu_).
  std::deque<std::shared_ptr<AppRequest>> app_requests_ GUARDED_BY(mu_);
  std::vector<uint64_t> jit_waiting_ GUARDED_BY(mu_);      // kSave commands not yet served
  std::vector<uint64_t> at_step_waiting_ GUARDED_BY(mu_);  // kSaveAtStep: served by the next periodic save
  std::vector<uint64_t> attached_ GUARDED_BY(mu_);         // save commands that arrived while a save ran
  bool saving_ GUARDED_BY(mu_) = false;
  bool committing_ GUARDED_BY(mu_) = false;  // the running save copied and checksummed everything
  // The running save's copy failed and its app thread was told so: it can only fail now, and a
  // save command that comes after is served by a save of its own, not coalesced into it.
  bool save_failed_ GUARDED_BY(mu_) = false;
  int restoring_ GUARDED_BY(mu_) = 0;  // ft_restore calls under way: save commands wait for them
  int64_t committed_step_ GUARDED_BY(mu_) = kNoStep;  // the last save this process committed, not torn
  // A termination save asked of the agent thread (mu_); cleared when it takes it, and the
  // save's result is committed_step_ once saving_ is false again.
  bool term_requested_ GUARDED_BY(mu_) = false;
  // The step the last termination save committed whole; kNoStep: failed, torn, or none yet.
  int64_t term_saved_ GUARDED_BY(mu_) = kNoStep;
  SaveOutcome term_outcome_ GUARDED_BY(mu_);  // that save's, for the commands that come after it
  // The committed copy is one this process took by a just-in-time or termination save: after a
  // crash the survivors hold such a copy and the rank that died does not, while a periodic
  // snapshot or a restored step is on every rank.
  bool committed_is_local_ GUARDED_BY(mu_) = false;
  // A signal's one step more is under way (ckpt_agent_term.cc, SaveOneStepMore): no periodic
  // save falls due, and the termination's save of that step writes over a local committed copy
  // when the other slot keeps an older whole one.
  bool term_one_step_more_ GUARDED_BY(mu_) = false;
  // Set by SaveBeforeEnd from start to end (under mu_, waited on through done_cv_): its causes
  // may race (a SIGTERM and a failure).
  std::atomic<bool> end_saving_{false};
  // The process is ending (ft_save_on_failure returned, exit() began): the registered memory
  // is being freed, so save commands are refused from now on; the termination save of a failing
  // exit still runs.
  std::atomic<bool> ending_{false};
  // Set while a termination save waits for the state to hold still and copies it: the next
  // ft_update_begin waits (bounded by the grace), so the copy is one step.
  std::atomic<bool> term_hold_{false};
  // A signalled rank's one step more (SaveOneStepMore): its update waits again once steps_done_
  // is past this (UINT64_MAX: no such hold).
  std::atomic<uint64_t> hold_after_steps_{UINT64_MAX};
  // App threads between entering ft_update_begin and publishing update_open_: a termination
  // save that set term_hold_ waits for them before it reads update_open_ (each side stores
  // its flag, then reads the other's, seq_cst: one of them sees the other).
  std::atomic<int> updates_entering_{0};
  // Update windows opened and steps completed, ever: a copy during which either moved holds
  // two steps' bytes and is torn, whatever the open flag reads at its end.
  std::atomic<uint64_t> update_windows_{0};
  std::atomic<uint64_t> steps_done_{0};
  // When the last ft_step_done came and how long the step before it took (steady ns): how
  // long a termination save waits for an update in flight to finish.
  std::atomic<uint64_t> last_step_done_ns_{0};
  std::atomic<uint64_t> step_interval_ns_{0};
  // App-side progress (lock-free: ft_step_done and ft_update_begin are on the training loop).
  std::atomic<int64_t> last_step_{kNoStep};
  std::atomic<int64_t> restored_step_{kNoStep};
  std::atomic<bool> update_open_{false};  // ft_update_begin after the last ft_step_done
  std::atomic<cudaEvent_t> update_event_{nullptr};  // null: the update may have begun
  std::atomic<cudaEvent_t> device_events_[kMaxDevices] = {};
  // Snapshots that never block the host (ckpt_save.h, SaveJob::after).
  std::atomic<cudaStream_t> update_stream_{nullptr};  // ft_update_begin's last recordable stream
  std::atomic<int> update_device_{-1};                // ... and its device
  // Which step the device memory holds (step_markers.h).
  StepMarkers markers_;
  std::atomic<cudaEvent_t> step_events_[kMaxDevices] = {};  // ft_step_done's marker, per device
  // The event after the running snapshot's copies, until they landed: every ft_update_begin
  // makes its stream wait for it. Set by the agent thread before ft_step_done returns.
  std::atomic<cudaEvent_t> snapshot_copied_{nullptr};
  std::atomic<uint64_t> snapshots_issued_{0};  // snapshots whose copies were issued
  std::atomic<uint64_t> snapshots_landed_{0};  // ... and have landed (or were drained)
  std::atomic<uint64_t> snapshot_orders_{0};   // update windows ordered behind a snapshot
  // Due snapshots skipped (mu_): ever, since the last snapshot taken, since the last log line.
  uint64_t skipped_total_ GUARDED_BY(mu_) = 0;
  uint64_t skipped_since_save_ GUARDED_BY(mu_) = 0;
  uint64_t skipped_since_log_ GUARDED_BY(mu_) = 0;
  uint64_t skip_logged_ns_ GUARDED_BY(mu_) = 0;
};

// ckpt_agent_freed.cc: a buffer is registered, so frees are worth comparing with the table
// (until then NoteMemoryFreed costs one load).
void NoteRegistration();

// The process's one agent, made at first use and never destroyed (the agent thread and the
// poller may outlive static destruction).
Agent& TheAgent();

// ckpt_agent_term.cc: from the first ft_register_end on, std::terminate saves the last completed
// step before the handler it replaced (the C++ runtime's, or the app's) ends the process.
void InstallTerminateSave();
// At each step: a terminate handler the app set after registration (a framework's start-up, a
// crash reporter) is put behind the save, as one set before registration is. A check of one
// pointer while the handler is the save's.
void KeepTerminateSave();

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_AGENT_IMPL_H_
