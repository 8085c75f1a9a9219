#include "ftmaster/core/goodput.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace ft::master {

using proto::GoodputCause;

namespace {

size_t Index(GoodputCause c) { return static_cast<size_t>(c); }

// The phases that belong to an incident's handling: time already in them is not moved again.
// An incarnation above this (2001 in Unix ns) is a process's start time.
constexpr uint64_t kIncarnationIsTime = 1'000'000'000'000'000'000ull;

bool IncidentOwn(GoodputCause c) {
  return c == GoodputCause::kDetection || c == GoodputCause::kSaveStop || c == GoodputCause::kRelaunch;
}

}  // namespace

JobPace PaceOf(std::span<const proto::Membership> members, std::span<const proto::RankSummary> summaries,
               int64_t unix_ms) {
  JobPace pace;
  std::unordered_map<int, const proto::Membership*> running;
  for (const proto::Membership& m : members) {
    if (!proto::Is(m.state, proto::RankState::kRunning)) continue;
    running[m.rank] = &m;
    pace.incarnation = std::max(pace.incarnation, m.incarnation);
  }
  std::vector<double> step_ms;
  bool all_declare = true;
  for (const proto::RankSummary& s : summaries) {
    auto it = running.find(s.rank);
    // A summary from before the rank's process started is its previous process's. The start
    // is the incarnation (Unix ns) where it is one; else the membership's own time, which a
    // rewrite (a communicator joined) moves later.
    if (it == running.end()) continue;
    const proto::Membership& m = *it->second;
    const int64_t started_ms =
        m.incarnation > kIncarnationIsTime ? static_cast<int64_t>(m.incarnation / 1000000) : m.unix_ms;
    if (s.unix_ms < started_ms) continue;
    pace.steps = pace.ranks == 0 ? s.steps : std::min(pace.steps, s.steps);
    pace.summary_unix_ms = pace.ranks == 0 ? s.unix_ms : std::min(pace.summary_unix_ms, s.unix_ms);
    if (s.declared_step < 0) all_declare = false;
    pace.step = pace.ranks == 0 ? s.declared_step : std::min(pace.step, s.declared_step);
    // The window's median, smoothed over a few reports (report_pacing.h), not the last step: a
    // periodic save's step or a loaded host's odd one is not a slowdown. It follows a real one
    // within a report or two at each end.
    const double typical = s.step_p50_ms > 0 ? s.step_p50_ms : s.step_ms;
    if (typical > 0) step_ms.push_back(typical);
    ++pace.ranks;
  }
  if (!all_declare) pace.step = -1;
  if (!step_ms.empty()) {
    std::nth_element(step_ms.begin(), step_ms.begin() + step_ms.size() / 2, step_ms.end());
    pace.step_ms = step_ms[step_ms.size() / 2];
  }
  pace.unix_ms = pace.ranks > 0 ? unix_ms : 0;
  return pace;
}

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

void GoodputLedger::Reassign(GoodputCause from, GoodputCause to, double wall_s, double ranks) {
  g_.wall_s[Index(from)] = std::max(0.0, g_.wall_s[Index(from)] - wall_s);
  g_.rank_s[Index(from)] = std::max(0.0, g_.rank_s[Index(from)] - wall_s * ranks);
  if (proto::GoodputIncident* open = Open(); open != nullptr && from != GoodputCause::kProductive) {
    open->rank_s[Index(from)] = std::max(0.0, open->rank_s[Index(from)] - wall_s * ranks);
  }
  Add(to, wall_s, ranks);
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
  if (g_.redo_left_s > 0) return GoodputCause::kRedone;
  if (g_.redo_left_s < 0 && s.pace.step >= 0 && s.pace.step <= g_.redo_until_step) return GoodputCause::kRedone;
  return GoodputCause::kProductive;
}

