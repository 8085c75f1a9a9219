// ft::worker::ProcessWatch: whether one rank's process is still the one that created its
// segment, and its CPU use. Alive while kill(pid, 0) finds it and /proc/<pid>/stat shows the
// same start time and no zombie (a zombie's wait status is kept: how it ended). A pid invisible
// from the first look while the heartbeat is fresh is a process in another pid namespace once
// its heartbeat moves (then the heartbeat alone decides: silent for 3 s = gone), or a process
// that just died if it stands still for a second. A pid whose process started after the
// segment was created (and whose heartbeat is silent) was recycled. CPU % over the last ~1 s
// from utime + stime, and the share of it the main thread waited for a CPU (schedstat).
// Owned by its RankMonitor; not thread-safe.
#ifndef FT_FTWORKER_PROCESS_WATCH_H_
#define FT_FTWORKER_PROCESS_WATCH_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "ftworker/monitor/process_probe.h"
#include "shm/layout.h"

namespace ft::worker {

class ProcessWatch {
 public:
  // `rank`, `pid`, `incarnation` and `segment` from the segment's validated header copy.
  ProcessWatch(ProcessProbe* probe, int rank, int pid, uint64_t incarnation, std::string segment);

  // Whether the process is gone as of `now_ns`, given the live header; samples its CPU while
  // it runs.
  bool CheckGone(uint64_t now_ns, const shm::SegmentHeader& header);
  // For a rank already finished: whether its pid is gone too.
  bool PidGone() const { return foreign_pid_ns_ || !probe_->PidExists(pid_); }

  // Seen in another pid namespace: undecided until its heartbeat moves (nothing it shows in
  // flight is a timeout meanwhile).
  bool foreign_pending() const { return foreign_pending_; }
  // The last state letter of /proc/<pid>/stat; 0 unknown.
  char proc_state() const { return proc_state_; }
  bool stopped() const { return proc_state_ == 'T' || proc_state_ == 't'; }
  // As waitpid(2) would report it, read from a zombie's /proc before its parent reaped it.
  const std::optional<int>& wait_status() const { return wait_status_; }
  double cpu_pct() const { return cpu_pct_; }
  double wait_pct() const { return wait_pct_; }  // of the last ~1 s, runnable but waiting for a CPU

 private:
  void SampleCpu(uint64_t now_ns, uint64_t cpu_ticks, std::optional<uint64_t> run_delay_ns);

  ProcessProbe* probe_;
  int rank_;
  int pid_;
  uint64_t incarnation_;
  std::string segment_;

  bool first_look_ = true;
  bool foreign_pid_ns_ = false;
  // First seen with its pid not visible and a fresh heartbeat: foreign once the heartbeat moves,
  // gone if it stands still for a second.
  bool foreign_pending_ = false;
  uint64_t foreign_pending_heartbeat_ = 0;
  uint64_t foreign_pending_since_ns_ = 0;
  std::optional<uint64_t> start_ticks_;
  char proc_state_ = 0;
  std::optional<int> wait_status_;
  struct CpuSample {
    uint64_t now_ns;
    uint64_t cpu_ticks;
    std::optional<uint64_t> run_delay_ns;
  };
  std::deque<CpuSample> cpu_samples_;
  double cpu_pct_ = 0;
  double wait_pct_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PROCESS_WATCH_H_
