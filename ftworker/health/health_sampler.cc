#include "ftworker/health/health_sampler.h"

#include <pthread.h>
#include <time.h>

#include <utility>

#include "common/log.h"
#include "ftworker/health/kernel_log.h"
#include "ftworker/health/nvml_source.h"
#include "ftworker/health/rdma_port_source.h"

namespace ft::worker::health {
namespace {

int64_t UnixMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

double ThreadCpuSeconds() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

}  // namespace

HealthSampler::HealthSampler(HealthSamplerOptions options) : options_(std::move(options)) {}

HealthSampler::~HealthSampler() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void HealthSampler::OpenSources() {
  std::vector<std::string> opened;
  // A source that does not open is not read, and said once; the others are.
  auto note = [&](const Status& s, const char* source, const char* unread) {
    if (s.ok()) {
      opened.push_back(source);
    } else {
      FT_LOG(Info, Worker, "{} not read: {}", unread, s.ToString());
    }
  };
  if (!options_.nvml_library.empty()) {
    note(NvmlSource::Open(options_.nvml_library, &nvml_), "nvml", "GPU signals are");
  }
  if (!options_.sysfs_root.empty()) {
    rdma_ = std::make_unique<RdmaPortSource>(options_.sysfs_root);
    opened.push_back("rdma");
  }
  if (!options_.kmsg_path.empty()) note(KernelLog::Open(options_.kmsg_path, &kmsg_), "kmsg", "the kernel log is");
  MutexLock lock(&mu_);
  sources_ = std::move(opened);
}

void HealthSampler::Start() {
  OpenSources();
  thread_ = std::thread([this] { Loop(); });
}

std::vector<proto::HwSignal> HealthSampler::PollOnce(int64_t unix_ms) {
  std::vector<proto::HwSignal> signals;
  auto append = [&signals](std::vector<proto::HwSignal> more) {
    for (proto::HwSignal& s : more) signals.push_back(std::move(s));
  };
  if (nvml_) append(nvml_->Poll(unix_ms));
  if (rdma_) append(rdma_->Poll(unix_ms));
  if (kmsg_) append(kmsg_->Poll());
  return signals;
}

void HealthSampler::Loop() {
  // Named so that its cost can be told from the worker's (bench/worker_bench.py reads
  // /proc/<pid>/task/*/comm).
  pthread_setname_np(pthread_self(), "ft-health");
  MutexLock lock(&mu_);
  while (!stop_) {
    lock.Unlock();
    const double cpu_before = ThreadCpuSeconds();
    std::vector<proto::HwSignal> signals = PollOnce(UnixMs());
    const double cpu = ThreadCpuSeconds() - cpu_before;
    lock.Lock();
    ++cost_.polls;
    cost_.cpu_seconds += cpu;
    for (proto::HwSignal& s : signals) {
      if (queue_.size() >= kMaxQueued) {
        queue_.erase(queue_.begin());
        ++dropped_;
      }
      queue_.push_back(std::move(s));
    }
    cv_.WaitFor(&mu_, options_.interval, [&]() REQUIRES(mu_) { return stop_; });
  }
}

std::vector<proto::HwSignal> HealthSampler::Take() {
  MutexLock lock(&mu_);
  return std::exchange(queue_, {});
}

SamplerCost HealthSampler::cost() const {
  MutexLock lock(&mu_);
  return cost_;
}

uint64_t HealthSampler::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

std::vector<std::string> HealthSampler::sources() const {
  MutexLock lock(&mu_);
  return sources_;
}

}  // namespace ft::worker::health
