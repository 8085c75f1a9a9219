// The termination save's signal side (term_signal.h): the interposed sigaction/signal, our
// handler, the chain to the app's disposition, and the "ft-term" thread that runs the save and
// delivers the signal again.
#include "preload/term_signal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/spin_lock.h"

namespace ft::preload::term {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

constexpr int kMaxSignal = 65;  // signal numbers 1..64

SigactionFn RealSigaction() {
  static std::atomic<SigactionFn> real{nullptr};
  SigactionFn fn = real.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    real.store(fn, std::memory_order_release);
  }
  return fn;
}

int CallRealSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn fn = RealSigaction();
  if (fn == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return fn(sig, act, old);
}

// Where the termination save stands. kIdle → (a signal) kSaving → (saved) kDone → (the
// signal's action taken and the process goes on: an app handler returned, or SIG_IGN) kIdle,
// so a later signal saves again (a newer step) and the rank is a normal running one.
enum SaveState : int { kIdle = 0, kSaving = 1, kDone = 2 };

// The app's disposition of each armed signal, double-buffered so the handler reads a whole
// one without a lock: writers (app threads, under g_lock with every signal blocked) fill the
// slot not in use, then publish it.
struct Dispositions {
  struct sigaction slots[2][kMaxSignal];
  std::atomic<int> current[kMaxSignal];
  std::atomic<bool> armed[kMaxSignal];
};
Dispositions g_app;
internal::SpinLock g_lock;  // writers of g_app; also orders Arm against the app's calls

std::atomic<int> g_state{kIdle};
pid_t g_owner = 0;
sem_t g_wake;
// Written once the save ended (ft-term): the handler of a signal whose action is the default
// one waits on it, so the thread it hit never returns into the app (below).
int g_done_pipe[2] = {-1, -1};
int64_t g_wait_ms = 11000;  // the grace, and a second for the save's end
// The first signal, as it arrived (written by the handler that moved g_state to kSaving).
std::atomic<int> g_first_signal{0};
siginfo_t g_first_info;
std::atomic<pid_t> g_first_tid{0};
std::atomic<uint64_t> g_merged{0};  // bit s: signal s arrived while the save ran
// The first signal's action is still owed to the app: set by the handler that started the
// save; taken (cleared) once, by whoever acts on it — ft-term redelivering it after the save,
// or FinishAtExit when the app reached exit() first. An app handler that ran and called exit()
// owes nothing more: the process then ends with exit's status, as it would without ft.
std::atomic<bool> g_owed{false};
// The app handled a signal and the process went on: the segment's terminating mark is cleared
// at the second step completed since (NoteStepDone counts down). Not at once: a handler that
// ends the program returns too (it sets a flag the loop reads once per step, raises
// SystemExit), the step in progress may still complete, and that exit is a teardown, not a
// finish. A loop that completes a second step has not taken the signal as an end.
constexpr int kStepsToGoOn = 2;
std::atomic<int> g_mark_steps_left{0};

// Runs `fn` with every signal blocked on this thread and g_lock held: a handler can never
// interrupt a writer on its own thread, so it never spins on a lock its thread holds.
// The mask is set with the system call itself: a sanitizer runtime intercepts
// pthread_sigmask and may call in here before it is initialized.
template <typename Fn>
void Locked(Fn&& fn) {
  sigset_t all, saved;
  sigfillset(&all);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &saved, _NSIG / 8);
  g_lock.lock();
  fn();
  g_lock.unlock();
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, nullptr, _NSIG / 8);
}

// fork(): the child has only the forking thread, so g_lock copied while another thread held it
// would never be released there (its first sigaction would spin for ever). Taken around the
// fork (every signal blocked, as Locked does), so the child gets it free and the table whole.
thread_local sigset_t t_fork_mask;
void PrepareFork() {
  sigset_t all;
  sigfillset(&all);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &t_fork_mask, _NSIG / 8);
  g_lock.lock();
}
void AfterFork() {
  g_lock.unlock();
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &t_fork_mask, nullptr, _NSIG / 8);
}
// At load, before the app can fork: a program may fork without ever calling CUDA (the rest of
// libft.so starts at the first call).
__attribute__((constructor)) void RegisterForkHandlers() { pthread_atfork(PrepareFork, AfterFork, AfterFork); }

