// ft::master::GoodputRound: the master loop's goodput accounting. Every tick it samples the
// job as the other rounds left it — the job state, the incident window and its fault, the
// action's incident, the membership, the summary round's pace — into the ledger
// (core/goodput.h), and keeps the ledger in the master hash (`goodput`, proto::Goodput) every
// kPersistEvery and whenever the phase changes, so that `ftmaster goodput`, the metrics thread
// and a next master read it. A write that fails (fenced out, Redis away) is tried again at the
// next one; the accounting goes on in memory.
// Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_GOODPUT_ROUND_H_
#define FT_FTMASTER_GOODPUT_ROUND_H_

#include <cstdint>

#include "ftmaster/action_runner.h"
#include "ftmaster/core/goodput.h"
#include "ftmaster/job_membership.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/summary_round.h"
#include "ftmaster/window_round.h"

namespace ft::master {

class GoodputRound {
 public:
  static constexpr int64_t kPersistEveryMs = 2000;

  GoodputRound(LoopContext* ctx, const JobMembership* membership, const WindowRound* window,
               const SummaryRound* summary, const ActionRunner* actions)
      : ctx_(ctx), membership_(membership), window_(window), summary_(summary), actions_(actions) {}

  // A new term: the ledger the last master kept (`goodput` in the master hash), or a new one
  // (a garbled value is reported and the accounting starts again).
  void LoadTerm(const MasterHash& state);
  void Tick(int64_t unix_ms);

  const GoodputLedger& ledger() const { return ledger_; }

 private:
  JobSample Sample(int64_t unix_ms);
  // The membership's part of a sample, walked again only when the membership's version moved:
  // at 131,072 ranks and a 20 ms tick a walk per tick read 6.5 million rows a second.
  JobMembers Members();

  LoopContext* ctx_;
  const JobMembership* membership_;
  const WindowRound* window_;
  const SummaryRound* summary_;
  const ActionRunner* actions_;
  GoodputLedger ledger_;
  int64_t next_persist_ms_ = 0;
  proto::GoodputCause persisted_phase_ = proto::GoodputCause::kStartup;
  JobMembers members_;                       // Members() as of members_version_
  uint64_t members_version_ = UINT64_MAX;    // none yet
};

}  // namespace ft::master

#endif  // FT_FTMASTER_GOODPUT_ROUND_H_
