// ft::worker::health::HealthSampler: the node's hardware and system signals, read on a thread
// of their own every interval (FT_HEALTH_INTERVAL) so that a slow NVML call (a GPU falling off
// the bus can stall one for seconds) never delays the worker's loop. Sources that cannot open
// (no NVML, no /dev/kmsg permission) are said once and skipped; the others still run.
//
// Take() is called by the worker's loop thread; the sampler's thread owns the sources.
#ifndef FT_FTWORKER_HEALTH_HEALTH_SAMPLER_H_
#define FT_FTWORKER_HEALTH_HEALTH_SAMPLER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "proto/messages.h"

namespace ft::worker::health {

class NvmlSource;
class RdmaPortSource;
class KernelLog;

struct HealthSamplerOptions {
  std::string nvml_library;  // FT_NVML_LIBRARY; "": GPU signals off
  std::string sysfs_root;    // FT_SYSFS_ROOT; "": NIC counters off
  std::string kmsg_path;     // FT_KMSG_PATH; "": the kernel log off
  std::chrono::milliseconds interval{1000};
};

// What one poll of the sources cost, for the worker's metrics (the issue's ≤ 1 % of a core).
struct SamplerCost {
  uint64_t polls = 0;
  double cpu_seconds = 0;  // the sampler thread's CPU time
};

class HealthSampler {
 public:
  explicit HealthSampler(HealthSamplerOptions options);
  ~HealthSampler();  // stops and joins the thread
  HealthSampler(const HealthSampler&) = delete;
  HealthSampler& operator=(const HealthSampler&) = delete;

  // Opens the sources and starts the thread.
  void Start();
  // The signals read since the last Take, oldest first (at most kMaxQueued: older ones are
  // dropped and counted).
  std::vector<proto::HwSignal> Take();
  SamplerCost cost() const;
  uint64_t dropped() const;
  // Which sources opened ("nvml", "rdma", "kmsg"), once Start returned.
  std::vector<std::string> sources() const;

  // One poll of every open source, on the caller's thread: what the thread runs each
  // interval; public for tests, which call it without Start.
  std::vector<proto::HwSignal> PollOnce(int64_t unix_ms);
  void OpenSources();

  static constexpr size_t kMaxQueued = 4096;

 private:
  void Loop();

  const HealthSamplerOptions options_;
  std::unique_ptr<NvmlSource> nvml_;
  std::unique_ptr<RdmaPortSource> rdma_;
  std::unique_ptr<KernelLog> kmsg_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<proto::HwSignal> queue_ GUARDED_BY(mu_);
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  SamplerCost cost_ GUARDED_BY(mu_);
  std::vector<std::string> sources_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_HEALTH_SAMPLER_H_
