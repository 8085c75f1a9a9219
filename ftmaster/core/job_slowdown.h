// A slowdown of the whole job, told apart from one slow rank. Every worker raises one
// `slowdown` event per rank and episode when the rank's step (or compute) time leaves its own
// baseline (ftworker/monitor/slowdown_detector.h). One slow rank slows every step of the job
// too — its peers wait for it in the collectives — so "most ranks slowed" alone names nobody:
// it is job-wide only when the straggler detector has had time to name a culprit and named
// none (no straggler, no slow link).
//
// Rule: the ranks that reported a slowdown within `window_ms` (by this master's clock, when
// it read the event) and are still slow (below) are at least `share` of the job's running
// ranks, at least two, on at least min(nodes, 2) nodes, and that has held for `settle_ms` with
// nothing explaining it → one `job-slow` incident (no suspect, decision `none`: the data
// source, the storage or the fabric is slow, and evicting a node would not help). Named once
// per episode; the episode ends when no report is left in the window. Reports a culprit
// explains (a straggler or slow link named while they stand) are its and are dropped: after an
// eviction they say nothing of the relaunch.
// Reset() drops everything (the job left `running`: its ranks' reports end with them).
//
// Still slow: a worker reports a slowdown once, not its end; its summaries say whether it
// stands (RankSummary::slowdown, by the worker's own hysteresis on both the step and the
// compute signal). A summary of a worker older than that field is judged by its step time: at
// least half way from the baseline to the step reported.
// The verdict also stands for a report this master cannot have: one read by the master before
// it (a takeover resumes the events after its cursor), or one aged out of the window while its
// rank is still slow. Not for one a culprit explained: that rank counts again only with a new
// report, or once its worker cleared it and says slow again.
//
// Not thread-safe: one thread owns a JobSlowdown.
#ifndef FT_FTMASTER_JOB_SLOWDOWN_H_
#define FT_FTMASTER_JOB_SLOWDOWN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "proto/messages.h"

namespace ft::master {

struct JobSlowdownOptions {
  double share = 0.75;
  int64_t window_ms = 60000;
  int64_t settle_ms = 20000;  // twice what the straggler detector takes to name a rank (1 s summaries)
};

class JobSlowdown {
 public:
  explicit JobSlowdown(JobSlowdownOptions options = {}) : options_(options) {}

  // What a rank's latest summary says now: its step time (0: none yet), its worker's verdict
  // (RankSummary::slowdown: 1 slow, 0 not, -1 not said) and, for a rank of the running job,
  // its node (empty: not running; its verdict stands for no report).
  struct Now {
    double step_ms = 0;
    int slowdown = -1;
    std::string node;
  };

  // A `slowdown` event, read at `read_unix_ms` (this master's clock).
  void Add(const proto::Event& slowdown, int64_t read_unix_ms);
  // `running_ranks`, `nodes`: the job as its membership stands; `explained`: a straggler or a
  // slow link is named now; `now`: rank -> its latest summary (a rank not in it counts as
  // reported). Returns the incident once per episode.
  std::optional<proto::Incident> Evaluate(int64_t now_unix_ms, int running_ranks, int nodes, bool explained,
                                          const std::map<int, Now>& now = {});
  // A job-wide slowdown stands (named, and its reports not yet aged out).
  bool active() const { return named_; }
  void Reset() { *this = JobSlowdown(options_); }

 private:
  struct Report {
    std::string node;
    int64_t read_unix_ms = 0;
    double step_ms = 0;
    double baseline_ms = 0;
  };

  static bool StillSlow(const Report& report, const std::map<int, Now>& now, int rank);
  // Keeps the reports of ranks their workers say are slow in the window, and stands a verdict
  // for a report this master never read or dropped as aged out.
  void TakeVerdicts(int64_t now_unix_ms, const std::map<int, Now>& now);

  JobSlowdownOptions options_;
  std::map<int, Report> reports_;  // rank -> its latest report (baseline 0: a worker's verdict)
  std::set<int> explained_;        // ranks whose reports a culprit explained, until a new episode
  int64_t reached_unix_ms_ = 0;    // when the share was first reached in this episode; 0: not
  bool named_ = false;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_JOB_SLOWDOWN_H_
