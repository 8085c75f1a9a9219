// What a lasting slowdown of one rank is worth: keep the slow part, or stop the job (every rank
// saves as it terminates), evict the slow node and relaunch on a spare. Pure: the caller passes
// the named straggler, the job's own figures and the clock.
//
// The arithmetic, carried by the incident as it is:
//   excess   the slow rank's compute minus its peers' median: what every step of the job waits
//            for it (collectives hold the others at the slow rank's pace);
//   keep     horizon × excess: the time the job loses if the rank stays. The horizon is the
//            steps the job has left when it says how many it runs in all (ft_set_total_steps
//            or FT_TOTAL_STEPS) and marks its steps (ft_step_done): its total minus its last
//            step done, as the ranks' summaries carry them (MeasureSlow); else FT_SLOW_HORIZON.
//            A job near its end thus keeps its slow rank: the steps left cost less than a
//            recovery;
//   replace  the job's own last recovery (a stop decided → its relaunch running, measured by
//            the master) or FT_SLOW_RECOVERY_COST until it has one, plus one step redone (a
//            termination save keeps the step the ranks were finishing).
// Evict only when all of these hold, else report (each refusal says which):
//   - FT_SLOW_ACTION is `evict` (default `report`: a person decides);
//   - keep > replace;
//   - confirmed: the rank was named at least FT_SLOW_CONFIRM ago and still qualifies (the
//     caller ends an episode the moment the rank stops qualifying: a slowdown that passes is
//     never evicted — hysteresis);
//   - fewer than FT_SLOW_EVICTIONS_PER_HOUR slow evictions in the last hour (a fleet-wide
//     cause, a bad rack, must not churn the job through every spare);
//   - the job keeps at least FT_SLOW_MIN_NODES nodes not evicted besides the slow one;
//   - the job is not slowed as a whole (job-slow): then nobody is the culprit.
#ifndef FT_FTMASTER_SLOW_POLICY_H_
#define FT_FTMASTER_SLOW_POLICY_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/config.h"
#include "proto/messages.h"

namespace ft::master {

enum class SlowAction : uint8_t { kReport, kEvict };

struct SlowPolicy {
  SlowAction action = SlowAction::kReport;
  int64_t horizon_steps = 10000;
  double recovery_estimate_s = 120;
  int64_t confirm_ms = 30000;
  int64_t evictions_per_hour = 1;
  int64_t min_nodes = 1;

  static SlowPolicy FromConfig(const Config& config);
};

// A named straggler as the detector measured it.
struct SlowCase {
  int rank = -1;
  std::string node;
  double compute_ms = 0;          // the slow rank's
  double median_compute_ms = 0;   // its peers'
  double step_ms = 0;             // the job's step time now (the slow pace)
  int64_t named_unix_ms = 0;      // when the episode began
  // Where the extra time goes, from sampled kernel times (FT_KERNEL_SAMPLE): "gpu" (its kernels
  // run slower than its peers' same kernels), "host" (they do not: the time is between them —
  // CPU contention, the input pipeline), "" (no samples to tell); and the sentence that says so.
  std::string where;
  std::string where_why;
  // What the job says of its steps, from the summary with the fewest steps left: the step of
  // its last ft_step_done and the steps it runs in all (0: not said: FT_SLOW_HORIZON then).
  int64_t job_step = -1;
  int64_t job_total_steps = 0;
};

// The job around it.
struct SlowContext {
  int64_t now_unix_ms = 0;
  std::optional<double> measured_recovery_s;  // the job's own last recovery
  std::span<const int64_t> recent_evictions_unix_ms;  // slow evictions, any age
  int job_nodes = 0;               // distinct nodes of the running ranks
  int evicted_job_nodes = 0;       // of those, already in the eviction set
  bool job_slow = false;           // a job-wide slowdown stands
};

struct SlowVerdict {
  bool evict = false;
  bool confirmed = false;  // named long enough ago: what is decided now is final for the episode
  double excess_ms = 0;
  int64_t horizon_steps = 0;
  bool job_horizon = false;  // the horizon is the job's steps left, not FT_SLOW_HORIZON
  double keep_s = 0;
  double replace_s = 0;
  // "excess 25.0 ms/step (...) x horizon 850 steps (the job's: 150 of 1000 done) = keep 21.2 s;
  // replace = ...", or "x horizon 10000 steps (FT_SLOW_HORIZON)" when the job does not say.
  std::string arithmetic;
  std::string why;         // the verdict in words: "evict node1: ..." or "report: ..."
};

// The named rank's figures from the summaries as they stand: its compute against the median of
// its peers' (the ranks sharing a collective communicator with it, as the straggler detector
// compares), the job's step time (the
// median of every rank's step_p50), and where its extra time goes: the p50s of its sampled
// kernels added up against the medians of its peers' p50s of the same kernels — a kernel time
// ratio of at least half the compute's excess is its GPU, less is its host — and the job's
// steps left where its summaries say (job_step, job_total_steps).
// nullopt when the rank has no summary or no peer has one.
std::optional<SlowCase> MeasureSlow(int rank, std::span<const proto::RankSummary> summaries,
                                    std::span<const proto::Membership> membership);

SlowVerdict DecideSlow(const SlowCase& slow, const SlowContext& context, const SlowPolicy& policy);

// "report" | "evict"; nullopt for anything else.
std::optional<SlowAction> ParseSlowAction(std::string_view text);

}  // namespace ft::master

#endif  // FT_FTMASTER_SLOW_POLICY_H_
