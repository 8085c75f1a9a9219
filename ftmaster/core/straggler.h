// Straggler attribution without synchronized clocks. In a collective the last rank to arrive
// waits least, so within one communicator the straggler is the member that, at once:
//   - has the smallest collective duration on that comm (the count-weighted mean of the p50_ms
//     of its ops on the comm in its latest summary), and
//   - has the largest compute_ms, and
//   - whose compute_ms is at least (1 + min_excess) times the median compute_ms of the other
//     members (FT_STRAGGLER_PCT, 10% by default: a lasting 10% slowdown of one rank costs a
//     large job a tenth of its GPUs; the others' median, so that a two-member comm works too),
// in `steps` consecutive summaries of that rank (straggler_steps), or, when its summary is not
// rewritten, for `steps` summary intervals by this master's clock: a worker writes a summary
// only when its smoothed times moved (ftworker/report_pacing.h), so one that stands unchanged
// says the rank still runs at those times. A summary older than stale_ms (its worker has not
// refreshed it: gone) takes no part. Healthy jitter cannot pass: the excess must hold against
// the median every time, and the same rank must be both fastest to leave the collective and
// slowest to compute every time.
// A named rank yields one Incident, kind "straggler", decision "none"; it is named again only
// after it stopped qualifying on every comm. Comms with p2p traffic only and comms with fewer
// than two members reporting are skipped.
//
// A slow link: once every member of a collective comm has arrived, what remains is the
// transfer, so the comm's transfer time is its shortest member duration (the last to arrive
// waits for nobody), each member's taken at its ops' p10: an observed duration only grows when
// the host is busy (the poller, or gpusim's device threads, waiting for a CPU), and in a pair
// whose arrival order varies the medians carry waits too (on a loaded host four DP comms'
// shortest medians spread 2.4-10 ms where their p10s spread 0.3-2.6 ms); a slow link slows
// every op, its fastest too. A summary without p10 (an older worker) is taken at its p50. Comms of one role — as many members, the same (op, size bucket) pairs: the
// DP groups of a job, its TP groups — move the same bytes the same way. A comm whose transfer
// is at least (1 + min_excess) times the median of the other comms of its role, and at least
// kLinkFloorMs longer, for `steps` summaries in a row (the compute straggler's streak rule), is
// a slow link: one Incident, kind "slow-link", comm_id set, its members (both ends) the
// suspects, decision "none" — which end's NIC, cable or switch port is at fault the summaries
// cannot tell. A role needs at least three comms reporting (two cannot say which is slow).
// Point-to-point comms (a pipeline's stages, the pair communicators PyTorch makes for send and
// recv) form roles of their own, and their transfer is the fastest (op, size) p10 of any member:
// of a message's two ends one arrives last and waits for nobody, so its op is the transfer; a
// slow link slows every message on the comm, a late stage only the ops that wait for it. On a
// p2p comm of more than two members the slow pair is not found while another pair is fast.
// A compute straggler does not look like one: its comm's shortest duration is its own, the
// transfer, as fast as its role's.
//
// Not thread-safe: one thread owns a StragglerDetector.
#ifndef FT_FTMASTER_STRAGGLER_H_
#define FT_FTMASTER_STRAGGLER_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/config.h"
#include "proto/messages.h"

namespace ft::master {

struct StragglerOptions {
  int steps = 10;
  double min_excess = 0.10;
  int64_t interval_ms = 1000;  // a standing summary counts once per interval
  int64_t stale_ms = 25000;    // by the summary's unix_ms against Evaluate's now

  // straggler_steps, straggler_pct; summary_interval; twice summary_refresh and 5 s (clocks
  // of other hosts).
  static StragglerOptions FromConfig(const Config& config);
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options);

  // Who is in which communicator; replaces the previous membership.
  void SetMembership(std::span<const proto::Membership> membership);
  // One rank's summary; one not newer than the rank's last is ignored, so the caller may pass
  // the whole summary hash every round.
  void Add(const proto::RankSummary& summary);
  // While the job is stalled (the master's incident window is open: ranks wait on a late or
  // stuck peer), a summary that stands unchanged no longer says its rank runs at its times:
  // only new summaries of more steps count toward a streak then, and no streak is lost (a 20 s
  // host pause counted its first second's times once a second into a slow link; the workers'
  // refreshes of the standing summaries, a new time and the same steps, once each).
  void SetStalled(bool stalled) { stalled_ = stalled; }
  // Compares the latest summaries; returns the stragglers named for the first time now.
  std::vector<proto::Incident> Evaluate(int64_t now_unix_ms);
  // The ranks named and still qualifying after the last Evaluate: a rank's episode lasts
  // while it is in here (the master keeps episodes in Redis across master restarts).
  const std::unordered_set<int>& named() const { return named_; }
  // The comms named slow links and still qualifying after the last Evaluate.
  const std::unordered_set<uint64_t>& named_links() const { return named_links_; }

  // A slow link must add at least this much to every collective on it: below, the transfer
  // times are too small to compare across comms.
  static constexpr double kLinkFloorMs = 2;

 private:
  // How many evaluations in a row a candidate has stood, each summary counted once (Count).
  struct Tally {
    int count = 0;
    int64_t last_counted_ms = 0;      // the summary time last counted
    uint64_t last_counted_steps = 0;  // and its steps
    int64_t counted_at_ms = 0;        // Evaluate's now when it was last counted
  };
  struct Streak {
    int rank = -1;
    Tally tally;
    double ratio = 0;
    double own_ms = 0;
    double others_ms = 0;
    double compute_ms = 0;
    double median_compute_ms = 0;
  };

  // Counts the candidate's summary (time `at`, `steps` steps) into `tally`: the first always; then
  // a summary newer than the one last counted, or, in a running job, the standing one for another
  // interval. While stalled a newer summary counts only with more steps: a worker rewrites its
  // rank's summary now and then with nothing new (summary_refresh), and a paused job's stands for
  // the times it had when the pause began.
  void Count(Tally* tally, int64_t at, uint64_t steps, int64_t now_unix_ms) const;

  StragglerOptions options_;
  bool stalled_ = false;
  std::unordered_map<uint64_t, std::vector<int>> comms_;  // collective comm -> global ranks
  std::unordered_map<uint64_t, std::vector<int>> p2p_comms_;  // comms with send/recv only
  std::unordered_map<int, proto::RankSummary> latest_;
  std::unordered_map<uint64_t, Streak> streaks_;
  std::unordered_set<int> named_;

  // The slow-link pass of Evaluate: its incidents appended to `out`.
  void EvaluateLinks(int64_t now_unix_ms, std::vector<proto::Incident>* out);
  std::unordered_map<uint64_t, Tally> link_streaks_;  // of its members' newest summary, most steps
  std::unordered_set<uint64_t> named_links_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_STRAGGLER_H_
