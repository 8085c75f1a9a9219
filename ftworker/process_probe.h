// ft::worker::ProcessProbe: what the worker learns about a rank's process from the kernel
// (kill(2) and /proc), behind an interface so tests can fake deaths, recycled pids and CPU use.
// SystemProcessProbe() is the real one; it keeps no state and may be used from any thread.
#ifndef FT_FTWORKER_PROCESS_PROBE_H_
#define FT_FTWORKER_PROCESS_PROBE_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace ft::worker {

// The fields of /proc/<pid>/stat the worker uses.
struct ProcStat {
  char state = '?';          // 'R', 'S', 'D', 'Z' (zombie: dead, not yet reaped), 'X', ...
  uint64_t start_ticks = 0;  // field 22: start time after boot, in clock ticks
  uint64_t cpu_ticks = 0;    // fields 14 + 15: utime + stime
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses).
std::optional<ProcStat> ParseProcStat(std::string_view text);

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
  virtual Status Signal(int pid, int signal) = 0;
};

ProcessProbe* SystemProcessProbe();

}  // namespace ft::worker

#endif  // FT_FTWORKER_PROCESS_PROBE_H_
