// ft::master::SummaryRound: the master loop's timeouts and stragglers. It reads the summary
// hashes in HSCAN chunks (131k summaries are ~150 MB: one HGETALL would hold the loop, and the
// lease, for seconds), each chunk spaced so that a pass takes about 1/kSteadyShare of the
// master's time, feeding the timeout model (timeouts.h) and the straggler detector
// (straggler.h) as they come. At the end of a pass it publishes a changed timeout table
// (ft:{J}:timeouts, then ft:{J}:timeouts:version, and a notice) and writes one straggler
// incident per rank and episode (the episode kept as `straggler:<rank>` in the master hash,
// deleted when it ends). Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_SUMMARY_ROUND_H_
#define FT_FTMASTER_SUMMARY_ROUND_H_

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ftmaster/core/straggler.h"
#include "ftmaster/core/timeouts.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"

namespace ft::master {

class SummaryRound {
 public:
  using Clock = LoopContext::Clock;

  explicit SummaryRound(LoopContext* ctx);

  // A new term: the models start empty (the first pass gives them every summary); due now.
  void NewTerm(Clock::time_point now);
  // From the master hash: the straggler episodes a previous master wrote.
  void LoadTerm(const MasterHash& state);
  // The published timeouts, which stand until the data moves them. False when Redis failed.
  bool LoadTimeouts();
  // The ranks the straggler detector compares (the membership, when it moved).
  void SetMembership(std::span<const proto::Membership> members) { stragglers_.SetMembership(members); }

  bool Due(Clock::time_point now) const { return now >= next_round_; }
  void Run(Clock::time_point now, int64_t unix_ms);

  uint64_t timeouts_version() const { return timeouts_.table().version; }

 private:
  void Stragglers(int64_t unix_ms);

  LoopContext* ctx_;
  TimeoutModel timeouts_;
  bool unpublished_ = false;      // a table computed but not yet written
  StragglerDetector stragglers_;
  std::unordered_set<int> named_before_;
  std::unordered_map<int, std::string> straggler_fields_;  // rank -> incident id (episodes)
  std::unordered_map<int, int> inherited_seen_;            // inherited episode -> summaries since
  std::unordered_map<int, int64_t> summary_ms_;
  DecodedHash<proto::RankSummary> summaries_{"summary"};
  std::string cursor_;            // HSCAN cursor of the pass under way ("": none open)
  int group_ = 0;                 // the group (proto/keys.h) that cursor scans
  uint64_t passes_ = 0;           // in this term
  Clock::time_point next_round_{};
};

}  // namespace ft::master

#endif  // FT_FTMASTER_SUMMARY_ROUND_H_
