#include "ftmaster/core/goodput.h"

#include <algorithm>

namespace ft::master {

using proto::GoodputCause;

namespace {

size_t Index(GoodputCause c) { return static_cast<size_t>(c); }

// The phases that belong to an incident's handling: time already in them is not moved again.
bool IncidentOwn(GoodputCause c) {
  return c == GoodputCause::kDetection || c == GoodputCause::kSaveStop || c == GoodputCause::kRelaunch;
}

}  // namespace

double GoodputLedger::TotalOf(const proto::GoodputSeconds& s) {
  double total = 0;
  for (double v : s) total += v;
  return total;
}

double GoodputLedger::Ettr() const {
  const double total = TotalOf(g_.rank_s);
  return total > 0 ? g_.rank_s[Index(GoodputCause::kProductive)] / total : 1.0;
}

proto::GoodputIncident* GoodputLedger::Open() {
  if (g_.incidents.empty() || !g_.incidents.back().open) return nullptr;
  return &g_.incidents.back();
}

void GoodputLedger::Add(GoodputCause cause, double wall_s, double ranks) {
  g_.wall_s[Index(cause)] += wall_s;
  g_.rank_s[Index(cause)] += wall_s * ranks;
  if (cause == GoodputCause::kProductive || cause == GoodputCause::kSlowed) return;
  if (proto::GoodputIncident* open = Open()) open->rank_s[Index(cause)] += wall_s * ranks;
}

void GoodputLedger::Account(int64_t from_ms, int64_t to_ms, double ranks, GoodputCause cause, double slowed_share) {
  const double wall_s = static_cast<double>(to_ms - from_ms) / 1000.0;
  if (cause == GoodputCause::kProductive && slowed_share > 0) {
    Add(GoodputCause::kProductive, wall_s * (1 - slowed_share), ranks);
    Add(GoodputCause::kSlowed, wall_s * slowed_share, ranks);
  } else {
    Add(cause, wall_s, ranks);
  }
  // The recent phases, one segment per run of the same phase and weight.
  const bool extends = !recent_.empty() && recent_.back().cause == cause && recent_.back().ranks == ranks &&
                       recent_.back().slowed_share == slowed_share && recent_.back().to_ms == from_ms;
  if (extends) {
    recent_.back().to_ms = to_ms;
  } else {
    recent_.push_back({from_ms, to_ms, ranks, cause, slowed_share});
  }
  while (!recent_.empty() && recent_.front().to_ms < to_ms - kRecentMs) recent_.pop_front();
}

void GoodputLedger::MoveToDetection(int64_t fault_ms) {
  std::optional<Segment> before_fault;  // the part of a segment that began before the fault
  for (Segment& seg : recent_) {
    if (seg.to_ms <= fault_ms || IncidentOwn(seg.cause)) continue;
    const int64_t from = std::max(seg.from_ms, fault_ms);
    const double wall_s = static_cast<double>(seg.to_ms - from) / 1000.0;
    // Taken back from where it went, then given to detection (and to the incident).
    auto take = [&](GoodputCause c, double w) {
      g_.wall_s[Index(c)] = std::max(0.0, g_.wall_s[Index(c)] - w);
      g_.rank_s[Index(c)] = std::max(0.0, g_.rank_s[Index(c)] - w * seg.ranks);
    };
    if (seg.cause == GoodputCause::kProductive && seg.slowed_share > 0) {
      take(GoodputCause::kProductive, wall_s * (1 - seg.slowed_share));
      take(GoodputCause::kSlowed, wall_s * seg.slowed_share);
    } else {
      take(seg.cause, wall_s);
    }
    Add(GoodputCause::kDetection, wall_s, seg.ranks);
    if (from > seg.from_ms) {
      before_fault = seg;
      before_fault->to_ms = from;
      seg.from_ms = from;
    }
    seg.cause = GoodputCause::kDetection;
    seg.slowed_share = 0;
  }
  if (before_fault) {
    recent_.push_back(*before_fault);
    std::sort(recent_.begin(), recent_.end(), [](const Segment& a, const Segment& b) { return a.from_ms < b.from_ms; });
  }
}

void GoodputLedger::OpenIncident(int64_t fault_ms) {
  if (proto::GoodputIncident* open = Open()) open->open = false;  // a second fault before the first healed
  proto::GoodputIncident incident;
  incident.fault_unix_ms = fault_ms;
  incident.open = true;
  g_.incidents.push_back(incident);
  while (g_.incidents.size() > proto::Goodput::kMaxIncidents) g_.incidents.erase(g_.incidents.begin());
}

GoodputCause GoodputLedger::PhaseOf(const JobSample& s) const {
  if (s.state == proto::JobState::kStopping) return GoodputCause::kSaveStop;
  if (s.state == proto::JobState::kStopped) return GoodputCause::kRelaunch;
  if (s.window_open) return GoodputCause::kDetection;
  if (s.ranks_running <= 0) return GoodputCause::kIdle;
  if (!g_.stepping) return GoodputCause::kStartup;
  if (s.pace.step >= 0 && s.pace.step <= g_.redo_until_step) return GoodputCause::kRedone;
  return GoodputCause::kProductive;
}

void GoodputLedger::Observe(const JobSample& s) {
  if (g_.since_unix_ms == 0) {
    if (s.ranks_held <= 0 || s.ranks_running <= 0) return;  // nothing held yet
    g_.since_unix_ms = g_.last_unix_ms = s.unix_ms;
  }
  if (s.unix_ms <= g_.last_unix_ms) return;
  const int64_t from_ms = g_.last_unix_ms;
  g_.last_unix_ms = s.unix_ms;
  // A finished job holds nothing: its time is not the job's any more.
  if (s.state == proto::JobState::kFinished) return;

  // A new launch: its restore took it back to some step, and it has done no step yet.
  if (s.ranks_running > 0 && s.incarnation != g_.incarnation) {
    g_.incarnation = s.incarnation;
    g_.stepping = false;
    g_.redo_until_step = g_.furthest_step;
  }
  const bool pace_current = s.pace.unix_ms > 0 && s.pace.ranks > 0 && s.pace.incarnation == g_.incarnation;
  if (pace_current && (s.pace.step >= 0 || s.pace.steps > 0)) g_.stepping = true;

  if (s.window_open && !window_seen_) {
    window_seen_ = true;
    const int64_t fault_ms = std::clamp(s.fault_unix_ms > 0 ? s.fault_unix_ms : from_ms, g_.since_unix_ms, from_ms);
    OpenIncident(fault_ms);
    MoveToDetection(fault_ms);
  } else if (!s.window_open) {
    window_seen_ = false;
  }
  if (!s.incident.empty()) {
    if (proto::GoodputIncident* open = Open(); open != nullptr && open->id.empty()) open->id = s.incident;
  }

  const GoodputCause phase = PhaseOf(s);
  double slowed_share = 0;
  if (phase == GoodputCause::kProductive && pace_current && s.pace.step_ms > 0) {
    if (g_.normal_step_ms <= 0 || s.pace.step_ms < g_.normal_step_ms) g_.normal_step_ms = s.pace.step_ms;
    if (s.pace.step_ms > kSlowedAbove * g_.normal_step_ms) slowed_share = 1 - g_.normal_step_ms / s.pace.step_ms;
  }
  const double ranks = std::max(1, std::max(s.ranks_held, s.ranks_running));
  Account(from_ms, s.unix_ms, ranks, phase, slowed_share);
  g_.phase = phase;
  // The job trains past where it was: the incident has cost what it will.
  if (phase == GoodputCause::kProductive) {
    if (proto::GoodputIncident* open = Open()) open->open = false;
  }
  if (pace_current && g_.stepping && s.pace.step > g_.furthest_step) g_.furthest_step = s.pace.step;
}

}  // namespace ft::master
