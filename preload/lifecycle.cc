// libft.so's lifecycle: lazy Init at the first intercepted call (InitSlow), exit and fork
// handling.
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/environment.h"
#include "common/launcher_identity.h"
#include "common/log.h"
#include "preload/hook_failures.h"
#include "preload/poller.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/term_signal.h"
#include "shm/comm_table.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace ft::preload {

// As the unnamed namespace this code lived in: the internals are found unqualified.
using namespace internal;

namespace {

// A segment under this process's name is stale by construction: the name carries our pid, and
// we have not created ours yet, so a process that died without cleaning up (SIGKILL, with no
// worker to collect it) had the same pid before. Left there it would disable libft.so for
// this run (the create is exclusive). Only a file of this user is removed.
void RemoveStaleSegment(const std::string& name) {
  struct stat st;
  const std::string path = "/dev/shm" + name;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return;
  if (shm_unlink(name.c_str()) == 0) {
    FT_LOG(Info, Preload, "removed a stale segment {} left by an earlier process with this pid", name);
  }
}

// `status` is what the process passed to exit() (a return from main passes main's value),
// where the C library tells us (glibc's on_exit); 0 otherwise.
void OnExit(int status) {
  Runtime* rt = g_rt;
  if (rt == nullptr || getpid() != rt->owner_pid) return;
  int expected = kActive;
  if (!g_state.compare_exchange_strong(expected, kPassThrough)) return;
  rt->stop.store(true, std::memory_order_release);
  // The poller finishes its round; a poller stuck in a driver call is not waited for.
  for (int i = 0; i < 300 && !rt->poller_done.load(std::memory_order_acquire); ++i) {
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  shm::SegmentHeader* header = rt->segment->header();
  header->exit_status.store(status, std::memory_order_relaxed);
  header->state.store(static_cast<uint32_t>(shm::ProcessState::kExited),
                      std::memory_order_release);
  // A failing exit leaves its segment for the worker to read and reclaim: a rank that fails
  // before the worker's next listing (an exception in its first second) would otherwise end
  // unseen, and its job's failure with it.
  if (status != 0) return;
  Status removed = rt->segment->Remove();
  if (!removed.ok()) FT_LOG(Warn, Preload, "removing segment at exit: {}", removed.ToString());
}

#if defined(__GLIBC__)
void OnExitWithStatus(int status, void*) { OnExit(status); }
#endif
void OnExitNoStatus() { OnExit(0); }

// An exit handler that learns the exit status: glibc's on_exit passes it (an atexit handler
// cannot see it, and interposing exit() itself would export a libc symbol from libft.so).
void RegisterExitHandler() {
#if defined(__GLIBC__)
  if (on_exit(OnExitWithStatus, nullptr) == 0) return;
#endif
  atexit(OnExitNoStatus);
}

void OnForkChild() {
  // The child shares the parent's segment mapping and has no poller: it must not write.
  // It runs on, unmonitored.
  g_state.store(kPassThrough, std::memory_order_release);
  t_group_depth = 0;
}

// The poller thread's boundary: an exception must not escape (std::terminate would end the
// app). A poller that failed cannot be trusted to go on (its ops would look hung): libft.so
// counts the failure, marks the segment disabled — readers then judge nothing by it — and
// turns itself into a pass-through.
void RunPoller() {
  term::BlockTerminationSignals();  // a termination signal is the app's threads' to take
  try {
    PollerMain();
    return;
  } catch (...) {
  }
  CountHookFailure(shm::HookPlace::kPoller);
  FT_LOG(Warn, Preload, "libft.so's poller thread failed; monitoring of this process is off");
  g_rt->segment->header()->state.store(static_cast<uint32_t>(shm::ProcessState::kDisabled),
                                       std::memory_order_release);
  g_state.store(kPassThrough, std::memory_order_release);
  g_rt->poller_done.store(true, std::memory_order_release);
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// FT_CKPT_ON_SIGNAL's signals are marked in the segment from here on, in a job that registers
// nothing to save too (the save itself waits for ft_register_end): a launcher's or scheduler's
// SIGTERM then reads as a teardown to the worker, whether or not it sees the process's exit
// status. Unmarked, a preempted job's ranks whose launcher reaped them first were crashes, and
// the master named them. A bad value is said at ft_register_end (no save at termination).
void ArmTerminationMarks(const Config& config) {
  std::vector<int> signals;
  if (term::ParseSignals(config.ckpt_on_signal, &signals).ok()) term::Arm(signals);
}

void DoInit() {
  Environment env = Environment::FromProcess();
  Config config;
  std::vector<std::string> warnings;
  Status loaded = Config::Load(env, &config, &warnings);
  if (!loaded.ok()) {
    FT_LOG(Warn, Preload, "libft.so disabled: {}; fix the setting to enable monitoring",
           loaded.ToString());
    g_state.store(kPassThrough);
    return;
  }
  if (!config.enable) {
    g_state.store(kPassThrough);
    return;
  }
  (void)log::Configure(config.log_level, config.log_subsystems);
  for (const auto& w : warnings) FT_LOG(Warn, Preload, "{}", w);
  auto rt = std::make_unique<Runtime>();
  rt->config = config;
  rt->identity = ResolveLauncherIdentity(config, env, HostName());
  if (!rt->identity.job_error.empty()) {
    // Monitoring that cannot be matched with the job's worker and master watches nothing, and
    // checkpoints under a guessed name are never found again: run unmonitored, loudly.
    FT_LOG(Error, Preload, "libft.so disabled: {}; the job runs unmonitored and without "
           "checkpoints", rt->identity.job_error);
    g_state.store(kPassThrough);
    return;
  }
  log::SetRank(rt->identity.rank);
  rt->owner_pid = getpid();
  rt->poll_ns = std::max<uint64_t>(static_cast<uint64_t>(config.poll_interval.count()), 100000);
  rt->kernel_sample = static_cast<uint64_t>(std::max<int64_t>(config.kernel_sample, 0));
  shm::Identity identity;
  identity.job = rt->identity.job;
  identity.node = rt->identity.node;
  identity.host = rt->identity.host;
  identity.global_rank = rt->identity.rank;
  identity.local_rank = rt->identity.local_rank;
  identity.world_size = rt->identity.world_size;
  shm::SegmentOptions options;
  if (config.ring_records <= 0 || config.ring_records > (int64_t{1} << 26) ||
      config.comm_slots <= 0 || config.comm_slots > 4096) {
    FT_LOG(Warn, Preload,
           "libft.so disabled: FT_RING_RECORDS={} / FT_COMM_SLOTS={} out of range; the job runs "
           "unmonitored", config.ring_records, config.comm_slots);
    g_state.store(kPassThrough);
    return;
  }
  options.ring_capacity = static_cast<uint32_t>(config.ring_records);
  options.comm_slots = static_cast<uint32_t>(config.comm_slots);
  std::string name = shm::SegmentName(identity.job, identity.global_rank, rt->owner_pid);
  RemoveStaleSegment(name);
  Status created = shm::Segment::Create(name, identity, rt->owner_pid, options, &rt->segment);
  if (!created.ok()) {
    FT_LOG(Warn, Preload,
           "libft.so disabled: cannot create segment {}: {}; the job runs unmonitored (check "
           "/dev/shm space and FT_RING_RECORDS)", name, created.ToString());
    g_state.store(kPassThrough);
    return;
  }
  // The steps the job runs in all, as its environment says (ft_set_total_steps may override):
  // for the worker's summaries, and so the master's horizon for a slowdown (shm/layout.h).
  if (config.total_steps > 0) {
    rt->segment->header()->total_steps.store(config.total_steps, std::memory_order_relaxed);
  } else if (config.total_steps < 0) {
    FT_LOG(Warn, Preload, "FT_TOTAL_STEPS={} is not a step count; ignored (the master weighs a slowdown "
           "over FT_SLOW_HORIZON): set it to the steps the job runs in all, or leave it unset",
           config.total_steps);
  }
  if (!config.test_fail_hook.empty()) {
    if (auto place = shm::HookPlaceFromName(config.test_fail_hook)) {
      SetInjectedFailure(static_cast<uint32_t>(*place));
    } else {
      FT_LOG(Warn, Preload, "FT_TEST_FAIL_HOOK={}: no such hook place; ignored",
             config.test_fail_hook);
    }
  }
  rt->ring = std::make_unique<shm::RingWriter>(*rt->segment);
  rt->table = std::make_unique<shm::CommTableWriter>(*rt->segment);
  g_rt = rt.release();
  try {
    std::thread(RunPoller).detach();
  } catch (...) {
    FT_LOG(Warn, Preload, "libft.so disabled: cannot start its poller thread");
    g_rt->segment->header()->state.store(static_cast<uint32_t>(shm::ProcessState::kDisabled));
    (void)g_rt->segment->Remove();
    g_state.store(kPassThrough);
    return;
  }
  static bool registered = false;
  if (!registered) {
    registered = true;
    RegisterExitHandler();
    pthread_atfork(nullptr, nullptr, OnForkChild);
  }
  FT_LOG(Debug, Preload, "libft.so active: segment {}", name);
  g_state.store(kActive, std::memory_order_release);
  ArmTerminationMarks(config);
}

std::once_flag g_init_once;


}  // namespace

bool InitSlow() noexcept {
  bool was = t_in_ft;
  t_in_ft = true;
  try {
    std::call_once(g_init_once, [] {
      try {
        DoInit();
      } catch (...) {
        g_state.store(kPassThrough);
      }
    });
  } catch (...) {
    g_state.store(kPassThrough);
  }
  t_in_ft = was;
  return g_state.load(std::memory_order_acquire) == kActive;
}

}  // namespace ft::preload
