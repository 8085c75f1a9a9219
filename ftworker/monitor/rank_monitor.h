// ft::worker::RankMonitor: everything the worker knows about one attached segment, i.e. one
// incarnation of one rank. Each Tick():
//   - drains the record ring (shm::RingReader owns the consumer cursor in the control page)
//     and feeds: communicator membership (kCommInit/kCommEnd), step inference (kOpEnter),
//     duration statistics and comm intervals (kOpEnd), error events (kApiError);
//   - snapshots every in-flight table slot into the progress table (CommRow per slot; a p2p
//     slot is recognised by its flag (shm::kCommSlotP2P) or by its id, Mix(comm ^ "p2p-slot") of a known
//     communicator, and reported under that communicator with p2p = true);
//   - checks the process (ProcessWatch: kill(pid, 0), /proc start time, zombies, the heartbeat
//     for another pid namespace); a pid gone without state kExited is a death, reported at once
//     ("exit", clean = false); kExited with exit_status 0 is a clean exit. An exit through the
//     normal path with a failing status (an uncaught exception, exit(1)) is a failure like a
//     death: state "dead", clean = false, code = the status — never how a job finishes. Either
//     carries terminated_by_signal when libft.so recorded that a signal (SIGTERM from a
//     launcher) asked the process to end, or when the zombie's status says such a signal
//     killed it (exit_event.h): a teardown, not a crash. If the
//     pid is invisible from the start while the heartbeat advances, the process lives in
//     another pid namespace and the heartbeat alone decides (stale for 3 s = dead);
//   - CPU % over the last ~1 s from utime + stime; last call age; blocked time; busy =
//     last call younger than busy_call_age, or CPU >= busy_cpu_pct while not blocked in a
//     synchronizing CUDA call (CPU here counts the time its main thread waited for a CPU on
//     an oversubscribed host: it wanted to work); frozen = the process is stopped or traced
//     (/proc state T/t) or its poller's heartbeat is older than frozen_after (never busy then);
//     once it has been frozen for frozen_after (stopped that long, or the heartbeat silent that
//     long), a "frozen" event, once per episode: a frozen rank is an incident on its own, whether
//     or not a peer is seen waiting on it (peers may wait outside NCCL). Not for a process that
//     was told to terminate (the segment's terminate_signal): it is on its way out;
//   - steps -> SlowdownDetector; in-flight ops -> TimeoutDetector.
// A RankMonitor owns its Segment (the mapping stays valid after the file is unlinked).
// Not thread-safe: the node monitor's thread drives it.
#ifndef FT_FTWORKER_RANK_MONITOR_H_
#define FT_FTWORKER_RANK_MONITOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ftworker/monitor/monitor_settings.h"
#include "ftworker/monitor/process_probe.h"
#include "ftworker/monitor/process_watch.h"
#include "ftworker/monitor/kernel_stats.h"
#include "ftworker/monitor/op_windows.h"
#include "ftworker/monitor/slowdown_detector.h"
#include "ftworker/monitor/step_inference.h"
#include "ftworker/monitor/timeout_detector.h"
#include "proto/messages.h"
#include "shm/comm_table.h"
#include "shm/hook_failures.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace ft::worker {


// kStopped: gone without a clean exit after this worker signalled it (a stop command), which
// is not a crash.
// The states are the ones the worker reports (proto::RankState, named by RankStateName).
using Life = proto::RankState;

class RankMonitor {
 public:
  // `node` names this worker's node in what it reports (empty: the segment's own). `process`
  // is the verified process of the segment (SegmentDiscovery), invalid when it could not be
  // verified (`unverified` says why): such a rank is read but never signalled.
  RankMonitor(std::unique_ptr<shm::Segment> segment, uint64_t inode, std::string node,
              const MonitorSettings& settings, ProcessProbe* probe,
              VerifiedProcess process = {}, std::string unverified = {});
  RankMonitor(const RankMonitor&) = delete;
  RankMonitor& operator=(const RankMonitor&) = delete;

  // Reads what is new and checks the process. Appends error, exit, slowdown and timeout
  // events. After the exit event nothing more is read.
  void Tick(uint64_t now_ns, int64_t now_unix_ms, const TimeoutPolicy& timeouts,
            std::vector<proto::Event>* events);

  // As of the last Tick.
  const proto::RankProgress& progress() const { return progress_; }
  proto::Membership membership() const;
  bool membership_changed() const { return membership_changed_; }
  void clear_membership_changed() { membership_changed_ = false; }

  // Closes the summary window: op durations and steps since the last call.
  proto::RankSummary TakeSummary(int64_t unix_ms);

  // Timeouts raised by this rank whose op is still in flight.
  const std::vector<ActiveTimeout>& active_timeouts() const { return timeouts_.active(); }
  // Whether this rank is a member of `comm_id` (a table slot or a kCommInit record).
  bool IsMember(uint64_t comm_id) const;
  // Collectives this rank entered on `comm_id`, from its table slot; nullopt without one.
  std::optional<uint64_t> EnteredSeq(uint64_t comm_id) const;

