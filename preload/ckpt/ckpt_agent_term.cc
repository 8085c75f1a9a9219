// The checkpoint agent's save before the process ends (ckpt_agent_impl.h): a launcher or a
// scheduler asked the process to end (term_signal.h), or it ends by a failure (exit() with a
// non-zero status, std::terminate, ft_save_on_failure); the state of the last completed step
// goes into the arena first, within FT_CKPT_TERM_GRACE.
//
// One step, never a mix: the copy waits until no optimizer update is running (no update window
// open, or its device marker not reached: the GPU has not begun it), and while it copies, the
// next ft_update_begin waits. A copy during which a window opened or a step completed anyway
// (a program without ft_update_begin) is marked torn and never restored.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "common/mutex.h"
#include "include/ft/ft.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"
#include "preload/ckpt/python_process.h"

namespace ft::preload::agent {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Clears a flag others wait on (the hold an update waits behind, the save before the end a
// second cause waits behind) whichever way SaveBeforeEnd returns. Stored under the lock the
// waiter checks it with, so the wake-up cannot fall between its check and its wait.
struct HoldReleased {
  std::atomic<bool>* hold;
  Mutex* mu;
  CondVar* cv;
  ~HoldReleased() {
    {
      MutexLock lock(&*mu);
      hold->store(false, std::memory_order_release);
    }
    cv->NotifyAll();
  }
};

}  // namespace

void Agent::WaitWhileTermHold() {
  const auto grace = host::Started() ? host::RuntimeConfig().ckpt_term_grace : std::chrono::seconds(10);
  MutexLock lock(&mu_);
  done_cv_.WaitFor(&mu_, grace, [&]() REQUIRES(mu_) { return !HeldNow(); });
}

EndSave Agent::SaveBeforeEnd(const char* name, bool caller_ends) {
  const auto start = Clock::now();
  const auto grace = host::RuntimeConfig().ckpt_term_grace;
  const auto deadline = start + grace;
  {
    MutexLock lock(&mu_);
    if (phase_ != Phase::kReady) return EndSave::kNotRegistered;  // nothing to save
  }
  // One at a time (a SIGTERM's save and ft_save_on_failure racing in a teardown): the second
  // finds the step committed. Bounded like the save itself.
  // (A flag under mu_, not a timed mutex: ThreadSanitizer does not see pthread_mutex_clocklock
  // take a lock and reports its unlock.)
  {
    MutexLock lock(&mu_);
    if (!done_cv_.WaitUntil(&mu_, deadline, [&]() REQUIRES(mu_) { return !end_saving_.load(std::memory_order_acquire); })) {
      FT_LOG(Warn, Ckpt, "{}: another save before the end still running after the grace ({:.1f} s)", name,
             Seconds(grace));
      return EndSave::kTimedOut;
    }
    end_saving_.store(true, std::memory_order_release);
  }
  HoldReleased one{&end_saving_, &mu_, &done_cv_};
  if (last_step_.load(std::memory_order_acquire) == kNoStep) {
    // Nothing this process computed: the arena's copy (restored from, or older) stays as is.
    FT_LOG(Info, Ckpt, "{}: no step completed in this process yet, nothing saved", name);
    return EndSave::kNothingNewer;
  }
  term_hold_.store(true, std::memory_order_seq_cst);
  HoldReleased release{&term_hold_, &mu_, &done_cv_};
  struct StepHoldReleased {
    std::atomic<uint64_t>* after;
    ~StepHoldReleased() { after->store(UINT64_MAX, std::memory_order_seq_cst); }  // before `release` wakes
  } step_release{&hold_after_steps_};
  // An ft_update_begin that passed the hold before it was set publishes its window first.
  while (updates_entering_.load(std::memory_order_seq_cst) > 0 && Clock::now() < start + grace / 4) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

  // An update already begun on the host finishes first when the device gets to it, within
  // about two step times: on a preemption every rank is stopped at the step it was finishing,
  // so replicas and the other shards save one step more often alike. A device stuck behind a
  // dead peer never gets there: the state is still the last completed step's, saved after the
  // wait (the marker not reached means the optimizer has not touched it).
  if (update_open_.load(std::memory_order_acquire)) {
    const uint64_t interval = step_interval_ns_.load(std::memory_order_relaxed);
    const Clock::duration floor = std::chrono::milliseconds(50);
    const auto finish_wait = std::clamp<Clock::duration>(std::chrono::nanoseconds(2 * interval), floor,
                                                         std::max<Clock::duration>(floor, grace / 4));
    const uint64_t steps = steps_done_.load(std::memory_order_acquire);
    const auto until = start + finish_wait;
    while (steps_done_.load(std::memory_order_acquire) == steps && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // A step boundary: the update in progress (if any) reaches ft_step_done. Half the grace at
  // most; past it the committed copy is worth more than a torn one. A thread that is ending the
  // process will not finish its update: then only the first wait's two step times.
  const auto settle_by = caller_ends ? start + std::clamp<Clock::duration>(
                                                   std::chrono::nanoseconds(2 * step_interval_ns_.load()),
                                                   std::chrono::milliseconds(50), grace / 2)
                                     : start + grace / 2;
  while (TornNow()) {
    if (Clock::now() >= settle_by) {
      FT_LOG(Warn, Ckpt,
             "{}: the optimizer update of step {} was still running after {:.1f} s; no termination save "
             "(the arena keeps its committed copy)",
             name, last_step_.load() + 1, Seconds(Clock::now() - start));
      return EndSave::kUpdateRunning;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  const EndSave first = SaveHeldStep(name, start, deadline);
  if (caller_ends || (first != EndSave::kSaved && first != EndSave::kNothingNewer)) return first;
  return SaveOneStepMore(name, start, deadline, first);
}

// A preemption signals every rank at once, and each holds at its next update: ranks inside an
// update finish it first, so the held ranks are one step apart at most — with every rank its
// own shard (a sharded optimizer), neither step would be whole. So a signalled rank, its step
// saved, trains one step more (its peers' collectives of that step are queued or done: the
// ranks behind reach it too) and saves it: every rank then holds the newer of the two steps,
// and the plan takes it. A rank whose next step cannot complete (a peer is gone: a teardown
// after a crash) keeps its first copy after about two step times; one stopped inside that
// update never commits a mix (the first copy stays committed).
//
// Which copy the second save replaces: a teardown after a crash looks the same to the rank as
// a preemption, and when the dead rank died after the step's collectives the survivors' step
// more completes too. Had it replaced the older slot, the survivors would hold only the two
// termination steps, which the dead rank never took — with sharded state no step whole
// anywhere (a campaign schedule: periodic step 6 on every rank, survivors 8 and 9). So when the
// first copy is one only this process took (termination or just-in-time) and the other slot
// holds an older whole copy (a periodic snapshot, the restored step), the one step more writes
// over the first copy; the older copy every rank took stays. Only when the device holds the
// newer step (ckpt_agent_cut.cc: a device behind its host keeps the first copy), and never by a
// snapshot (no periodic save falls due on the step more): a snapshot's slot is written before
// the device reaches the step, which a device stuck behind a peer that is gone never does (a
// campaign schedule lost its newest whole step that way). The cost: a rank killed while it
// writes the step more keeps the older copy instead of the first.
EndSave Agent::SaveOneStepMore(const char* name, Clock::time_point start, Clock::time_point deadline,
                               EndSave first) {
  const uint64_t steps = steps_done_.load(std::memory_order_acquire);
  const int64_t saved_step = last_step_.load(std::memory_order_acquire);
  const uint64_t interval = step_interval_ns_.load(std::memory_order_relaxed);
  const auto remaining = deadline - Clock::now();
  const auto wait = std::clamp<Clock::duration>(std::chrono::nanoseconds(2 * interval) + std::chrono::milliseconds(50),
                                                std::chrono::milliseconds(100),
                                                std::max<Clock::duration>(std::chrono::milliseconds(100), remaining / 2));
  {
    MutexLock lock(&mu_);
    hold_after_steps_.store(steps, std::memory_order_seq_cst);  // the update after the next step waits
    term_hold_.store(false, std::memory_order_seq_cst);
    term_one_step_more_ = true;  // the next step is this save's, not a periodic one's
  }
  struct StepMoreEnded {
    Agent* agent;
    ~StepMoreEnded() {
      MutexLock lock(&agent->mu_);
      agent->term_one_step_more_ = false;
    }
  } step_more_ended{this};
  done_cv_.NotifyAll();
  const auto until = Clock::now() + wait;
  while (steps_done_.load(std::memory_order_acquire) == steps && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  term_hold_.store(true, std::memory_order_seq_cst);
  while (updates_entering_.load(std::memory_order_seq_cst) > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (steps_done_.load(std::memory_order_acquire) == steps || update_open_.load(std::memory_order_acquire)) {
    // The first save's copy stays: the step the device held, which may be behind the host's.
    int64_t kept = kNoStep;
    {
      MutexLock lock(&mu_);
      kept = committed_step_;
    }
    FT_LOG(Info, Ckpt, "{}: the step after {} did not complete within {:.3f} s (a peer gone, or its update still "
           "running); the arena's committed copy{} stays this rank's copy", name, saved_step, Seconds(wait),
           kept == kNoStep ? std::string() : fmt::format(" (step {})", kept));
    return first;
  }
  const EndSave second = SaveHeldStep(name, start, deadline);
  return second == EndSave::kSaved ? second : first;
}

EndSave Agent::SaveHeldStep(const char* name, Clock::time_point start, Clock::time_point deadline) {
  const auto grace = deadline - start;
  MutexLock lock(&mu_);
  // A save already running (a just-in-time command, a periodic save) is joined, not doubled; so
  // is a periodic snapshot queued behind it (queued while the previous one committed), which the
  // agent thread takes before a termination save: saving its step again would double the hold,
  // and commit the same step into both slots (the older whole step gone).
  auto queued_snapshot = [&]() REQUIRES(mu_) {
    return std::any_of(app_requests_.begin(), app_requests_.end(),
                       [](const std::shared_ptr<AppRequest>& r) { return r->kind == AppRequest::Kind::kPeriodic; });
  };
  if (!done_cv_.WaitUntil(&mu_, deadline, [&]() REQUIRES(mu_) { return !saving_ && !queued_snapshot(); })) {
    FT_LOG(Warn, Ckpt, "{}: a save still running after the grace ({:.1f} s)", name, Seconds(grace));
    return EndSave::kTimedOut;
  }
  const int64_t step = last_step_.load(std::memory_order_acquire);
  if (committed_step_ == step) {
    FT_LOG(Info, Ckpt, "{}: step {} is already committed in the arena; nothing more to save", name, step);
    return EndSave::kNothingNewer;
  }
  term_requested_ = true;
  term_saved_ = kNoStep;
  work_cv_.NotifyOne();
  // Taken (the flag cleared) and finished (FinishSave cleared saving_ and set committed_step_).
  if (!done_cv_.WaitUntil(&mu_, deadline, [&]() REQUIRES(mu_) { return !term_requested_ && !saving_; })) {
    FT_LOG(Warn, Ckpt, "{}: the termination save did not finish within FT_CKPT_TERM_GRACE ({:.1f} s)", name,
           Seconds(grace));
    return EndSave::kTimedOut;
  }
  if (term_saved_ != kNoStep) {
    // The device's step (ckpt_agent_cut.cc): the host's last ft_step_done may be further on.
    FT_LOG(Info, Ckpt, "{}: termination save committed step={} {:.3f} s after it was asked for{}", name,
           term_saved_, Seconds(Clock::now() - start),
           term_saved_ == step ? std::string()
                               : " (the step the device held; the host had completed " + std::to_string(step) + ")");
    return EndSave::kSaved;
  }
  return EndSave::kFailed;  // the save said why (failed or torn: "termination save ... failed", torn=1)
}

EndSave SaveBeforeEnd(const char* reason, bool caller_ends) noexcept {
  try {
    return TheAgent().SaveBeforeEnd(reason, caller_ends);
  } catch (...) {
    return EndSave::kFailed;
  }
}

int Agent::SaveOnFailure() {
  const EndSave saved = SaveBeforeEnd("ft_save_on_failure", true);
  RefuseSavesFromNow();
  switch (saved) {
    case EndSave::kSaved:
    case EndSave::kNothingNewer:
      return FT_OK;
    case EndSave::kNotRegistered: {
      MutexLock lock(&mu_);
      if (phase_ == Phase::kNoArena) return Fail(FT_NO_SPACE, "ft_save_on_failure: " + arena_error_);
      return Fail(FT_INVALID_ARGUMENT,
                  "ft_save_on_failure: nothing registered yet (call it after ft_register_end): nothing saved");
    }
    case EndSave::kUpdateRunning:
      return Fail(FT_TIMEOUT, "ft_save_on_failure: the optimizer update was running and did not end; nothing "
                              "saved (the arena keeps its committed copy)");
    case EndSave::kTimedOut:
      return Fail(FT_TIMEOUT, "ft_save_on_failure: the save did not end within FT_CKPT_TERM_GRACE; nothing "
                              "committed");
    case EndSave::kFailed:
      break;
  }
  return Fail(FT_CUDA_ERROR, "ft_save_on_failure: the save failed or was torn (see the log); nothing committed");
}

int ApiSaveOnFailure() { return TheAgent().SaveOnFailure(); }

void Agent::SaveAsTheProcessFails(const std::string& cause) {
  if (const std::string gone = FreedBuffer(); !gone.empty()) {
    FT_LOG(Warn, Ckpt, "{}: no save: {} (the arena keeps its committed copy)", cause, gone);
  } else if (const std::string owned = HostBufferMainMayHaveOwned(); !owned.empty()) {
    FT_LOG(Warn, Ckpt, "{}: no save: {} (the arena keeps its committed copy; a failing exit() from inside main, "
           "or host buffers in static storage, would have saved)", cause, owned);
  } else if (HostBuffersMapped(cause)) {
    (void)SaveBeforeEnd(cause.c_str(), true);
  }
}

namespace {

// The handler SaveThenTerminate hands on to: the C++ runtime's, or the app's (set before
// registration, or after it and put behind this one at the next step).
std::atomic<std::terminate_handler> g_replaced_terminate{nullptr};
std::atomic<bool> g_terminate_save_installed{false};
thread_local bool t_in_terminate_save = false;
thread_local bool t_handed_on = false;

// The program dies by std::terminate: an exception nothing caught (the C++ runtime does not
// unwind the stack then, so the registered state is as the last step left it), a noexcept
// function that threw, a joinable std::thread destroyed. terminate ends in abort, which runs no
// exit handler: without this, a C++ program's most common failure would lose its last step the
// way a SIGKILL does. The save comes first (once: a terminate on another thread meanwhile waits
// for it), then the handler this one replaced — the runtime's prints what was thrown and
// aborts — so the program ends as it would have, the save's time later.
[[noreturn]] void SaveThenTerminate() {
  if (!t_in_terminate_save) {
    t_in_terminate_save = true;  // a terminate inside the save itself goes straight on
    static std::once_flag saved;
    try {
      std::call_once(saved, [] {
        if (!host::Started() || getpid() != host::OwnerPid()) return;  // a forked child: not its saves
        if (PythonShuttingDown()) {
          FT_LOG(Warn, Ckpt, "std::terminate: no save: the Python interpreter is shutting down (its objects, "
                 "the registered tensors among them, may be freed)");
          return;
        }
        TheAgent().SaveAsTheProcessFails("std::terminate");
      });
    } catch (...) {
    }
  }
  // An app's handler that was set after this one and calls the one it replaced (this one) comes
  // back here: it has run, and the save is done, so the process ends as a handler must.
  if (t_handed_on) std::abort();
  t_handed_on = true;
  if (std::terminate_handler next = g_replaced_terminate.load(std::memory_order_acquire); next != nullptr) next();
  std::abort();  // a handler must not return; the runtime would abort too
}

}  // namespace

void InstallTerminateSave() {
  g_replaced_terminate.store(std::set_terminate(SaveThenTerminate), std::memory_order_release);
  g_terminate_save_installed.store(true, std::memory_order_release);
}

void KeepTerminateSave() {
  if (!g_terminate_save_installed.load(std::memory_order_acquire) || std::get_terminate() == SaveThenTerminate) {
    return;
  }
  std::terminate_handler app = std::set_terminate(SaveThenTerminate);
  if (app != nullptr && app != SaveThenTerminate) {
    g_replaced_terminate.store(app, std::memory_order_release);
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      FT_LOG(Info, Ckpt, "the app set its own terminate handler after registration: std::terminate saves "
             "first, then runs it");
    }
  }
}

}  // namespace ft::preload::agent
