// ft::master::GoodputLedger: where a job's GPU time goes — productive training, or lost to a
// named cause (proto::GoodputCause: start-up and restore, detection, save and stop, relaunch,
// steps redone after a restore, slowed steps, no rank up) — and ETTR, productive time over the
// time the job held its GPUs, as Meta's ETTR model defines it.
//
// The master samples the job at every tick (JobSample: its state, its window, its ranks, its
// pace from the last summary pass) and the ledger gives the time since the previous sample to
// one phase, weighted by the ranks the job holds (rank-seconds; wall seconds beside them):
//   stopping → save-stop; stopped → relaunch; an incident window open → detection; no rank up
//   → idle; ranks up but no step done since they started → startup; the steps a restore took
//   the job back over (from the step restored to the furthest it had reached, at its normal
//   step time) → redone; else productive, of which the share beyond the job's normal step time
//   is slowed while steps take more than kSlowedAbove times it.
// The furthest step comes from the ranks' last ft_step_done as they end and from the pace, the
// restored step from what the ranks say they restored: both exact when they matter, where the
// pace may be seconds behind. Without a restored step (ranks that do not say) the pace's step
// against the furthest decides what is redone.
// A fault is seen only when its window opens, seconds after it happened; the time from the
// fault (the window's first event, less the age a timeout event reports) to the opening is
// moved to detection from what it was given, as far back as the ledger remembers its phases
// (kRecentMs, this master's own samples: a master that takes over mid-incident does not move
// time it did not account).
// Each incident keeps what it cost, from its fault until the job trains past the step it had
// reached again (the newest proto::Goodput::kMaxIncidents kept). The whole state is a
// proto::Goodput, which the master keeps in its hash so that the next master continues it.
//
// Pure: no clock, no Redis. Not thread-safe: one thread owns a ledger.
#ifndef FT_FTMASTER_CORE_GOODPUT_H_
#define FT_FTMASTER_CORE_GOODPUT_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>

#include "proto/master_codec.h"
#include "proto/messages.h"

namespace ft::master {

// The job's pace, from the last summary pass over the ranks of the launch now running.
struct JobPace {
  int64_t unix_ms = 0;       // the pass (0: none yet)
  uint64_t incarnation = 0;  // the launch those ranks belong to
  int ranks = 0;             // running ranks whose summary is of their own process
  int64_t step = -1;         // the fewest steps of theirs declared done (ft_step_done); -1 unknown
  uint64_t steps = 0;        // the fewest steps any of them was seen doing (inferred or declared)
  double step_ms = 0;        // the median of their typical step times (0: not known)
  int64_t summary_unix_ms = 0;  // the oldest of those summaries: what they say is as of then
};

// The pace of the launch now running: its running ranks (the newest incarnation among them)
// whose summary was written by their own process (not before it registered), from `summaries`.
JobPace PaceOf(std::span<const proto::Membership> members, std::span<const proto::RankSummary> summaries,
               int64_t unix_ms);

// What the job's membership says at one tick (the part of a sample that changes only with it).
struct JobMembers {
  int ranks_held = 0;        // the job's ranks (world size); 0 before any registered
  int ranks_running = 0;     // of those, processes running now
  uint64_t incarnation = 0;         // the newest process among the running ranks (its start)
  uint64_t oldest_incarnation = 0;  // the oldest
  // Exact where the pace lags (a calm rank's summary is written every FT_SUMMARY_REFRESH):
  int64_t ended_step = -1;     // the furthest last step (ft_step_done) of the ranks that ended
  int64_t restored_step = -2;  // what the running launch restored (-1 nothing, -2 not known yet)
};

// The job at one tick of the master.
struct JobSample : JobMembers {
  int64_t unix_ms = 0;
  std::optional<proto::JobState> state;
  bool window_open = false;
  int64_t fault_unix_ms = 0; // window open: when the fault began, as its events tell
  std::string incident;      // the incident being acted on ("" none or not decided yet)
  JobPace pace;
};

class GoodputLedger {
 public:
  // Steps this much slower than the normal step time count their excess as slowed.
  static constexpr double kSlowedAbove = 1.25;
  // How far back a fault can move time to detection.
  static constexpr int64_t kRecentMs = 15 * 60 * 1000;

  GoodputLedger() = default;
  // Continues the accounting another master kept (its recent phases are not known here). The
  // time since it last wrote goes to the phase it wrote: what the job was doing as far as
  // anyone watched.
  explicit GoodputLedger(proto::Goodput state) : g_(std::move(state)), continued_(g_.since_unix_ms > 0) {}

  void Observe(const JobSample& sample);

  const proto::Goodput& state() const { return g_; }
  // Productive over everything accounted (1 before anything was).
  double Ettr() const;
  // The sum of `s` over every cause.
  static double TotalOf(const proto::GoodputSeconds& s);

 private:
  struct Segment {
    int64_t from_ms, to_ms;
    double ranks;
    proto::GoodputCause cause;
    double slowed_share;  // of a productive segment: the part given to slowed
  };

  proto::GoodputCause PhaseOf(const JobSample& s) const;
  void Add(proto::GoodputCause cause, double wall_s, double ranks);
  // Moves `wall_s` of time given to `from` to `to` (the open incident's share with it).
  void Reassign(proto::GoodputCause from, proto::GoodputCause to, double wall_s, double ranks);
  void Account(int64_t from_ms, int64_t to_ms, double ranks, proto::GoodputCause cause, double slowed_share);
  // The fault at `fault_ms`: time given since then to anything but the incident's own phases
  // moves to detection.
  void MoveToDetection(int64_t fault_ms);
  void OpenIncident(int64_t fault_ms);
  proto::GoodputIncident* Open();

  proto::Goodput g_;
  std::deque<Segment> recent_;
  bool window_seen_ = false;  // the open window's fault was taken
  bool continued_ = false;    // the next sample closes the gap since the last master's
  double redone_before_launch_s_ = 0;   // wall_s[redone] when the launch began
  double startup_before_launch_s_ = 0;  // wall_s[startup] when the launch began
};

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_GOODPUT_H_
