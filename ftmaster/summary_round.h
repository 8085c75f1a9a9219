// ft::master::SummaryRound: the master loop's timeouts and stragglers. It reads the summary
// hashes in HSCAN chunks (131k summaries are ~150 MB: one HGETALL would hold the loop, and the
// lease, for seconds), each chunk spaced so that a pass takes about 1/kSteadyShare of the
// master's time, feeding the timeout model (timeouts.h) and the straggler detector
// (straggler.h) as they come. At the end of a pass it publishes a changed timeout table
// (ft:{J}:timeouts, then ft:{J}:timeouts:version, and a notice) and writes one straggler
// incident per rank and episode (the episode kept as `straggler:<rank>` in the master hash,
// deleted when it ends). Each standing episode is weighed by the slow policy (slow_policy.h):
// when evicting its node is worth it, TakeEviction hands the master loop the incident and the
// node to stop the job for. The workers' `slowdown` events feed the job-wide view
// (job_slowdown.h): most ranks slowed with no culprit named is one `job-slow` incident.
// Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_SUMMARY_ROUND_H_
#define FT_FTMASTER_SUMMARY_ROUND_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ftmaster/core/goodput.h"
#include "ftmaster/core/hw_evidence.h"
#include "ftmaster/core/job_slowdown.h"
#include "ftmaster/core/slow_policy.h"
#include "ftmaster/core/straggler.h"
#include "ftmaster/core/timeouts.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"

namespace ft::master {

// A straggler whose node the slow policy evicts: the incident (decision stop, the arithmetic in
// its evidence) and the node. The master loop writes it with the stop action.
struct SlowEviction {
  proto::Incident incident;
  std::string node;
  int rank = -1;
};

class SummaryRound {
 public:
  using Clock = LoopContext::Clock;

  explicit SummaryRound(LoopContext* ctx);
  // The hardware signals the window round keeps (hw_evidence.h): attached to straggler and
  // slow-link incidents (a throttling GPU, a NIC's errors say why it is slow). Null: none.
  void SetHardware(const HwLog* hardware) { hardware_ = hardware; }

  // A new term: the models start empty (the first pass gives them every summary); due now.
  void NewTerm(Clock::time_point now);
  // From the master hash: the straggler episodes a previous master wrote.
  void LoadTerm(const MasterHash& state);
  // The published timeouts, which stand until the data moves them. False when Redis failed.
  bool LoadTimeouts();
  // The ranks the straggler detector compares (the membership, when it moved).
  void SetMembership(std::span<const proto::Membership> members);
  // A worker's `slowdown` event, read now (the job-wide view).
  void AddSlowdown(const proto::Event& slowdown, int64_t unix_ms) { job_slow_.Add(slowdown, unix_ms); }
  // The eviction the last pass decided, if any (taken once). The caller acts on it only while
  // the job runs with no other action; SlowEvicted then records it.
  std::optional<SlowEviction> TakeEviction();
  // The eviction was written at `unix_ms`: counted for the hourly budget, its episode done.
  void SlowEvicted(int rank, int64_t unix_ms);
  // The `slow_evictions` field of the master hash with one more eviction at `unix_ms`.
  std::string SlowEvictionsField(int64_t unix_ms) const;
  // The job's last recovery (a stop decided → its relaunch running), measured by the loop.
  void SetMeasuredRecovery(double seconds) { measured_recovery_s_ = seconds; }

  bool Due(Clock::time_point now) const { return now >= next_round_; }
  // `job_stalled`: the master's incident window is open (StragglerDetector::SetStalled).
  void Run(Clock::time_point now, int64_t unix_ms, bool job_stalled);

  uint64_t timeouts_version() const { return timeouts_.table().version; }
  // The running launch's pace as the last complete pass saw it (goodput.h).
  const JobPace& pace() const { return pace_; }

 private:
  void Stragglers(int64_t unix_ms);
  // Weighs each standing episode (slow_policy.h); may leave an eviction for the loop.
  void WeighEpisodes(int64_t unix_ms);
  void JobWide(int64_t unix_ms);
  // Deletes the master-hash fields of slow-link episodes that ended (ours: the detector stopped
  // naming the link; inherited: not named again within the time it takes).
  void EndLinkEpisodes(int64_t unix_ms);
  // The job around a slow rank; `read_evicted`: the eviction set is read (only when an
  // eviction is in reach: one SMEMBERS).
  SlowContext Context(int64_t unix_ms, bool read_evicted);

  LoopContext* ctx_;
  const HwLog* hardware_ = nullptr;
  TimeoutModel timeouts_;
  bool unpublished_ = false;      // a table computed but not yet written
  StragglerDetector stragglers_;
  std::unordered_set<int> named_before_;
  std::unordered_map<int, std::string> straggler_fields_;  // rank -> incident id (episodes)
  std::unordered_map<int, int> inherited_seen_;            // inherited episode -> summaries since
  std::unordered_map<int, int64_t> summary_ms_;
  std::unordered_map<uint64_t, std::string> link_fields_;  // comm -> incident id (slow-link episodes)
  std::unordered_map<uint64_t, int64_t> inherited_links_;  // inherited episode -> this master's first pass
  std::vector<proto::Membership> members_;
  JobSlowdown job_slow_;
  SlowPolicy policy_;
  std::unordered_map<int, int64_t> named_at_;     // rank -> when its episode was named (master clock)
  std::unordered_map<int, std::string> verdicts_;  // rank -> the verdict last logged
  std::unordered_set<int> evicted_episodes_;      // episodes an eviction was written for
  std::vector<int64_t> slow_evictions_;           // slow evictions of the job (master hash)
  std::optional<double> measured_recovery_s_;
  std::optional<SlowEviction> eviction_;
  DecodedHash<proto::RankSummary> summaries_{"summary"};
  std::string cursor_;            // HSCAN cursor of the pass under way ("": none open)
  int group_ = 0;                 // the group (proto/keys.h) that cursor scans
  uint64_t passes_ = 0;           // in this term
  Clock::time_point next_round_{};
  JobPace pace_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_SUMMARY_ROUND_H_