void GoodputLedger::Observe(const JobSample& s) {
  if (g_.since_unix_ms == 0) {
    if (s.ranks_held <= 0 || s.ranks_running <= 0) return;  // nothing held yet
    // From its first process's start (an incarnation is its start, Unix ns), which the master
    // may see a while later: the membership is read as it comes.
    int64_t start = s.unix_ms;
    const int64_t began = static_cast<int64_t>(s.oldest_incarnation / 1000000);
    if (began > 0 && began < s.unix_ms && s.unix_ms - began < kRecentMs) start = began;
    g_.since_unix_ms = g_.last_unix_ms = start;
  }
  if (s.unix_ms <= g_.last_unix_ms) return;
  const int64_t from_ms = g_.last_unix_ms;
  g_.last_unix_ms = s.unix_ms;
  // A finished job holds nothing: its time is not the job's any more.
  if (s.state == proto::JobState::kFinished) return;
  if (continued_) {
    continued_ = false;
    const double ranks = std::max(1, std::max(s.ranks_held, s.ranks_running));
    Account(from_ms, s.unix_ms, ranks, g_.phase, 0);
    return;
  }

  g_.furthest_step = std::max(g_.furthest_step, s.ended_step);
  // A new launch (every running process started after the newest of the last one: its ranks
  // register one by one, and the membership is read as it comes): its restore took it back
  // to some step, and it has done no step yet.
  if (s.ranks_running > 0) {
    if (g_.launch_incarnation == 0 || s.oldest_incarnation > g_.incarnation) {
      g_.launch_incarnation = s.oldest_incarnation;
      g_.stepping = false;
      g_.redo_until_step = g_.furthest_step;
      g_.redo_left_s = -1;
      redone_before_launch_s_ = g_.wall_s[Index(GoodputCause::kRedone)];
      startup_before_launch_s_ = g_.wall_s[Index(GoodputCause::kStartup)];
    }
    g_.incarnation = std::max(g_.incarnation, s.incarnation);
  }
  // What it restored (the first time every running rank said): the steps from there to the
  // furthest reached are done again, at the job's normal pace.
  if (g_.redo_left_s < 0 && s.restored_step >= -1 && s.ranks_running > 0 && g_.normal_step_ms > 0) {
    const int64_t again = std::max<int64_t>(0, g_.redo_until_step - s.restored_step);
    // Less what the pace already showed as done again before every rank said what it restored.
    const double already_s = g_.wall_s[Index(GoodputCause::kRedone)] - redone_before_launch_s_;
    g_.redo_left_s = std::max(0.0, static_cast<double>(again) * g_.normal_step_ms / 1000.0 - already_s);
  }
  const bool pace_current = s.pace.unix_ms > 0 && s.pace.ranks > 0 && s.pace.incarnation >= g_.launch_incarnation;
  if (pace_current && !g_.stepping && (s.pace.step >= 0 || s.pace.steps > 0)) {
    g_.stepping = true;
    // The pace shows steps a while after they were done (the membership and the summaries are
    // read as they come): the steps it counts beyond the first (start-up's own) were stepping.
    // Its steps: from the step restored to the one declared, or as the worker counted them.
    const double launch_startup_s = g_.wall_s[Index(GoodputCause::kStartup)] - startup_before_launch_s_;
    int64_t steps = static_cast<int64_t>(s.pace.steps);
    if (s.pace.step >= 0 && s.restored_step >= -1) steps = s.pace.step - std::max<int64_t>(0, s.restored_step);
    const double since_summary_s =
        s.pace.summary_unix_ms > 0 ? std::max<double>(0, static_cast<double>(from_ms - s.pace.summary_unix_ms) / 1000.0) : 0;
    const double counted_s = since_summary_s + static_cast<double>(std::max<int64_t>(0, steps - 1)) * s.pace.step_ms / 1000.0;
    const GoodputCause stepping = PhaseOf(s);
    const double moved_s = std::min(launch_startup_s, counted_s);
    if (moved_s > 0 && (stepping == GoodputCause::kProductive || stepping == GoodputCause::kRedone)) {
      Reassign(GoodputCause::kStartup, stepping, moved_s, std::max(1, std::max(s.ranks_held, s.ranks_running)));
      if (stepping == GoodputCause::kRedone && g_.redo_left_s > 0) g_.redo_left_s = std::max(0.0, g_.redo_left_s - moved_s);
    }
  }

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
  if (phase == GoodputCause::kRedone && g_.redo_left_s > 0) {
    // The budget of redone time, then what is left of the interval is the job's own.
    const double wall_s = static_cast<double>(s.unix_ms - from_ms) / 1000.0;
    if (wall_s > g_.redo_left_s) {
      const int64_t split_ms = from_ms + static_cast<int64_t>(g_.redo_left_s * 1000.0);
      g_.redo_left_s = 0;
      Account(from_ms, split_ms, ranks, GoodputCause::kRedone, 0);
      Account(split_ms, s.unix_ms, ranks, GoodputCause::kProductive, 0);
      g_.phase = GoodputCause::kProductive;
      if (proto::GoodputIncident* open = Open()) open->open = false;
      return;
    }
    g_.redo_left_s -= wall_s;
  }
  Account(from_ms, s.unix_ms, ranks, phase, slowed_share);
  g_.phase = phase;
  // The job trains past where it was: the incident has cost what it will.
  if (phase == GoodputCause::kProductive) {
    if (proto::GoodputIncident* open = Open()) open->open = false;
  }
  if (pace_current && g_.stepping && s.pace.step > g_.furthest_step) g_.furthest_step = s.pace.step;
}

}  // namespace ft::master
