#include "ftworker/monitor/process_watch.h"

#include "common/log.h"

namespace ft::worker {
namespace {

constexpr uint64_t kCpuWindowNs = 1'000'000'000;
constexpr uint64_t kCpuMinSpanNs = 100'000'000;
constexpr uint64_t kForeignStaleNs = 3'000'000'000;     // heartbeat silence = dead, other pid namespace
constexpr uint64_t kHeartbeatFreshNs = 1'000'000'000;
constexpr uint64_t kRecycleStaleNs = 2'000'000'000;
constexpr double kRecycleSlackS = 30;                   // clock steps, btime rounding

}  // namespace

ProcessWatch::ProcessWatch(ProcessProbe* probe, int rank, int pid, uint64_t incarnation, std::string segment)
    : probe_(probe), rank_(rank), pid_(pid), incarnation_(incarnation), segment_(std::move(segment)) {}

bool ProcessWatch::CheckGone(uint64_t now_ns, const shm::SegmentHeader& header) {
  const shm::SegmentHeader* h = &header;
  uint64_t heartbeat = h->heartbeat_ns.load(std::memory_order_acquire);
  if (first_look_) {
    first_look_ = false;
    // A pid not visible with a fresh heartbeat: a process in another pid namespace, or one that
    // died just before this worker started (a worker restarted right after its ranks ended).
    // Only a heartbeat that advances tells them apart; until then nothing it shows in flight is
    // a timeout.
    if (!probe_->PidExists(pid_) && heartbeat != 0 && now_ns >= heartbeat &&
        now_ns - heartbeat < kHeartbeatFreshNs) {
      foreign_pending_ = true;
      foreign_pending_heartbeat_ = heartbeat;
      foreign_pending_since_ns_ = now_ns;
      return false;
    }
  }
  if (foreign_pending_) {
    if (heartbeat != foreign_pending_heartbeat_) {
      foreign_pending_ = false;
      foreign_pid_ns_ = true;
      FT_LOG(Info, Worker,
             "rank {}: pid {} is not visible here but its heartbeat advances: the process runs "
             "in another pid namespace; its death is detected from its heartbeat (3 s) and its "
             "CPU use is unknown. Share the pid namespace (hostPID) for faster detection",
             rank_, pid_);
    } else if (now_ns - foreign_pending_since_ns_ < kHeartbeatFreshNs) {
      return false;
    } else {
      foreign_pending_ = false;
      return true;  // its heartbeat stood still: the process is gone
    }
  }
  if (foreign_pid_ns_) return heartbeat == 0 || (now_ns > heartbeat && now_ns - heartbeat > kForeignStaleNs);
  if (!probe_->PidExists(pid_)) return true;
  auto stat = probe_->ReadStat(pid_);
  proc_state_ = 0;
  if (!stat) return false;  // exists, /proc hidden (hidepid): trust kill(2)
  if (stat->state == 'Z' || stat->state == 'X') {
    wait_status_ = stat->wait_status;  // how it ended, while its parent has not reaped it
    return true;
  }
  proc_state_ = stat->state;
  if (!start_ticks_) {
    start_ticks_ = stat->start_ticks;
    // A process that started after the segment was created cannot have created it: the pid
    // was recycled. Believed only when the heartbeat is silent too, since wall clock steps
    // move the two clocks compared here apart.
    int64_t boot = probe_->BootTimeUnixS();
    uint64_t hz = probe_->TicksPerSecond();
    bool silent = heartbeat == 0 || (now_ns > heartbeat && now_ns - heartbeat > kRecycleStaleNs) ||
                  h->state.load(std::memory_order_relaxed) == static_cast<uint32_t>(shm::ProcessState::kDisabled);
    if (boot > 0 && hz > 0 && incarnation_ > 0 && silent) {
      double started_s = static_cast<double>(boot) + static_cast<double>(stat->start_ticks) / static_cast<double>(hz);
      double created_s = static_cast<double>(incarnation_) / 1e9;
      if (started_s > created_s + kRecycleSlackS) {
        FT_LOG(Info, Worker, "rank {}: pid {} now belongs to a process started after the segment {}: "
               "the rank's process is gone", rank_, pid_, segment_);
        return true;
      }
    }
  } else if (*start_ticks_ != stat->start_ticks) {
    return true;  // the pid was recycled while we watched
  }
  SampleCpu(now_ns, stat->cpu_ticks, probe_->ReadRunDelayNs(pid_));
  return false;
}

void ProcessWatch::SampleCpu(uint64_t now_ns, uint64_t cpu_ticks, std::optional<uint64_t> run_delay_ns) {
  if (!cpu_samples_.empty() && now_ns <= cpu_samples_.back().now_ns) return;
  cpu_samples_.push_back(CpuSample{now_ns, cpu_ticks, run_delay_ns});
  while (cpu_samples_.size() > 2 && now_ns - cpu_samples_[1].now_ns >= kCpuWindowNs) cpu_samples_.pop_front();
  const CpuSample& base = cpu_samples_.front();
  uint64_t span = now_ns - base.now_ns;
  if (span < kCpuMinSpanNs || cpu_ticks < base.cpu_ticks) return;
  double cpu_s = static_cast<double>(cpu_ticks - base.cpu_ticks) / static_cast<double>(probe_->TicksPerSecond());
  cpu_pct_ = 100.0 * cpu_s / (static_cast<double>(span) / 1e9);
  wait_pct_ = 0;
  if (run_delay_ns && base.run_delay_ns && *run_delay_ns >= *base.run_delay_ns) {
    wait_pct_ = 100.0 * static_cast<double>(*run_delay_ns - *base.run_delay_ns) / static_cast<double>(span);
  }
}

}  // namespace ft::worker
