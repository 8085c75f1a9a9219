// The ft-ckpt thread's half of the checkpoint agent (ckpt_agent_impl.h): the save commands
// the poller hands over, the work loop (just-in-time and periodic saves, restores), the
// acknowledgements, and the wait for a save in progress at exit.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "include/ft/ft.h"
#include "jitckpt/checksum.h"
#include "jitckpt/node_plan.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"
#include "preload/ckpt/ckpt_checksummer.h"
#include "preload/ckpt/python_process.h"
#include "preload/ckpt/static_storage.h"
#include "shm/save_ack.h"

namespace ft::preload::agent {

void Ack(uint64_t seq, const SaveOutcome& o) {
  if (!host::Started() || !host::Segment()) return;
  int32_t result = o.status.ok() ? 0 : static_cast<int32_t>(o.status.code());
  shm::AckCommand(*host::Segment(), seq, result, o.message);
}

void AckNow(uint64_t seq, StatusCode code, const std::string& message) {
  if (!host::Started() || !host::Segment()) return;
  shm::AckCommand(*host::Segment(), seq, static_cast<int32_t>(code), message);
}

// At exit (the app returned from main or called exit): a save in progress, or asked for, is
// finished first — typically the periodic save of the last step, whose commit runs after
// ft_step_done returned; cut short, it would leave the arena without any committed copy.
// Bounded: a copy stuck behind a dead device is given up after kExitWait. A failing exit (a
// non-zero status: an uncaught error, a peer's collective failing) then saves the last
// completed step, as a termination signal would: its peers die of the same failure
// milliseconds later, and nothing would be left alive to answer a just-in-time save. Not in
// a Python process: the interpreter freed its objects (the tensors the buffers point into)
// before C exit handlers run; its helper calls ft_save_on_failure before that instead.
void Agent::FinishAtExit(int status) noexcept {
  constexpr auto kExitWait = std::chrono::seconds(10);
  try {
    if (!host::Started() || getpid() != host::OwnerPid()) return;  // a forked child: not its saves
    {
      // The arena still being prepared is cut short (what is left of its pages then faults in
      // at first use, unpinned) and waited for: its pinning must not race the CUDA runtime's
      // own teardown, and a failing exit's save below needs its reservation.
      stop_preparing_.store(true, std::memory_order_release);
      MutexLock lock(&mu_);
      if (phase_ != Phase::kReady) return;
      bool done = done_cv_.WaitFor(&mu_, kExitWait, [&]() REQUIRES(mu_) {
        return phase_ != Phase::kReady ||
               (arena_prepared_ && !saving_ && app_requests_.empty() && jit_waiting_.empty());
      });
      if (!done) {
        FT_LOG(Warn, Ckpt, "exit: {} after 10 s is abandoned",
               arena_prepared_ ? "a save still running (uncommitted)" : "the host arena's preparation");
      }
    }
    // A program that returned from main has destroyed its locals: no save command may copy them.
    RefuseSavesFromNow();
    if (status != 0) {
      if (InPythonProcess()) {
        FT_LOG(Debug, Ckpt, "exit status {} in a Python process: no save at exit (ft_save_on_failure's)",
               status);
      } else {
        SaveAsTheProcessFails("exit status " + std::to_string(status));
      }
    }
  } catch (...) {
  }
  host::FinishTerminationAtExit();
}

// A program that returned from main has run its locals' destructors: a host buffer whose
// pages are gone would fault the save's copy and end the process by SIGSEGV instead of its
// status. msync fails with ENOMEM on a range that is not wholly mapped.
bool Agent::HostBuffersMapped(const std::string& cause) const {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const Registered& b : buffers_) {
    if (b.where != Registered::Where::kHost || b.bytes == 0) continue;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(b.ptr) & ~(page - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(b.ptr) + b.bytes;
    if (msync(reinterpret_cast<void*>(begin), end - begin, MS_ASYNC) != 0) {
      FT_LOG(Warn, Ckpt, "{}: no save: the registered host buffer '{}' is no longer mapped (the arena keeps its "
             "committed copy)", cause, b.name);
      return false;
    }
  }
  return true;
}

// main's locals ran their destructors before exit() began: a std::vector's storage went back to
// the allocator, which writes its own bookkeeping into it, and a stack array is overwritten by
// the exit handlers' frames — still mapped, so HostBuffersMapped passes, but no longer the
// app's state, and a save would commit it as the last step's. Device memory is not at stake
// (its frees are seen: FreedBuffer), nor is static storage (it lives until the process ends).
std::string Agent::HostBufferMainMayHaveOwned() const {
  if (!host::MainReturned()) return {};
  for (const Registered& b : buffers_) {
    if (b.where != Registered::Where::kHost || b.bytes == 0 || InStaticStorage(b.ptr, b.bytes)) continue;
    return "main returned, and the registered host buffer '" + b.name + "' is not in static storage (heap, "
           "stack or mapped memory, which main's locals may have owned)";
  }
  return {};
}

namespace {
// Acknowledged as a failed save (shm/mailbox.h: kNotReady would read "scheduled", kNotFound
// "nothing registered" — neither is true), the message saying why.
constexpr StatusCode kNothingToSaveCode = StatusCode::kUnavailable;
constexpr const char* kNothingToSave = "no step completed or restored yet: nothing to save";
constexpr StatusCode kEndingCode = StatusCode::kUnavailable;
constexpr const char* kEnding = "the process is ending (its memory is being freed): no save now";
}  // namespace

void Agent::RefuseSavesFromNow() {
  std::vector<uint64_t> refused;
  {
    MutexLock lock(&mu_);
    ending_.store(true, std::memory_order_release);
    refused.swap(jit_waiting_);
    refused.insert(refused.end(), at_step_waiting_.begin(), at_step_waiting_.end());
    at_step_waiting_.clear();
  }
  for (uint64_t seq : refused) AckNow(seq, kEndingCode, kEnding);
}

void Agent::HandOver(const shm::Command& command) {
  bool at_step = command.type == static_cast<uint32_t>(shm::CommandType::kSaveAtStep);
  std::string refusal;
  StatusCode code = StatusCode::kNotFound;
  {
    MutexLock lock(&mu_);
    if (ending_.load(std::memory_order_acquire)) {
      refusal = kEnding;
      code = kEndingCode;
    } else {
      switch (phase_) {
        case Phase::kEmpty:
          refusal = "nothing registered";
          break;
        case Phase::kOpen:
          // A periodic save waits for the next ft_step_done, which ends registration.
          if (buffers_.empty() || !at_step) refusal = "nothing registered";
          break;
        case Phase::kNoArena:
          refusal = arena_ack_;
          code = StatusCode::kIoError;
          break;
        default:
          // A restore under way may still give the state a step: the command waits for it.
          if (!at_step && restoring_ == 0 && NothingToSaveYet()) {
            refusal = kNothingToSave;
            code = kNothingToSaveCode;
          }
          break;
      }
    }
    if (refusal.empty()) {
      if (at_step) {
        at_step_waiting_.push_back(command.seq);
      } else if (saving_ && !save_failed_) {
        attached_.push_back(command.seq);  // coalesced with the save that runs
      } else {
        jit_waiting_.push_back(command.seq);
        work_cv_.NotifyOne();
      }
      return;
    }
  }
  AckNow(command.seq, code, refusal);
}

int Agent::HelperThreads(uint64_t bytes) const {
  return ChecksumThreads(host::Started() ? host::RuntimeConfig().ckpt_checksum_threads : 0,
                         std::thread::hardware_concurrency(),
                         host::Started() ? host::Identity().local_world_size : -1, bytes);
}

SaveOutcome Agent::Save(const std::shared_ptr<AppRequest>& periodic, AgentCuda* cuda, SaveOrigin origin) {
  auto start = std::chrono::steady_clock::now();
  SaveJob job;
  job.buffers = &buffers_;
  job.manifest = base_;
  SaveCut cut;
  if (!periodic) {
    (void)cuda->Prepare(device_);  // the markers are polled in relaxed capture mode
    cut = CutForSave(origin);
  }
  job.manifest.step = periodic ? periodic->step : cut.step;
  if (!periodic && cut.step != kNoStep) {
    // The one step more's copy, of a step newer than the copy only this process took: it writes
    // over that copy (ckpt_agent_term.cc). Known only now: a device behind its host may still
    // hold the step of that copy, which then stays.
    MutexLock lock(&mu_);
    if (term_one_step_more_ && committed_is_local_ && committed_step_ != kNoStep && cut.step > committed_step_) {
      KeepTheOlderCopyLocked();
    }
  }
  if (!periodic && cut.step != kNoStep) KeepThePlannedCopy(cut.step);
  job.manifest.origin = origin;
  job.arena = &arena_;
  job.device = device_;
  job.periodic = periodic != nullptr;
  job.checksum_threads = HelperThreads(job.manifest.data_bytes);
  // A snapshot (periodic->after): the app goes on once the copies are issued.
  uint64_t steps_at_issue = 0, orders_at_issue = 0;
  cudaEvent_t copied_event = nullptr;
  bool published = false;
  bool refused_logged = false;
  uint64_t skipped = 0;
  // A periodic save's copy ended (or, for a snapshot, was issued): its app thread goes on.
  auto tell_copied = [&](const Status& s) {
    {
      MutexLock lock(&mu_);
      periodic->copied = true;
      if (!s.ok()) {
        save_failed_ = true;
        periodic->outcome.result = FT_CUDA_ERROR;
        periodic->outcome.message = "ft_step_done: periodic save failed: " + s.ToString();
      }
    }
    done_cv_.NotifyAll();
  };
  if (periodic && periodic->after != nullptr) {
    {
      MutexLock lock(&mu_);
      skipped = skipped_since_save_;
      skipped_since_save_ = 0;
    }
    job.after = periodic->after;
    job.issued = [&](const Status& s, cudaEvent_t copied) {
      if (s.ok()) {
        steps_at_issue = steps_done_.load(std::memory_order_acquire);
        orders_at_issue = snapshot_orders_.load(std::memory_order_acquire);
        copied_event = copied;
        published = true;
        snapshots_issued_.fetch_add(1, std::memory_order_acq_rel);
        snapshot_copied_.store(copied, std::memory_order_release);
      }
      tell_copied(s);
    };
    job.landed = [&] {
      if (!published) return;
      cudaEvent_t expected = copied_event;
      snapshot_copied_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
      {
        MutexLock lock(&mu_);  // an ft_update_begin may wait for this
        snapshots_landed_.fetch_add(1, std::memory_order_acq_rel);
      }
      done_cv_.NotifyAll();
    };
    // A step completed while the copies ran, and no ft_update_begin ordered its update behind
    // them (the app stopped calling it): its optimizer may have written during the copy.
    job.torn = [&] {
      return copied_event != nullptr && steps_done_.load(std::memory_order_acquire) != steps_at_issue &&
             snapshot_orders_.load(std::memory_order_acquire) == orders_at_issue;
    };
    // The app's stream has not reached the step's end: a just-in-time save cannot run before
    // this snapshot ends (its slot is the only one not committed, its copies are queued).
    // Past about two steps the stream is taken as stuck (a peer hangs) and the commands are
    // answered now: the arena's committed copy is what there is.
    const int64_t step = periodic->step;
    job.waiting = [&, step](double seconds) {
      const double interval = step_interval_ns_.load(std::memory_order_relaxed) / 1e9;
      if (seconds < std::max(1.0, 2 * interval)) return;
      std::vector<uint64_t> refused;
      {
        MutexLock lock(&mu_);
        refused.swap(attached_);
        refused.insert(refused.end(), jit_waiting_.begin(), jit_waiting_.end());
        jit_waiting_.clear();
      }
      if (refused.empty()) return;
      // An ack holds 96 bytes.
      const std::string why = "snapshot of step " + std::to_string(step) + " waits for the app's stream (" +
                              std::to_string(static_cast<int>(seconds)) + " s): no save now, committed copy kept";
      if (!refused_logged) FT_LOG(Warn, Ckpt, "save command(s) refused: {}", why);
      refused_logged = true;
      for (uint64_t seq : refused) AckNow(seq, StatusCode::kUnavailable, why);
    };
  } else if (periodic) {
    job.copied = tell_copied;
  } else {
    job.torn = cut.torn;  // ckpt_agent_cut.cc
  }
  job.committing = [this] {
    MutexLock lock(&mu_);
    committing_ = true;
  };
  SaveOutcome out;
  out.status = RunSave(&job, cuda);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  const ckpt::Manifest& m = job.manifest;
  const char* origin_name = ckpt::SaveOriginName(origin);
  if (out.status.ok()) {
    out.step = m.step;
    out.torn = m.torn;
    out.message = shm::SaveAckMessage({m.step, ckpt::ContentDigest(m), m.torn, m.data_bytes, ms});
    FT_LOG(Info, Ckpt, "{} save: {} (checksums on {} thread(s)){}", origin_name, out.message,
           std::max(job.checksum_threads, 1),
           job.after == nullptr ? std::string()
                                : ", a snapshot behind the app's stream; " + std::to_string(skipped) +
                                      " due step(s) skipped since the previous one");
  } else {
    out.message = std::string(out.status.message());
    FT_LOG(Warn, Ckpt, "{} save of step {} failed: {}; {}, training is unaffected", origin_name, m.step,
           out.status.ToString(),
           arena_.slot_count() > 1 ? "the arena keeps its committed copy" : "the previous copy is lost (one slot)");
  }
  return out;
}

void Agent::FinishSave(std::vector<uint64_t> waiters, const SaveOutcome& outcome) {
  {
    MutexLock lock(&mu_);
    // A torn copy is never restored: with two slots the arena keeps the whole copy committed
    // beside it (Arena::Commit), with one it overwrote it. A failed save keeps the committed
    // copy with two slots; with one it began writing over it, and none is left.
    if (outcome.status.ok() && !outcome.torn) {
      committed_step_ = outcome.step;
    } else if (arena_.slot_count() < 2) {
      committed_step_ = kNoStep;
    }
    waiters.insert(waiters.end(), attached_.begin(), attached_.end());
    attached_.clear();
    saving_ = false;
  }
  done_cv_.NotifyAll();  // an exiting process may wait for this save (FinishAtExit)
  for (uint64_t seq : waiters) Ack(seq, outcome);
}

// The agent thread's boundary: nothing may escape it (std::terminate would end the app). A
// failure inside one piece of work fails that work — its app thread and its commands get an
// answer — and the thread goes on.
void Agent::Run() {
  host::MarkFtThread();  // our CUDA calls are never the app's
  pthread_setname_np(pthread_self(), "ft-ckpt");
  host::BlockTerminationSignals();  // and its checksum helpers', which inherit the mask
  AgentCuda cuda;
  // The stream and events now, not in the first ft_step_done that takes a snapshot (which
  // would pay for them on the app's thread). A failure is met again, and reported, by a save.
  try {
    (void)cuda.Prepare(device_);
  } catch (...) {
  }
  try {
    if (!PrepareArena(&cuda)) return;  // given up: every request was answered, none comes again
    StartWarmUp();
  } catch (...) {
    GiveUp("checkpoint agent: internal error preparing the host arena; training continues without checkpoints",
           "checkpoint agent: internal error preparing the host arena", StatusCode::kInternal);
    return;
  }
  for (;;) {
    std::shared_ptr<AppRequest> request;
    std::vector<uint64_t> waiters;
    bool save = false;
    try {
      MutexLock lock(&mu_);
      auto save_asked = [&]() REQUIRES(mu_) {
        return (!jit_waiting_.empty() || term_requested_) && restoring_ == 0;
      };
      auto work = [&]() REQUIRES(mu_) { return !app_requests_.empty() || save_asked(); };
      if (!WarmPending()) {
        work_cv_.Wait(&mu_, work);
      } else if (NothingToSaveYet()) {
        // The warm-up is for saves, which come only after a step or a restore: until then it
        // would only compete with the restore and the app's start-up. Looked at again now and then.
        work_cv_.WaitFor(&mu_, std::chrono::milliseconds(100), work);
        if (!work()) continue;
      } else if (!work()) {
        lock.Unlock();
        WarmNextPiece();
        continue;
      }
      if (!app_requests_.empty()) {
        request = app_requests_.front();
        app_requests_.pop_front();
      }
      if (request && request->kind == AppRequest::Kind::kRestore) {
        lock.Unlock();
        ServeRestore(request, &cuda);
        continue;
      }
      // A save: it serves every save command waiting now (coalesced), and a periodic one also
      // the kSaveAtStep commands; a just-in-time one also a termination save asked for.
      if (!request && NothingToSaveYet()) {
        // Commands that waited for a restore that restored nothing.
        std::vector<uint64_t> refused;
        refused.swap(jit_waiting_);
        term_requested_ = false;
        lock.Unlock();
        for (uint64_t seq : refused) AckNow(seq, kNothingToSaveCode, kNothingToSave);
        continue;
      }
      save = true;
      waiters.swap(jit_waiting_);
      bool termination = false;
      if (request) {
        waiters.insert(waiters.end(), at_step_waiting_.begin(), at_step_waiting_.end());
        at_step_waiting_.clear();
      } else {
        termination = term_requested_;
        term_requested_ = false;
      }
      if (!request && !termination && term_saved_ != kNoStep && term_saved_ == committed_step_ &&
          last_step_.load(std::memory_order_acquire) == term_saved_) {
        // Save commands handed over after the termination save of this very step (the rank now
        // waits for its one step more): answered by that copy, never taken again into the other
        // slot, which keeps the older whole step (ckpt_agent_term.cc).
        const SaveOutcome answered = term_outcome_;
        lock.Unlock();
        for (uint64_t seq : waiters) Ack(seq, answered);
        continue;
      }
      if (std::string gone = FreedBufferLocked(); !gone.empty()) {
        // Nothing is copied, so the committed copy stays committed, with one slot too.
        SaveOutcome refused;
        refused.status = Status::InvalidArgument(gone);
        refused.message = gone;
        if (request) {
          request->copied = true;
          request->outcome.result = FT_INVALID_ARGUMENT;
          request->outcome.message = "ft_step_done: periodic save refused: " + gone;
        }
        if (termination) {
          term_saved_ = kNoStep;
          term_outcome_ = refused;
        }
        lock.Unlock();
        done_cv_.NotifyAll();
        FT_LOG(Warn, Ckpt, "{} save of step {} refused: {}", request ? "periodic" : termination ? "termination" : "just-in-time",
               request ? request->step : last_step_.load(std::memory_order_acquire), gone);
        for (uint64_t seq : waiters) Ack(seq, refused);
        continue;
      }
      saving_ = true;
      committing_ = false;
      save_failed_ = false;
      lock.Unlock();
      const SaveOrigin origin = request       ? SaveOrigin::kPeriodic
                                : termination ? SaveOrigin::kTermination
                                              : SaveOrigin::kJustInTime;
      SaveOutcome outcome = Save(request, &cuda, origin);
      {
        MutexLock done(&mu_);
        if (termination) {
          term_saved_ = outcome.status.ok() && !outcome.torn ? outcome.step : kNoStep;
          term_outcome_ = outcome;
        }
        if (outcome.status.ok() && !outcome.torn) committed_is_local_ = origin != SaveOrigin::kPeriodic;
      }
      FinishSave(std::move(waiters), outcome);
    } catch (...) {
      Failed(request, save ? &waiters : nullptr);
    }
  }
}

// The one step more's save is about to write over the committed copy this process took: the
// arena commits its older whole copy first (Arena::RecommitOlderSlot), which then stays.
void Agent::KeepTheOlderCopyLocked() {
  const int64_t replaced = committed_step_;
  if (!arena_.RecommitOlderSlot().ok()) return;  // no older whole copy: the free slot, as always
  ckpt::Manifest kept;
  uint64_t generation = 0;
  committed_step_ = arena_.ReadCommitted(&kept, &generation).ok() ? kept.step : kNoStep;
  committed_is_local_ = false;
  FT_LOG(Info, Ckpt, "termination save: the step after {} writes over that copy; step {} (every rank's) stays",
         replaced, committed_step_);
}

// A just-in-time or termination save comes after a fault, when the other ranks' copies may never
// catch up: a crashed peer took none, an operator's save at the next step boundary landed on
// different steps on different ranks, the relaunch that restored was cut short. Written over the
// older slot as usual, it could cost the step the restore plan names — the newest one the master
// knows whole on every shard — and leave no step whole anywhere (the campaign's seed 14, a rank
// killed while a relaunch recovered). So that step stays and the save writes over the newer copy
// beside it. The price, where the plan had not caught up with a newer step whole everywhere, is
// that step: a restore one save behind, never none.
void Agent::KeepThePlannedCopy(int64_t saving) {
  if (!host::Started()) return;
  const LauncherIdentity& id = host::Identity();
  ckpt::NodePlan plan;
  if (!ckpt::ReadLiveNodePlan(ckpt::NodePlanPath(host::RuntimeConfig().ckpt_arena_dir, id.job, id.node), &plan).ok() ||
      plan.step < 0 || saving <= plan.step) {
    return;
  }
  MutexLock lock(&mu_);
  ckpt::Manifest committed, planned;
  uint64_t committed_generation = 0, planned_generation = 0;
  if (!arena_.ReadCommitted(&committed, &committed_generation).ok() || committed.step <= plan.step) return;
  if (!arena_.ReadStep(plan.step, &planned, &planned_generation).ok()) return;  // not here: as always
  if (!arena_.MakeCommitted(planned_generation).ok()) return;
  committed_step_ = plan.step;
  committed_is_local_ = false;
  FT_LOG(Info, Ckpt, "save of step {}: writes over the copy of step {}; step {} (the restore plan's, version {}) stays",
         saving, committed.step, plan.step, plan.version);
}

void Agent::ServeRestore(const std::shared_ptr<AppRequest>& request, AgentCuda* cuda) {
  RestoreOutcome out = Restore(*request, cuda);
  if (out.result == FT_OK) restored_step_.store(out.step, std::memory_order_release);
  {
    MutexLock lock(&mu_);
    if (out.result == FT_OK) committed_is_local_ = false;  // the restored step, every rank's
    request->outcome = std::move(out);
    request->finished = true;
  }
  done_cv_.NotifyAll();
}

RestoreOutcome Agent::Restore(const AppRequest& request, AgentCuda* cuda) {
  if (std::string gone = FreedBuffer(); !gone.empty()) {
    return RestoreOutcome{FT_INVALID_ARGUMENT, "ft_restore: " + gone + "; nothing restored", -1};
  }
  RestoreTarget target;
  target.rank = base_.rank;
  target.node = host::Identity().node;
  target.buffers = &buffers_;
  target.layout = base_.buffers;
  target.arena = &arena_;
  target.device = device_;
  // As many helpers check the copy as compute a save's checksums.
  target.verify_threads = HelperThreads(base_.data_bytes);
  return RestoreFromPlan(request.plan, target, cuda);
}

// After an exception in the agent thread: whoever waits for the work gets an answer.
void Agent::Failed(const std::shared_ptr<AppRequest>& request, std::vector<uint64_t>* waiters) noexcept {
  try {
    FT_LOG(Warn, Ckpt, "the checkpoint agent failed on one piece of work; training is unaffected");
    SaveOutcome outcome;
    outcome.status = Status::Internal("checkpoint agent: internal error");
    outcome.message = "checkpoint agent: internal error";
    if (request) {
      MutexLock lock(&mu_);
      request->copied = true;
      request->finished = true;
      if (request->outcome.result == FT_OK) request->outcome.result = FT_INTERNAL;
      request->outcome.message = "ft_restore/ft_step_done: the checkpoint agent failed (a bug in ft)";
    }
    done_cv_.NotifyAll();
    if (waiters != nullptr) FinishSave(std::move(*waiters), outcome);
  } catch (...) {
  }
}

void HandOverSaveCommand(const shm::Command& command) noexcept {
  try {
    TheAgent().HandOver(command);
  } catch (...) {
    AckNow(command.seq, StatusCode::kInternal, "the checkpoint agent failed to take the command");
  }
}

}  // namespace ft::preload::agent