struct sigaction AppAction(int sig) {
  return g_app.slots[g_app.current[sig].load(std::memory_order_acquire)][sig];
}

// Under Locked: publish `a` as the app's disposition.
void SetAppAction(int sig, const struct sigaction& a) {
  const int next = 1 - g_app.current[sig].load(std::memory_order_relaxed);
  g_app.slots[next][sig] = a;
  g_app.current[sig].store(next, std::memory_order_release);
}

void Handler(int sig, siginfo_t* info, void* context);

bool RunsAFunction(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) != 0 || (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN);
}

// Ours as the kernel holds it. With an app handler, the app's SA_RESTART and SA_ONSTACK, so a
// system call the signal interrupts behaves as the app asked (Python wants EINTR, most C code a
// restart). With the default action, SA_RESTART: without ft no call of the app would have been
// interrupted at all. An ignored signal stays ignored in the kernel: it asks for nothing (no
// save, no mark) and interrupts nothing, even a call no SA_RESTART restarts (nanosleep).
struct sigaction OursFor(const struct sigaction& app) {
  if ((app.sa_flags & SA_SIGINFO) == 0 && app.sa_handler == SIG_IGN) return app;
  struct sigaction ours;
  std::memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = Handler;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | (app.sa_flags & SA_ONSTACK) |
                  (RunsAFunction(app) ? (app.sa_flags & SA_RESTART) : SA_RESTART);
  return ours;
}

int64_t MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Until ft-term says the save ended, or the grace (and a second) passed. Async-signal-safe.
void WaitForTheSave() {
  const int64_t until = MonotonicMs() + g_wait_ms;
  struct pollfd fd{g_done_pipe[0], POLLIN, 0};
  for (int64_t left = g_wait_ms; left > 0; left = until - MonotonicMs()) {
    int n = poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return;
  }
}

void MarkTerminating(int sig) {
  internal::Runtime* rt = internal::g_rt;
  if (rt == nullptr || !rt->segment) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  shm::SegmentHeader* h = rt->segment->header();
  h->terminate_unix_ns.store(static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec),
                             std::memory_order_relaxed);
  h->terminate_signal.store(sig, std::memory_order_release);
}

// The process went on after the signal and completed a step: it is no longer on its way out
// (the worker watches it for a freeze again, and a death that follows is not a teardown).
void ClearTerminating() {
  internal::Runtime* rt = internal::g_rt;
  if (rt == nullptr || !rt->segment) return;
  shm::SegmentHeader* h = rt->segment->header();
  h->terminate_signal.store(0, std::memory_order_release);
  h->terminate_unix_ns.store(0, std::memory_order_relaxed);
}

// What the signal would have done without ft. Async-signal-safe. False when the default action
// follows (the process ends by the signal once this handler returns); true when the app's
// handler ran and returned, or the signal is ignored: the process goes on.
bool Chain(int sig, siginfo_t* info, void* context) {
  struct sigaction app = AppAction(sig);
  const bool with_info = (app.sa_flags & SA_SIGINFO) != 0;
  if (!with_info && app.sa_handler == SIG_IGN) return true;
  if (!with_info && app.sa_handler == SIG_DFL) {
    // Every signal we arm terminates by default: hand it to the kernel's default action. The
    // signal is blocked while this handler runs, so the raise lands when it returns.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    CallRealSigaction(sig, &dfl, nullptr);
    raise(sig);
    return false;
  }
  if (app.sa_flags & SA_RESETHAND) {
    // The kernel would reset the disposition on entry: the app's reads SIG_DFL from now on,
    // and ours in the kernel is the one for the default action.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    Locked([&] {
      SetAppAction(sig, dfl);
      struct sigaction ours = OursFor(dfl);
      CallRealSigaction(sig, &ours, nullptr);
    });
  }
  sigset_t saved;
  pthread_sigmask(SIG_BLOCK, &app.sa_mask, &saved);
  if (with_info) {
    app.sa_sigaction(sig, info, context);
  } else {
    app.sa_handler(sig);
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return true;
}

