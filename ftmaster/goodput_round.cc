#include "ftmaster/goodput_round.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "ftmaster/core/incident_window.h"
#include "proto/master_codec.h"
#include "schema/master_hash.h"

namespace ft::master {

void GoodputRound::LoadTerm(const MasterHash& state) {
  ledger_ = GoodputLedger();
  members_version_ = UINT64_MAX;
  next_persist_ms_ = 0;
  auto it = state.find(schema::master_hash::kGoodput);
  if (it == state.end()) return;
  proto::Goodput kept;
  Status s = proto::Decode(it->second, &kept);
  if (!s.ok()) {
    ctx_->bad.Report(ctx_->keys.MasterState() + " " + schema::master_hash::kGoodput, it->second.substr(0, 64), s);
    return;
  }
  ledger_ = GoodputLedger(std::move(kept));
  persisted_phase_ = ledger_.state().phase;
}

JobMembers GoodputRound::Members() {
  const uint64_t version = membership_->version();
  if (members_version_ == version && members_.ranks_held > 0) return members_;
  JobMembers m;
  bool all_restored = true;
  int64_t restored = INT64_MAX;
  for (const proto::Membership& r : membership_->values()) {
    m.ranks_held = std::max(m.ranks_held, r.world_size);
    if (!proto::Is(r.state, proto::RankState::kRunning)) {
      m.ended_step = std::max(m.ended_step, r.step);
      continue;
    }
    ++m.ranks_running;
    m.incarnation = std::max(m.incarnation, r.incarnation);
    m.oldest_incarnation = m.oldest_incarnation == 0 ? r.incarnation : std::min(m.oldest_incarnation, r.incarnation);
    if (r.restored_step < -1) all_restored = false;
    restored = std::min(restored, r.restored_step);
  }
  if (m.ranks_running > 0 && all_restored) m.restored_step = restored;
  m.ranks_held = std::max(m.ranks_held, static_cast<int>(membership_->values().size()));
  members_ = m;
  members_version_ = version;
  return m;
}

JobSample GoodputRound::Sample(int64_t unix_ms) {
  JobSample s;
  s.unix_ms = unix_ms;
  s.state = ctx_->job_state;
  static_cast<JobMembers&>(s) = Members();
  s.window_open = window_->open();
  if (s.window_open) {
    // The fault: the earliest of the window's events, a timeout's less the age of its op (the
    // op was stuck that long before its timer fired).
    const IncidentWindow& w = window_->window();
    s.fault_unix_ms = w.first_unix_ms;
    for (const proto::Event& e : w.events) {
      if (!OpensWindow(e)) continue;
      const int64_t at = e.unix_ms - (proto::Is(e, proto::EventKind::kTimeout) ? static_cast<int64_t>(e.age_ms) : 0);
      if (at > 0 && (s.fault_unix_ms <= 0 || at < s.fault_unix_ms)) s.fault_unix_ms = at;
    }
  }
  if (const std::optional<Action>& action = actions_->action()) s.incident = action->incident;
  s.pace = summary_->pace();
  return s;
}

void GoodputRound::Tick(int64_t unix_ms) {
  ledger_.Observe(Sample(unix_ms));
  const proto::Goodput& g = ledger_.state();
  if (g.since_unix_ms == 0) return;  // nothing accounted yet
  if (unix_ms < next_persist_ms_ && g.phase == persisted_phase_) return;
  next_persist_ms_ = unix_ms + kPersistEveryMs;
  if (ctx_->writer.Run({schema::master_hash::Set(ctx_->keys, {{schema::master_hash::kGoodput, proto::Encode(g)}})})) persisted_phase_ = g.phase;
}

}  // namespace ft::master
