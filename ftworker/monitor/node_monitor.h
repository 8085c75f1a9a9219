// ft::worker::NodeMonitor: the monitoring core of one ftworker. It finds the job's segments on
// this node, keeps one RankMonitor per attached segment, raises events, builds what the
// daemon reports (progress tables, summaries, memberships) and carries out the commands that
// touch a rank (stop, mailbox). No Redis here: the daemon moves its output to Redis.
//
// Tick() is the only call that reads segments; the accessors return what the last Tick saw.
// Nothing blocks: a stop sends SIGTERM at once and SIGKILL from a later Tick after the grace.
// Not thread-safe: one thread (the daemon loop) calls everything.
//
// Ranks: a rank may have several incarnations (a restarted process makes a new segment). The
// newest incarnation is the rank's current one, which Progress(), Memberships(), commands and
// Ranks() use; older ones are still read until their exit is reported. Exited and dead ranks
// stay visible (state "exited" / "dead") for `retain_ns`, then are dropped.
#ifndef FT_FTWORKER_NODE_MONITOR_H_
#define FT_FTWORKER_NODE_MONITOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "ftworker/monitor/monitor_settings.h"
#include "ftworker/monitor/process_probe.h"
#include "ftworker/monitor/rank_monitor.h"
#include "ftworker/monitor/segment_discovery.h"
#include "ftworker/monitor/timeout_detector.h"
#include "proto/messages.h"
#include "shm/mailbox.h"

namespace ft::worker {

// Mailbox command types: shm/mailbox.h owns them (both sides of the segment use them).
using MailboxCommand = shm::CommandType;

struct NodeMonitorOptions {
  std::string job;
  std::string node;                       // this worker's node id; segments of other nodes are skipped
  std::string shm_dir = "/dev/shm";
  MonitorSettings settings;
  uint64_t scan_interval_ns = 200'000'000;  // how often /dev/shm is listed
  uint64_t settle_ns = 2'000'000'000;       // an invalid file is ignored after this long
  uint64_t retain_ns = 60'000'000'000;      // an exited/dead rank stays visible this long
  ProcessProbe* probe = nullptr;            // nullptr: kill(2) and /proc
  int64_t segment_uid = -1;                 // owner required of segments; -1: this process's euid

  static NodeMonitorOptions FromConfig(const Config& config, std::string job, std::string node);
};

class NodeMonitor {
 public:
  explicit NodeMonitor(NodeMonitorOptions options);
  NodeMonitor(const NodeMonitor&) = delete;
  NodeMonitor& operator=(const NodeMonitor&) = delete;

  // One round: discovery, every rank read, events appended to *out (timeout, error, exit,
  // slowdown, busy; each with the rank's progress), dead ranks' segments reclaimed, pending
  // SIGKILLs sent. `now_mono_ns` is CLOCK_MONOTONIC (the clock of the segments).
  void Tick(uint64_t now_mono_ns, int64_t now_unix_ms, std::vector<proto::Event>* out);

  // The master's timeouts (replaces the previous table).
  void SetTimeouts(const proto::TimeoutTable& table);

  // One per rank (its current incarnation), by rank.
  std::vector<proto::RankProgress> Progress() const;
  // Closes every rank's summary window (durations, steps since the last call).
  std::vector<proto::RankSummary> TakeSummaries(int64_t now_unix_ms);
  std::vector<proto::Membership> Memberships() const;
  // True once after any membership changed (a rank came or went, joined or left a comm, or
  // changed state): the daemon rewrites Memberships() then.
  bool TakeMembershipChanged();

  // Ranks whose current incarnation is alive (running or disabled), ascending.
  std::vector<int> Ranks() const;

  // The current incarnation of each rank, alive or not (an OOM kill is read after the process
  // ended): its pid and GPU (shm/layout.h gpu_bus_id, "" until libft.so wrote it). The daemon
  // maps hardware signals to ranks by them (ftworker/health/rank_devices.h).
  struct RankHardware {
    int rank = -1;
    int pid = 0;
    std::string gpu_bus_id;
  };
  std::vector<RankHardware> Hardware() const;

  // Failures libft.so swallowed (shm/hook_failures.h), per incarnation still read, as of the
  // last Tick; incarnations without any are left out. The counts only grow within one.
  struct RankHookFailures {
    int rank = -1;
    uint64_t incarnation = 0;
    std::vector<shm::HookFailureCount> counts;
  };
  std::vector<RankHookFailures> HookFailures() const;

  // SIGTERM now; SIGKILL from the first Tick `grace_s` later if the process is still there.
  // kNotFound when the rank has no live process on this node.
  Status StopRank(int rank, double grace_s);
  // Posts a mailbox command to the rank's current incarnation; *seq identifies it for
  // PollAck. kNotReady when its mailbox is full (8 unacknowledged commands).
  Status PostCommand(int rank, MailboxCommand type, std::string_view text, uint64_t* seq);
  Status PostMessage(int rank, std::string_view text, uint64_t* seq) {
    return PostCommand(rank, MailboxCommand::kMessage, text, seq);
  }
  // The rank's acknowledgement of command `seq`, once written.
  std::optional<shm::Ack> PollAck(int rank, uint64_t seq);
  // The incarnation PostCommand posts to now (0: the rank has no live process here).
  uint64_t LiveIncarnation(int rank) const;
  // That incarnation of the rank has ended (exited, died, stopped) or is no longer read: a
  // command posted to it will never be acknowledged.
  bool Ended(int rank, uint64_t incarnation) const;

  // Invalid files ignored by discovery (for tests and the daemon's status line).
  size_t ignored_segments() const { return discovery_.ignored(); }

 private:
  struct PendingKill {
    std::string segment;
    int pid;
    uint64_t deadline_ns;
  };

  RankMonitor* Current(int rank) const;
  RankMonitor* CurrentAlive(int rank) const;
  void RefreshCurrent();
  void RaiseBusy(int64_t now_unix_ms, std::vector<proto::Event>* out);
  void Reclaim();
  void Retire(uint64_t now_ns);
  void SendKills(uint64_t now_ns);

  NodeMonitorOptions options_;
  ProcessProbe* probe_;
  SegmentDiscovery discovery_;
  TimeoutPolicy timeouts_;
  std::vector<std::unique_ptr<RankMonitor>> monitors_;
  std::map<int, RankMonitor*> current_;  // rank -> its newest incarnation in monitors_
  std::set<std::string> reclaimed_;
  std::vector<PendingKill> kills_;
  std::set<std::tuple<int, uint64_t, uint64_t, uint64_t>> busy_raised_;  // (rank, incarnation, comm, seq)
  bool membership_changed_ = false;
  uint64_t now_ns_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_NODE_MONITOR_H_