// Back to kIdle after the signal's action left the process running. Async-signal-safe.
void GoOn() {
  g_mark_steps_left.store(kStepsToGoOn, std::memory_order_release);
  char drain[16];
  while (read(g_done_pipe[0], drain, sizeof drain) > 0) {
  }
  g_owed.store(false, std::memory_order_relaxed);
  int expected = kDone;
  g_state.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel);
}

void Handler(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (getpid() != g_owner) {  // a forked child: the save is the parent's
    Chain(sig, info, context);
    errno = saved_errno;
    return;
  }
  int expected = kIdle;
  if (g_state.compare_exchange_strong(expected, kSaving, std::memory_order_acq_rel)) {
    if (info != nullptr) g_first_info = *info;
    g_first_tid.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
    g_first_signal.store(sig, std::memory_order_release);
    g_owed.store(true, std::memory_order_release);
    Locked([&] {  // against NoteStepDone clearing the mark of the signal before
      g_mark_steps_left.store(0, std::memory_order_relaxed);
      MarkTerminating(sig);
    });
    sem_post(&g_wake);
    // Back into the app, which goes on until the save is in (its next ft_update_begin waits
    // for it): this thread may be the one that finishes the update the save waits for.
  } else if (expected == kSaving) {
    if (sig != g_first_signal.load(std::memory_order_acquire) && sig < 64) {
      g_merged.fetch_or(uint64_t{1} << sig, std::memory_order_relaxed);
    }
  } else if (Chain(sig, info, context)) {
    GoOn();  // the app's handler returned (or it ignores the signal now): a running rank again
  }
  errno = saved_errno;
}

// Sends the first signal again to the thread it hit, with its siginfo where the kernel allows
// (a thread other than the main one may only queue a negative si_code: SI_QUEUE, keeping the
// sender's pid and uid); to the process when that thread is gone.
void Redeliver(int sig) {
  const pid_t pid = getpid();
  const pid_t tid = g_first_tid.load(std::memory_order_relaxed);
  siginfo_t info = g_first_info;
  info.si_signo = sig;
  if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &info) == 0) return;
  if (errno == EPERM) {
    info.si_code = SI_QUEUE;
    if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &info) == 0) return;
  }
  if (syscall(SYS_tgkill, pid, tid, sig) == 0) return;
  kill(pid, sig);
}

void Watch(std::vector<int> signals) {
  sigset_t mine;
  sigemptyset(&mine);
  for (int sig : signals) sigaddset(&mine, sig);
  pthread_sigmask(SIG_BLOCK, &mine, nullptr);  // our handler runs on the app's threads
  pthread_setname_np(pthread_self(), "ft-term");
  t_in_ft = true;
  for (;;) {  // one save per signal that found the state kIdle
    while (sem_wait(&g_wake) != 0) {
      if (errno != EINTR) return;  // cannot happen with a valid semaphore; never save then
    }
    const int sig = g_first_signal.load(std::memory_order_acquire);
    char name[16] = "signal";
    if (sigabbrev_np(sig) != nullptr) snprintf(name, sizeof name, "SIG%s", sigabbrev_np(sig));
    (void)agent::SaveBeforeEnd(name, false);
    g_state.store(kDone, std::memory_order_release);
    // No signal merges once kDone; taken before the redelivery can make the state kIdle again.
    const uint64_t merged = g_merged.exchange(0, std::memory_order_acq_rel);
    const char done = 1;
    ssize_t ignored = write(g_done_pipe[1], &done, 1);
    (void)ignored;
    if (g_owed.exchange(false, std::memory_order_acq_rel)) {
      const struct sigaction app = AppAction(sig);
      if ((app.sa_flags & SA_SIGINFO) == 0 && app.sa_handler == SIG_IGN) {
        GoOn();  // ignored since (the kernel would discard it): the process goes on
      } else {
        Redeliver(sig);
      }
    }
    for (int s = 1; s < 64; ++s) {
      if (merged & (uint64_t{1} << s)) kill(getpid(), s);
    }
  }
}

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kTerminationSignals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"XCPU", SIGXCPU}, {"PWR", SIGPWR},
};

}  // namespace

