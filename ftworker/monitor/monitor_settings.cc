#include "ftworker/monitor/monitor_settings.h"

#include <algorithm>

namespace ft::worker {
namespace {

uint64_t Ns(Duration d) { return d.count() > 0 ? static_cast<uint64_t>(d.count()) : 0; }

}  // namespace

MonitorSettings MonitorSettings::FromConfig(const Config& config) {
  MonitorSettings s;
  s.timeout_warmup_ns = Ns(config.timeout_warmup);
  s.restore_wait_ns = Ns(config.restore_wait);
  s.busy_call_age_ns = Ns(config.busy_call_age);
  s.frozen_after_ns = std::max<uint64_t>(Ns(config.frozen_after), 1);
  s.busy_cpu_pct = static_cast<double>(config.busy_cpu_pct);
  s.slowdown_pct = static_cast<double>(std::max<int64_t>(config.slowdown_pct, 1));
  s.slowdown_floor_ms = static_cast<double>(Ns(config.slowdown_floor)) / 1e6;
  s.slowdown_steps = static_cast<int>(std::clamp<int64_t>(config.slowdown_steps, 1, 1000));
  s.warmup_steps = static_cast<int>(std::clamp<int64_t>(config.warmup_steps, 0, 100000));
  return s;
}

}  // namespace ft::worker
