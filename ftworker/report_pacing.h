// What of a calm job Redis does not need to hear (issue "131,072 ranks": a healthy job's writes
// ≤ 200 bytes per rank per second). The daemon asks these pacers, per rank, whether the table
// or summary it just built goes out; neither talks to Redis nor reads a clock of its own.
//
// ProgressPacer — a rank's progress table (what it waits on, how long): the master reads them
// only inside an incident window, and then wants every member's table observed after the
// window's first event. So a table is written
//   - whenever the worker is asked for it: the master's window is open and names the rank (a
//     window notice names the members of its communicators, or no one: every rank; notice.h),
//     or the worker cannot hear notices (its watcher is down: the old rule, every report);
//   - when the rank's state changes (state, process, incarnation, busy, frozen, its comms),
//     and when it turns attentive or calm again: attentive = an op it entered has not
//     completed for attention_ms, or its host has been blocked in a call or silent that long,
//     or it is frozen. The daemon passes half the smallest timeout in use, so what a rank
//     waits on is in Redis once, before any window opens. Not every report: in a job-wide hang
//     every rank is attentive, and 131k tables every 200 ms are more than one Redis takes; the
//     window asks its members for theirs;
//   - and otherwise every refresh_ms (FT_PROGRESS_REFRESH), for `ftmaster status`.
//
// SummaryPacer — a rank's summary (step and op times): the master's timeout model takes the
// largest tails over minutes and the straggler detector compares typical times across a comm
// for seconds on end. Each window's typical times (the step's median, compute, each op's p50
// and p10) are noisy on a loaded host (±15% from one second to the next), so the summary
// carries them smoothed (an exponential average over about three windows, which follows a real
// change within two or three) and is written when
//   - compute or an op's p50 or p10 (what the straggler detector compares) moved by more than
//     change_ratio either way from the last one written, the step's median by twice that;
//   - an op's tail (p99, max) rose by half (the timeouts are FT_TIMEOUT_MULTIPLIER times it);
//   - an op appeared, kernels were sampled, or refresh_ms (FT_SUMMARY_REFRESH) passed.
// The summary written counts every op since the last one written and carries the largest
// tails since then: the timeout model, which sums the counts and takes the largest tails,
// sees the same as if every window had been written.
// An average starts at its first window, and while it settles (kSettleWindows windows) a lower
// window replaces it: a start pays once for what later windows do not (the first collectives
// connect, the first steps allocate and tune), so its first windows are high, never low. Seeded
// from a first window of 26 ms where the op takes 2, and held to halving per window, an op's
// average stayed above its peers' for a dozen windows: a false slow link at every job start.
// The master sees those typical times within change_ratio of the smoothed ones and counts a
// straggler's unchanged summary as standing (ftmaster/core/straggler.h).
//
// Not thread-safe: the daemon's loop owns them.
#ifndef FT_FTWORKER_REPORT_PACING_H_
#define FT_FTWORKER_REPORT_PACING_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "proto/messages.h"

namespace ft::worker {

// Whether the rank waits or is silent long enough to be worth watching (see above).
bool Attentive(const proto::RankProgress& progress, double attention_ms);

class ProgressPacer {
 public:
  explicit ProgressPacer(int64_t refresh_ms) : refresh_ms_(refresh_ms) {}

  // True when `progress` should be written now (and then remembers it as written). asked:
  // the master's open window names the rank, or the worker cannot hear the master.
  bool ShouldWrite(const proto::RankProgress& progress, double attention_ms, bool asked,
                   int64_t unix_ms);
  // Every rank is written at the next report (Redis lost what it had).
  void Forget() { last_.clear(); }

 private:
  struct Written {
    std::string signature;
    int64_t unix_ms = 0;
  };
  int64_t refresh_ms_;
  std::unordered_map<int, Written> last_;  // rank -> the last table written
};

class SummaryPacer {
 public:
  SummaryPacer(int64_t refresh_ms, double change_ratio)
      : refresh_ms_(refresh_ms), change_ratio_(change_ratio) {}

  // Smooths the typical times of `summary` (a window's, in place); true when it should be
  // written now (and then remembers it as written).
  bool Next(proto::RankSummary* summary, int64_t unix_ms);
  // Every rank's next summary is written (Redis lost what it had); the averages stay.
  void Forget() { written_.clear(); }

  static constexpr double kSmoothing = 0.3;  // the newest window's weight
  static constexpr double kMaxStepPerWindow = 2;  // a window counts within avg/2 .. 2 avg
  // An average's first windows: a lower one replaces it (what a start pays once only adds).
  static constexpr int kSettleWindows = 3;
  static constexpr double kTailRise = 0.5;   // an op's p99 or max rose by this much

 private:
  static bool Moved(double written, double now, double ratio);
  static bool Rose(double written, double now, double ratio);
  bool Changed(const proto::RankSummary& written, const proto::RankSummary& now) const;
  void Smooth(proto::RankSummary* summary);

  int64_t refresh_ms_;
  double change_ratio_;
  struct Averages {
    proto::RankSummary typical;  // the averages so far
    int step_windows = 0;        // windows mixed into its step averages
    std::map<std::string, int> op_windows;  // op (OpKey) -> windows mixed into its averages
  };
  std::unordered_map<int, Averages> smoothed_;  // rank -> its averages
  std::unordered_map<int, proto::RankSummary> written_;   // rank -> the last summary written
  struct Pending {
    uint64_t count = 0;
    double p99_ms = 0, max_ms = 0;
  };
  // rank -> op (comm/op/bucket) -> since the last summary written
  std::unordered_map<int, std::map<std::string, Pending>> pending_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_REPORT_PACING_H_