Status ParseSignals(std::string_view text, std::vector<int>* out) {
  std::vector<int> signals;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  text = trim(text);
  if (text.empty() || text == "none") {
    out->clear();
    return Status();
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::string_view bare = item.substr(0, 3) == "SIG" ? item.substr(3) : item;
    int number = 0;
    for (const SignalName& s : kTerminationSignals) {
      if (bare == s.name) number = s.number;
    }
    if (number == 0) {
      return Status::InvalidArgument(
          "FT_CKPT_ON_SIGNAL: '" + std::string(item) +
          "' is not a termination signal ft can save on (HUP, INT, QUIT, USR1, USR2, TERM, XCPU, PWR)");
    }
    bool seen = false;
    for (int s : signals) seen = seen || s == number;
    if (!seen) signals.push_back(number);
  }
  *out = std::move(signals);
  return Status();
}

void Arm(const std::vector<int>& signals) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (signals.empty() || RealSigaction() == nullptr) return;
    g_owner = getpid();
    if (sem_init(&g_wake, 0, 0) != 0) return;
    if (pipe2(g_done_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    if (internal::g_rt != nullptr) {
      g_wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(internal::g_rt->config.ckpt_term_grace).count() +
                  1000;
    }
    try {
      std::thread(Watch, signals).detach();
    } catch (...) {
      FT_LOG(Warn, Ckpt, "no termination save: the ft-term thread cannot start");
      return;
    }
    for (int sig : signals) {
      Locked([&] {
        struct sigaction app;
        if (CallRealSigaction(sig, nullptr, &app) != 0) return;
        SetAppAction(sig, app);
        struct sigaction ours = OursFor(app);
        if (CallRealSigaction(sig, &ours, nullptr) != 0) return;
        g_app.armed[sig].store(true, std::memory_order_release);
      });
    }
    FT_LOG(Debug, Ckpt, "termination save armed for {} signal(s)", signals.size());
  });
}

void FinishAtExit() noexcept {
  if (g_owner != getpid() || g_state.load(std::memory_order_acquire) == kIdle) return;
  // The app reached exit() while its termination save ran (an interrupted call took an error
  // path): the save finishes, then the signal acts as it would have without ft — with the
  // default action the process ends by the signal, not with exit's status.
  // An app handler that already ran (and called exit itself: a Python program's handler, an
  // SA_RESETHAND one) owes nothing: the process ends with exit's status.
  if (g_state.load(std::memory_order_acquire) == kSaving) WaitForTheSave();
  const int sig = g_first_signal.load(std::memory_order_acquire);
  if (sig > 0 && sig < kMaxSignal && !RunsAFunction(AppAction(sig)) &&
      g_owed.exchange(false, std::memory_order_acq_rel)) {
    siginfo_t info = g_first_info;
    (void)Chain(sig, &info, nullptr);
  }
}

void NoteStepDone() noexcept {
  if (g_mark_steps_left.load(std::memory_order_acquire) == 0) return;
  Locked([] {
    const int left = g_mark_steps_left.load(std::memory_order_relaxed);
    if (left == 0 || g_state.load(std::memory_order_acquire) != kIdle) return;
    g_mark_steps_left.store(left - 1, std::memory_order_relaxed);
    if (left == 1) ClearTerminating();
  });
}

