// Settings of the NCCL stand-in, read from the environment. This is the only file that calls
// getenv. Values are read again at each communicator creation (not cached for the process), so
// a test may set a variable in a forked child before it creates its communicators.
#ifndef GPUSIM_NCCL_CONFIG_H_
#define GPUSIM_NCCL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpusim::nccl {

struct StallRule {
  std::string comm;  // commName, "comm<k>", or the 16-hex-digit communicator id
  uint64_t after = 0;  // collectives that complete before the stall
};

// A slow link: every collective on the communicator takes `ms` longer once all its members
// have arrived (the transfer, not an arrival), in the processes whose RANK is listed (all when
// none is): list both ends of the link, and every member of that communicator waits alike.
struct SlowRule {
  std::string comm;  // commName, "comm<k>", or the 16-hex-digit communicator id
  int ms = 0;
  std::vector<int> ranks;  // the processes' RANK it applies in; empty: every process
};

struct Config {
  double init_timeout_s = 120;           // GPUSIM_NCCL_INIT_TIMEOUT_S
  bool debug = false;                    // GPUSIM_NCCL_DEBUG
  uint64_t chunk_bytes = 1 << 20;        // GPUSIM_NCCL_CHUNK_BYTES
  std::string shm_prefix = "/gpusim-nccl-";  // GPUSIM_NCCL_SHM_PREFIX
  std::vector<StallRule> stalls;         // GPUSIM_NCCL_STALL
  std::vector<SlowRule> slows;           // GPUSIM_NCCL_SLOW
  int process_rank = -1;                 // RANK (the launcher's), -1 when unset
  int teardown_ms = 0;                   // GPUSIM_NCCL_TEARDOWN_MS: destroy/abort take this long
  int launch_delay_ms = 0;               // GPUSIM_NCCL_LAUNCH_DELAY_MS: nonblocking ops stay
                                         // ncclInProgress this long (until then, or an abort)
  bool abort_on_violation = false;       // GPUSIM_NCCL_VIOLATION_ABORT
  std::vector<std::string> problems;     // malformed values, one line each (debug output)
};

// Reads every GPUSIM_NCCL_* variable of the table in config.cc. Malformed values keep the
// default and add a line to `problems`.
Config LoadConfig();

// Debug output (GPUSIM_NCCL_DEBUG=1), one line on stderr prefixed with the pid.
void DebugLog(const Config& cfg, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_CONFIG_H_