  Life life() const { return life_; }
  bool finished() const { return life_ == Life::kExited || life_ == Life::kDead || life_ == Life::kStopped; }
  // This worker sent the process a stop signal: if it dies without a clean exit now, it was
  // stopped, not crashed.
  void MarkStopSignalled() { stop_signalled_ = true; }
  // Signals the verified process through its pidfd; never a pid read from the segment.
  Status Signal(int signal);
  uint64_t finished_ns() const { return finished_ns_; }
  bool pid_gone() const { return pid_gone_; }
  // The process ended through its exit path (libft.so marked the segment exited, whatever the
  // status): it removes its own segment, and may still be running its last exit handlers.
  bool exited_itself() const { return exited_itself_; }

  int rank() const { return rank_; }
  int pid() const { return pid_; }
  // The rank's termination-save grace in ms (shm/layout.h term_grace_ms; 0: none armed).
  uint32_t term_grace_ms() const {
    return segment_ ? segment_->header()->term_grace_ms.load(std::memory_order_relaxed) : 0;
  }
  // The rank's GPU PCI bus id (shm/layout.h gpu_bus_id), "" until libft.so wrote it.
  std::string gpu_bus_id() const { return segment_ ? shm::GpuBusIdOf(*segment_->header()) : std::string(); }
  uint64_t incarnation() const { return incarnation_; }
  const std::string& name() const { return segment_->name(); }
  uint64_t inode() const { return inode_; }
  shm::Segment& segment() { return *segment_; }
  const StepInference& steps() const { return steps_; }
  // Failures libft.so swallowed, by place (shm/hook_failures.h), as of the last Tick.
  const std::vector<shm::HookFailureCount>& hook_failures() const { return hook_failures_; }

 private:
  struct SlotView {
    shm::CommProgress p;
    uint64_t real_id = 0;
    bool p2p = false;
  };

  void DrainRing(int64_t now_unix_ms, std::vector<proto::Event>* events);
  void OnRecord(const shm::Record& r, int64_t now_unix_ms, std::vector<proto::Event>* events);
  void OnError(const shm::Record& r, int64_t now_unix_ms, std::vector<proto::Event>* events);
  void LearnComm(uint64_t comm_id);
  void ReadSlots();
  void BuildProgress(uint64_t now_ns, int64_t now_unix_ms);
  void CheckFrozen(uint64_t now_ns, int64_t now_unix_ms, std::vector<proto::Event>* events);
  void OnSteps(int64_t now_unix_ms, std::vector<proto::Event>* events);
  void Finish(Life life, uint64_t now_ns, int64_t now_unix_ms, std::vector<proto::Event>* events);
  std::vector<InFlightOp> InFlight(uint64_t now_ns) const;
  proto::Event MakeEvent(proto::EventKind kind, int64_t unix_ms) const;

  std::unique_ptr<shm::Segment> segment_;
  uint64_t inode_;
  std::string node_;
  MonitorSettings settings_;
  ProcessProbe* probe_;
  shm::RingReader reader_;
  std::vector<shm::Record> batch_;
  VerifiedProcess process_;
  std::string unverified_;
  ProcessWatch process_watch_;  // is its process alive, its CPU

  // Identity, copied from the validated header once.
  int rank_, local_rank_, world_size_, pid_;
  uint64_t incarnation_;
  uint32_t record_version_;  // the segment's record format (shm::RecordVersionOf), read once
  std::string host_;

  Life life_ = Life::kRunning;
  uint64_t finished_ns_ = 0;
  bool pid_gone_ = false;
  bool exited_itself_ = false;
  bool stop_signalled_ = false;
  bool seen_alive_ = false;  // a tick found the process running (not only its segment)
  int64_t alive_unix_ms_ = 0;  // the last such tick
  uint64_t stopped_since_ns_ = 0;  // first tick that saw it stopped (T/t) in a row; 0 not stopped
  bool frozen_raised_ = false;     // a frozen event was raised for the current episode
  bool warned_ring_ = false;

  // Communicators.
  std::map<uint64_t, proto::CommMember> members_;           // real id -> membership
  std::unordered_map<uint64_t, uint64_t> salted_to_real_;   // p2p slot id -> comm id
  std::unordered_set<uint64_t> ended_;                      // kCommEnd seen
  std::vector<std::optional<SlotView>> slots_;  // by slot index
  bool membership_changed_ = true;
  std::string last_state_;
  int64_t restored_step_ = -2;  // what ft_restore did (proto::Membership::restored_step)
  int64_t restore_plan_ = 0;

  // Records, steps, summary window.
  uint64_t last_dropped_ = 0;
  uint64_t window_records_ = 0;
  uint64_t window_dropped_ = 0;
  OpWindows ops_;
  KernelStats kernels_;
  StepInference steps_;
  SlowdownDetector slowdown_;
  uint64_t steps_total_ = 0;
  double last_step_ms_ = 0;
  std::vector<double> window_steps_ms_;
  std::vector<double> window_compute_ms_;
  std::vector<double> window_comm_ms_;
  struct ErrorSeen {
    int64_t last_unix_ms = 0;
    uint64_t suppressed = 0;
  };
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, ErrorSeen> errors_seen_;  // (library, call, code)

  TimeoutDetector timeouts_;
  proto::RankProgress progress_;
  std::vector<shm::HookFailureCount> hook_failures_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_RANK_MONITOR_H_