void BlockTerminationSignals() noexcept {
  try {
    std::vector<int> signals;
    if (internal::g_rt == nullptr || !ParseSignals(internal::g_rt->config.ckpt_on_signal, &signals).ok()) return;
    sigset_t set;
    sigemptyset(&set);
    for (int sig : signals) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  } catch (...) {
  }
}

int AppSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig >= kMaxSignal) return CallRealSigaction(sig, act, old);
  int result = 0;
  int saved_errno = 0;
  Locked([&] {
    if (!g_app.armed[sig].load(std::memory_order_acquire)) {
      result = CallRealSigaction(sig, act, old);
      saved_errno = errno;
      return;
    }
    struct sigaction previous = AppAction(sig);
    if (act != nullptr) {
      SetAppAction(sig, *act);
      struct sigaction ours = OursFor(*act);
      CallRealSigaction(sig, &ours, nullptr);
    }
    if (old != nullptr) *old = previous;
  });
  if (result != 0) errno = saved_errno;
  return result;
}

}  // namespace ft::preload::term

// The libc entry points, exported (libft.map). Only the signals FT_CKPT_ON_SIGNAL arms, once
// armed, are virtualized; every other call goes straight to libc's sigaction.
extern "C" __attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act,
                                                                struct sigaction* old) noexcept {
  return ft::preload::term::AppSigaction(sig, act, old);
}

namespace {

// The older ways to set a handler, as glibc implements them: each calls libc's internal
// sigaction, which no interposition sees, so each is interposed here too.
sighandler_t SetHandler(int sig, sighandler_t handler, int flags) noexcept {
  struct sigaction act, old;
  std::memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = flags;
  if (ft::preload::term::AppSigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

// glibc's signal(), bsd_signal() and ssignal(): BSD semantics (SA_RESTART, the handler stays).
extern "C" __attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) noexcept {
  return SetHandler(sig, handler, SA_RESTART);
}

extern "C" __attribute__((visibility("default"))) sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return SetHandler(sig, handler, SA_RESTART);
}

extern "C" __attribute__((visibility("default"))) sighandler_t ssignal(int sig, sighandler_t handler) noexcept {
  return SetHandler(sig, handler, SA_RESTART);
}

// System V semantics: the handler is reset to the default on entry and the signal is not
// blocked while it runs. __sysv_signal is what signal() binds to in a program compiled for
// strict ISO C or POSIX (no _DEFAULT_SOURCE).
extern "C" __attribute__((visibility("default"))) sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return SetHandler(sig, handler, SA_RESETHAND | SA_NODEFER);
}

extern "C" __attribute__((visibility("default"))) sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return SetHandler(sig, handler, SA_RESETHAND | SA_NODEFER);
}

// sigset(): System V's reliable signals (glibc's sysdeps/posix/sigset.c): SIG_HOLD blocks the
// signal; anything else installs it (no flags) and unblocks the signal. SIG_HOLD is returned
// when the signal was blocked before.
extern "C" __attribute__((visibility("default"))) sighandler_t sigset(int sig, sighandler_t disp) noexcept {
  sigset_t set, old_mask;
  sigemptyset(&set);
  if (sigaddset(&set, sig) < 0) return SIG_ERR;
  if (disp == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &old_mask) < 0) return SIG_ERR;
    if (sigismember(&old_mask, sig)) return SIG_HOLD;
    struct sigaction current;
    if (ft::preload::term::AppSigaction(sig, nullptr, &current) < 0) return SIG_ERR;
    return current.sa_handler;
  }
  const sighandler_t previous = SetHandler(sig, disp, 0);
  if (previous == SIG_ERR) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &set, &old_mask) < 0) return SIG_ERR;
  return sigismember(&old_mask, sig) ? SIG_HOLD : previous;
}
