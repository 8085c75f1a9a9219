// CkptRound's view of the launches its plan follows (ckpt_round.h): ranks that ended or were
// relaunched, the job's finish, how long their copies may still be on their way (the plan
// settles meanwhile), the rewinds they come to (ckpt_lineage.h), and a launch whose ranks
// restored different steps (an incident). The rest of the round — steps, verdicts, sdc
// incidents, the plan — is ckpt_round.cc.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "common/log.h"
#include "ftmaster/ckpt_round.h"
#include "ftmaster/core/ckpt_lineage.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "schema/rank_hashes.h"

namespace ft::master {

void CkptRound::NoteFinished(int64_t last_exit_unix_ms, int64_t end_step) {
  if (end_step < 0) {
    FT_LOG(Info, Master, "checkpoints: the job finished at a step its ranks did not report (libft.so or ftworker "
           "from before it): its copies stay restorable as they are");
    return;
  }
  if (steps_.empty()) return;  // no copy of this job at all: nothing it could restore
  finished_at_ms_ = std::max(finished_at_ms_, last_exit_unix_ms);
  finished_step_ = end_step;
  finished_seen_ = now_;  // the last round's time: at most a ckpt_period behind
  plan_dirty_ = true;  // settling while it is decided
}

bool CkptRound::EndStepSaved() const {
  auto it = steps_.find(finished_step_);
  return it != steps_.end() && !it->second->of_step.empty();
}

bool CkptRound::StoreRewind(proto::CkptRewind rewind) {
  proto::CkptRewinds next = rewinds_;
  const std::string why = rewind.why;
  if (!AddRewind(&next.rewinds, std::move(rewind))) return true;
  if (!ctx_->writer.Run({schema::SetRewinds(ctx_->keys, next)})) return false;
  rewinds_ = std::move(next);
  for (auto& [step, s] : steps_) s->fields = -1;  // judged again: some copies may be of a left run
  plan_dirty_ = true;
  FT_LOG(Info, Master, "checkpoints: {}; copies of later steps saved before it are of the run the job left "
         "and are not planned again", why);
  return true;
}

void CkptRound::RecordRewinds(int64_t unix_ms) {
  if (mismatch_rewind_) {
    bool any_runs = false;
    for (const auto& [rank, m] : NewestMembers()) {
      const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
      any_runs |= state == proto::RankState::kRunning || state == proto::RankState::kDisabled;
    }
    const std::string why = fmt::format("the ranks of a launch restored different steps (most of them {}) and "
                                        "trained on a mixed state", *mismatch_rewind_);
    if (!any_runs && StoreRewind(proto::CkptRewind{*mismatch_rewind_, unix_ms, why})) mismatch_rewind_.reset();
  }
  if (finished_at_ms_ > 0) {
    if (EndStepSaved()) {
      FT_LOG(Info, Master, "checkpoints: the job finished at step {}, which it saved: a launch after it "
             "continues from its newest restorable step", finished_step_);
      finished_at_ms_ = 0;
      plan_dirty_ = true;
    } else if (now_ >= finished_seen_ + SettleWindow()) {
      const std::string why =
          fmt::format("the job finished at step {}, past its last checkpoint (every rank exited cleanly): a "
                      "launch after it starts from scratch", finished_step_);
      if (StoreRewind(proto::CkptRewind{-1, finished_at_ms_ + 1, why})) finished_at_ms_ = 0;
    }
  }
  // The step a relaunch restores is the final plan's (a relaunched rank's ft_restore waits while
  // it settles). Not while the plan is about to change: a rewind just stored re-judges the steps.
  // And not while copies of the ranks that ended may still come (the plan may still move to them,
  // and the relaunched ranks' workers hold their plan files that long).
  if (relaunched_from_ms_ > 0 && finished_at_ms_ == 0 && !Moving(now_) && !plan_dirty_ && plan_.settling.empty()) {
    const std::string why = plan_.step >= 0 ? fmt::format("a relaunch restored step {}", plan_.step)
                                            : std::string("a relaunch started from scratch (no restorable step)");
    if (StoreRewind(proto::CkptRewind{plan_.step, relaunched_from_ms_, why})) relaunched_from_ms_ = 0;
  }
}

std::map<int, const proto::Membership*> CkptRound::NewestMembers() const {
  std::map<int, const proto::Membership*> newest;
  for (const proto::Membership& m : membership_->values()) {
    auto [at, inserted] = newest.emplace(m.rank, &m);
    if (!inserted && m.incarnation > at->second->incarnation) at->second = &m;
  }
  return newest;
}

int64_t CkptRound::NewestEndMs(const std::map<int, const proto::Membership*>& newest) const {
  // A relaunched rank's membership no longer shows the end it followed: the ends read from the
  // events (and echoed by an earlier master) count too.
  int64_t newest_end_ms = 0;
  for (const auto& [node, unix_ms] : ends_seen_) newest_end_ms = std::max(newest_end_ms, unix_ms);
  for (const auto& [node, unix_ms] : ctx_->rank_ends) newest_end_ms = std::max(newest_end_ms, unix_ms);
  for (const auto& [rank, m] : newest) {
    const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
    if (state == proto::RankState::kDead || state == proto::RankState::kStopped) {
      newest_end_ms = std::max(newest_end_ms, m->unix_ms);
    }
  }
  return newest_end_ms;
}

std::string CkptRound::LaunchRestoringFrom(int64_t version) const {
  const std::map<int, const proto::Membership*> newest = NewestMembers();
  const int64_t newest_end_ms = NewestEndMs(newest);
  int from_it = 0, waiting = 0;
  for (const auto& [rank, m] : newest) {
    const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
    const bool runs = state == proto::RankState::kRunning || state == proto::RankState::kDisabled;
    if (!runs || static_cast<int64_t>(m->incarnation / 1000000) < newest_end_ms) continue;
    if (m->restored_step >= -1) {
      from_it += m->restore_plan == version ? 1 : 0;
    } else {
      ++waiting;
    }
  }
  if (from_it == 0 || waiting == 0) return "";
  return fmt::format("{} rank{} restored from it, {} not yet", from_it, from_it == 1 ? "" : "s", waiting);
}

void CkptRound::NoteEnds() {
  ends_version_ = ctx_->rank_ends_version;
  for (const auto& [node, unix_ms] : ctx_->rank_ends) {
    int64_t& at = ends_seen_[node];
    if (unix_ms > at) {
      at = unix_ms;
      plan_dirty_ = true;  // the echo is part of the plan: its workers wait for it
      // A move as a relaunch is: the ended ranks' copies may be waiting for their replicas. Seen
      // here too by a master that took over after the end (its membership view starts there).
      moved_at_ = now_;
      moved_ = true;
    }
  }
}

std::string CkptRound::SettlingWhy(Clock::time_point now, int64_t planned_step) {
  // Not "an incident's decision under way": its save commands wait for a relaunched rank's
  // ft_restore, which would wait for the decision. Its copies are covered below (the ranks that
  // ended, the step they saved waiting for its replicas).
  std::vector<std::string> why;
  const std::map<int, const proto::Membership*> newest = NewestMembers();
  for (const auto& [rank, m] : newest) {
    const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
    const bool is_gone = state == proto::RankState::kDead || state == proto::RankState::kStopped;
    auto [seen, first] = seen_.try_emplace(rank, Seen{m->incarnation, is_gone});
    // A relaunch (a newer incarnation) or a rank newly gone: its node's copies may be on their way.
    if (!first && (m->incarnation > seen->second.incarnation || (is_gone && !seen->second.gone))) {
      moved_at_ = now;
      moved_ = true;
    }
    if (!first && m->incarnation > seen->second.incarnation) {
      const int64_t started_ms = static_cast<int64_t>(m->incarnation / 1000000);
      // The latest start: the ranks of one launch come up together (none trains past the
      // restored step before all are up), and of two launches before a rewind the later counts.
      relaunched_from_ms_ = std::max(relaunched_from_ms_, started_ms);
    }
    seen->second = Seen{m->incarnation, is_gone};
  }
  // Not "ranks ended lately" by itself: a plan already final would be withdrawn and republished
  // (ranks on one node restoring while another node's wait, a hang to the master). The node's
  // worker holds its plan file for a moment after its ranks end (RestorePlanSync::NoteRankEnded).
  // A newer step waiting for its replicas matters to a relaunch: after ranks ended or were
  // relaunched (its copies are theirs), not in a healthy job saving periodically (whose plan
  // would flap between settling and final at every save).
  if (finished_at_ms_ > 0) {
    why.push_back(fmt::format("the job finished at step {}: whether it saved that step is settled within {} ms",
                              finished_step_, SettleWindow().count()));
  }
  // A teardown under way: a rank ended without a clean finish while ranks that started before
  // that end still run. They are being stopped (a crash's stop, a launcher's SIGTERM) and save on
  // their way out: a plan final now may name an older step than their last copies (a campaign
  // seed: the killed rank's relaunch restored step 14 while its peers' termination saves of 19
  // were still coming). Start and end times are the ranks' nodes' clocks, ordered across a
  // teardown by far more than NTP keeps nodes apart (ckpt_lineage.h). A lost node's ranks are
  // not among them: they "run" in the membership for good, as no worker reports their ends, and
  // no copy of theirs will come (a plan settling until a relaunch, seed 1113).
  const int64_t newest_end_ms = NewestEndMs(newest);
  std::vector<int> ending;
  for (const auto& [rank, m] : newest) {
    const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
    const bool runs = state == proto::RankState::kRunning || state == proto::RankState::kDisabled;
    if (runs && static_cast<int64_t>(m->incarnation / 1000000) < newest_end_ms && !gone_.gone().contains(m->node)) {
      ending.push_back(rank);
    }
  }
  if (!ending.empty()) {
    why.push_back(fmt::format("{} rank{} of the run a rank left still run{} (being stopped: their last copies may "
                              "still come)", ending.size(), ending.size() == 1 ? "" : "s",
                              ending.size() <= 8 ? fmt::format(" ({})", fmt::join(ending, ", ")) : std::string()));
  }
  const bool after_move = Moving(now);
  for (const auto& [step, s] : steps_) {
    if (after_move && step > planned_step && !s->judged && !s->settled) {
      why.push_back(fmt::format("step {} waits for its replicas' copies (judged once all are in or within {} ms)",
                                step, ctx_->options.copy_wait.count()));
      break;
    }
  }
  return fmt::format("{}", fmt::join(why, "; "));
}

std::optional<proto::Incident> CkptRound::TakeRestoreMismatch(int64_t unix_ms) {
  // Looked at when the membership or the ends moved, not every tick (131k ranks).
  const std::pair<uint64_t, uint64_t> looked{membership_->version(), ctx_->rank_ends_version};
  if (looked == mismatch_looked_at_) return std::nullopt;
  mismatch_looked_at_ = looked;
  const std::map<int, const proto::Membership*> newest = NewestMembers();
  const int64_t newest_end_ms = NewestEndMs(newest);
  std::map<int64_t, std::vector<const proto::Membership*>> by_step;
  uint64_t launch = 0;  // the launch's first start
  for (const auto& [rank, m] : newest) {
    const std::optional<proto::RankState> state = proto::ParseRankState(m->state);
    const bool runs = state == proto::RankState::kRunning || state == proto::RankState::kDisabled;
    if (!runs || static_cast<int64_t>(m->incarnation / 1000000) < newest_end_ms || m->restored_step < -1) continue;
    by_step[m->restored_step].push_back(m);
    launch = launch == 0 ? m->incarnation : std::min(launch, m->incarnation);
  }
  if (by_step.size() < 2 || launch == mismatch_launch_) return std::nullopt;
  mismatch_launch_ = launch;
  // The step most ranks restored is taken as the launch's; the others are its suspects. What the
  // launch saved past it is of a mixed state: superseded by a rewind to it once the launch is gone.
  auto most = std::max_element(by_step.begin(), by_step.end(),
                               [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  mismatch_rewind_ = most->first;
  auto name = [](int64_t step) { return step < 0 ? std::string("nothing") : fmt::format("step {}", step); };
  proto::Incident i;
  i.id = fmt::format("restore-mismatch-{}", launch / 1000000);
  i.kind = proto::IncidentKindName(proto::IncidentKind::kRestoreMismatch);
  for (const auto& [step, members] : by_step) {
    std::vector<std::string> ranks;
    std::set<int64_t> plans;
    for (const proto::Membership* m : members) {
      if (ranks.size() < 16) ranks.push_back(std::to_string(m->rank));
      plans.insert(m->restore_plan);
      if (step != most->first && i.suspects.size() < 16) {
        i.suspects.push_back(proto::Suspect{m->rank, m->node, fmt::format("restored {} where {} ranks restored {}",
                                                                          name(step), most->second.size(),
                                                                          name(most->first))});
      }
    }
    i.evidence.push_back(fmt::format("{} rank{} restored {} (plan version{} {}): {}{}", members.size(),
                                     members.size() == 1 ? "" : "s", name(step), plans.size() == 1 ? "" : "s",
                                     fmt::join(plans, ", "), fmt::join(ranks, ", "),
                                     members.size() > ranks.size() ? ", ..." : ""));
  }
  i.confidence = 1.0;
  DecidedNow(&i, unix_ms, proto::DecisionKind::kStop);
  i.message = fmt::format(
      "the ranks of the launch that started at {} ms restored {} different steps ({}): stopping the job before "
      "it trains on a mixed state; what it saved past {} is not planned again, and a relaunch restores one step on "
      "every rank",
      launch / 1000000, by_step.size(), fmt::join(i.evidence, "; "), name(most->first));
  FT_LOG(Error, Master, "{}", i.message);
  return i;
}

}  // namespace ft::master
