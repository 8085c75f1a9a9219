#include "ftworker/monitor/exit_event.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "common/log.h"

namespace ft::worker {

namespace {

// Signals that ask a process to end: a launcher's teardown, a scheduler's preemption, a
// person's kill or Ctrl-C. Not SIGKILL: the OOM killer sends it too, and a launcher only after
// a SIGTERM went unheeded.
bool AsksToEnd(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP; }

}  // namespace

void DescribeEnd(const RankEnd& end, proto::Event* event) {
  proto::Event& e = *event;
  e.clean = end.life == proto::RankState::kExited;
  const std::string asked =
      end.term > 0 && end.term < 128
          ? fmt::format("; it had been told to terminate by signal {} ({}), so this is a teardown "
                        "(a launcher or scheduler ending it), not a crash",
                        end.term, strsignal(end.term))
          : std::string();
  if (end.life == proto::RankState::kExited) {
    e.code = end.status;
    e.message = fmt::format("rank {} (pid {}) exited cleanly with status {}{}", end.rank, end.pid, end.status, asked);
    FT_LOG(Info, Worker, "{}", e.message);
  } else if (end.life == proto::RankState::kStopped) {
    e.code = end.status;
    e.message = fmt::format("rank {} (pid {}) stopped by this worker (a stop command)", end.rank, end.pid);
    FT_LOG(Info, Worker, "{}", e.message);
  } else if (!asked.empty()) {
    e.code = end.status != 0 ? end.status : -end.term;
    e.message = fmt::format("rank {} (pid {}) is gone without a clean exit{}", end.rank, end.pid, asked);
    FT_LOG(Info, Worker, "{}", e.message);
  } else if (end.exited_itself) {
    e.code = end.status;
    e.message = fmt::format(
        "rank {} (pid {}) exited with status {}: a failure (an uncaught exception, exit({})), not a "
        "finish; its log has the error",
        end.rank, end.pid, end.status, end.status);
    FT_LOG(Warn, Worker, "{}", e.message);
  } else if (const std::optional<int>& wait = end.wait_status; wait && WIFSIGNALED(*wait)) {
    // What the kernel says of a zombie beats what the process last wrote in its header.
    const int sig = WTERMSIG(*wait);
    e.code = -sig;
    if (AsksToEnd(sig)) {
      // Ended by a request to end that libft.so did not record (no handler: FT_CKPT_ON_SIGNAL=
      // none, a process killed before libft.so installed it, an app that reset it): a teardown
      // all the same. As a crash it made the master name a rank the launcher tore down after
      // another one failed unseen.
      e.terminated_by_signal = sig;
      e.terminate_unix_ms = e.unix_ms;
      e.message = fmt::format("rank {} (pid {}) was killed by signal {} ({}), which asks a process to end: a "
                              "teardown (a launcher, a scheduler or a person ending it), not a crash",
                              end.rank, end.pid, sig, strsignal(sig));
      FT_LOG(Info, Worker, "{}", e.message);
      return;
    }
    e.message = fmt::format("rank {} (pid {}) was killed by signal {} ({}){}", end.rank, end.pid, sig, strsignal(sig),
                            sig == SIGKILL ? ": by a person, the launcher or the OOM killer (see dmesg)" : "");
    FT_LOG(Warn, Worker, "{}", e.message);
  } else if (wait && WIFEXITED(*wait)) {
    e.code = WEXITSTATUS(*wait);
    e.message = fmt::format("rank {} (pid {}) exited with status {} without libft.so's exit path (_exit, "
                            "or a failure before it)", end.rank, end.pid, e.code);
    FT_LOG(Warn, Worker, "{}", e.message);
  } else if (end.status != 0) {
    e.code = end.status;
    e.message = fmt::format(
        "rank {} (pid {}) is gone without a clean exit; the last exit status it wrote was {}. "
        "Check the launcher's log for how it ended",
        end.rank, end.pid, end.status);
    FT_LOG(Warn, Worker, "{}", e.message);
  } else {
    e.code = 0;
    e.status_unknown = true;
    e.message = fmt::format(
        "rank {} (pid {}) is gone without a clean exit: killed or crashed; its exit status is "
        "unknown to the worker (its parent reaped it first). Check the launcher's log (signal, OOM "
        "killer) for the cause",
        end.rank, end.pid);
    FT_LOG(Warn, Worker, "{}", e.message);
  }
}

}  // namespace ft::worker
