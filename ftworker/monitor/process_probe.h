// ft::worker::ProcessProbe: what the worker learns about a rank's process from the kernel
// (kill(2) and /proc), behind an interface so tests can fake deaths, recycled pids and CPU use.
// SystemProcessProbe() is the real one; it keeps no state and may be used from any thread.
//
// Signals go only to a VerifiedProcess: a pidfd opened when the segment was attached, for the
// pid its name and header agree on, whose process was checked to belong to the segment's
// owner and to be no younger than the segment. A pidfd names one process, not a number, so a
// pid that is recycled later, or a header rewritten later, can never redirect a signal.
// The process must also have the segment itself mapped (/proc/<pid>/maps lists its file and
// inode): a pid that only looks right — the same number in another pid namespace, a process
// the segment's owner merely names — is not the rank's process.
#ifndef FT_FTWORKER_PROCESS_PROBE_H_
#define FT_FTWORKER_PROCESS_PROBE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::worker {

// The fields of /proc/<pid>/stat the worker uses.
struct ProcStat {
  char state = '?';          // 'R', 'S', 'D', 'Z' (zombie: dead, not yet reaped), 'X', ...
  uint64_t start_ticks = 0;  // field 22: start time after boot, in clock ticks
  uint64_t cpu_ticks = 0;    // fields 14 + 15: utime + stime
  // Field 52 (Linux 3.5+): the status as waitpid(2) reports it — meaningful only for a zombie,
  // whose parent has not reaped it yet; nullopt when the kernel does not give it.
  std::optional<int> wait_status;
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses).
std::optional<ProcStat> ParseProcStat(std::string_view text);

// What a segment claims about the process that wrote it.
struct ProcessClaim {
  int pid = 0;
  uint32_t uid = 0;              // the segment file's owner
  uint64_t created_unix_ns = 0;  // the segment's incarnation (CLOCK_REALTIME at creation)
  std::string file;              // the segment's file name ("ft.<job>.r<rank>.p<pid>")
  uint64_t inode = 0;            // and inode: the process must have exactly this file mapped
};

// A verified process: its pid and, on the real probe, a pidfd (-1 in fakes, or where the
// kernel has no pidfd_open: the probe then re-checks the start time before each signal).
// Move-only; closes the pidfd.
class VerifiedProcess {
 public:
  VerifiedProcess() = default;
  VerifiedProcess(int pid, int pidfd, uint64_t start_ticks) : pid_(pid), pidfd_(pidfd), start_ticks_(start_ticks) {}
  ~VerifiedProcess();
  VerifiedProcess(VerifiedProcess&& other) noexcept;
  VerifiedProcess& operator=(VerifiedProcess&& other) noexcept;
  VerifiedProcess(const VerifiedProcess&) = delete;
  VerifiedProcess& operator=(const VerifiedProcess&) = delete;

  bool valid() const { return pid_ > 0; }
  int pid() const { return pid_; }
  int pidfd() const { return pidfd_; }
  uint64_t start_ticks() const { return start_ticks_; }

 private:
  int pid_ = 0;
  int pidfd_ = -1;
  uint64_t start_ticks_ = 0;
};

class ProcessProbe {
 public:
  virtual ~ProcessProbe() = default;
  // kill(pid, 0) succeeds or fails with EPERM: some process has this pid in our namespace.
  virtual bool PidExists(int pid) = 0;
  // nullopt when /proc/<pid>/stat cannot be read (gone, or another pid namespace).
  virtual std::optional<ProcStat> ReadStat(int pid) = 0;
  // Nanoseconds the process's main thread has spent runnable but waiting for a CPU (the
  // second field of /proc/<pid>/schedstat); nullopt when unknown. CPU use alone cannot tell a
  // rank working on a host whose cores are oversubscribed from an idle one: both get little
  // CPU, but only the working one waits on a run queue.
  virtual std::optional<uint64_t> ReadRunDelayNs(int pid) {
    (void)pid;
    return std::nullopt;
  }
  virtual uint64_t TicksPerSecond() = 0;
  // Boot time, Unix seconds (/proc/stat btime); 0 unknown.
  virtual int64_t BootTimeUnixS() = 0;
  // Opens and checks the process `claim` names (see the top of this file). kNotFound: no such
  // pid here, one that ended while it was checked, or one without the segment mapped (gone,
  // another pid namespace, or unprovable: read the rank, never signal it); kCorrupt: the claim
  // is false: the pid is another user's live process, or started after the segment was made
  // (not its creator).
  virtual Status Verify(const ProcessClaim& claim, VerifiedProcess* out) = 0;
  // pidfd_send_signal to the verified process; kNotFound once it is gone.
  virtual Status Signal(const VerifiedProcess& process, int signal) = 0;
};

ProcessProbe* SystemProcessProbe();

// The real probe, calling `after_open(pid)` once Verify holds the process's pidfd and before
// it reads /proc: a test ends the process there to reach the race a rank killed while its
// segment is verified runs into.
std::unique_ptr<ProcessProbe> NewSystemProcessProbeForTest(std::function<void(int pid)> after_open);

}  // namespace ft::worker

#endif  // FT_FTWORKER_PROCESS_PROBE_H_
