// ft::worker::MonitorSettings: the detection thresholds of the monitoring core, taken from
// ft::Config (common/config_table.def, the FT_* settings named below) once at start-up.
// A plain value.
#ifndef FT_FTWORKER_MONITOR_SETTINGS_H_
#define FT_FTWORKER_MONITOR_SETTINGS_H_

#include <cstdint>

#include "common/config.h"

namespace ft::worker {

struct MonitorSettings {
  uint64_t timeout_warmup_ns = 50'000'000'000;  // FT_TIMEOUT_WARMUP: timeout before the master publishes
  uint64_t restore_wait_ns = 10'000'000'000;    // FT_RESTORE_WAIT: how long a peer may wait in ft_restore
  uint64_t frozen_after_ns = 3'000'000'000;     // FT_FROZEN_AFTER: heartbeat silence of a live process
  uint64_t busy_call_age_ns = 1'000'000'000;    // FT_BUSY_CALL_AGE
  double busy_cpu_pct = 30;                     // FT_BUSY_CPU_PCT
  double slowdown_pct = 25;                     // FT_SLOWDOWN_PCT
  int slowdown_steps = 5;                       // FT_SLOWDOWN_STEPS
  double slowdown_floor_ms = 5;                 // FT_SLOWDOWN_FLOOR
  int warmup_steps = 10;                        // FT_WARMUP_STEPS
  int baseline_steps = 20;                      // steps after warm-up that set the baseline and its noise

  static MonitorSettings FromConfig(const Config& config);
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_MONITOR_SETTINGS_H_
