#include "ftmaster/core/job_slowdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "ftmaster/core/text.h"
#include "proto/master_codec.h"

namespace ft::master {

void JobSlowdown::Add(const proto::Event& slowdown, int64_t read_unix_ms) {
  if (slowdown.rank < 0) return;
  reports_[slowdown.rank] = Report{slowdown.node, read_unix_ms, slowdown.step_ms, slowdown.baseline_ms};
  explained_.erase(slowdown.rank);  // a new episode of its own
}

void JobSlowdown::TakeVerdicts(int64_t now_unix_ms, const std::map<int, Now>& now) {
  for (const auto& [rank, n] : now) {
    if (n.slowdown == 0) explained_.erase(rank);  // cleared: a later slowdown is a new one
    if (n.slowdown != 1 || n.node.empty() || explained_.count(rank) > 0) continue;
    auto [it, fresh] = reports_.emplace(rank, Report{n.node, now_unix_ms, n.step_ms, 0});
    if (!fresh) it->second.read_unix_ms = now_unix_ms;  // still slow: not aged out
  }
}

bool JobSlowdown::StillSlow(const Report& report, const std::map<int, Now>& now, int rank) {
  auto it = now.find(rank);
  if (it == now.end()) return true;  // no summary to tell: as reported
  if (it->second.slowdown >= 0) return it->second.slowdown == 1;  // the worker's own verdict
  if (it->second.step_ms <= 0) return true;
  // An older worker: its hysteresis clears a slowdown half way back to its baseline; the master
  // knows the reported step, not the worker's margin, so it takes half the reported excess.
  return it->second.step_ms >= report.baseline_ms + (report.step_ms - report.baseline_ms) / 2;
}

std::optional<proto::Incident> JobSlowdown::Evaluate(int64_t now_unix_ms, int running_ranks, int nodes,
                                                     bool explained, const std::map<int, Now>& now) {
  TakeVerdicts(now_unix_ms, now);
  std::erase_if(reports_, [&](const auto& r) { return now_unix_ms - r.second.read_unix_ms > options_.window_ms; });
  if (reports_.empty()) {
    reached_unix_ms_ = 0;
    named_ = false;  // the episode is over: a later one is named again
    return std::nullopt;
  }
  // A report counts while its rank is still slow: a burst that every rank had for a few
  // seconds (a storage hiccup, another job's burst on shared hosts) leaves reports in the
  // window, but it did not hold, and a job-wide slowdown is one that holds for settle_ms.
  std::map<int, const Report*> standing;
  for (const auto& [rank, r] : reports_) {
    if (StillSlow(r, now, rank)) standing.emplace(rank, &r);
  }
  std::set<std::string> slowed_nodes;
  for (const auto& [rank, r] : standing) slowed_nodes.insert(r->node);
  const int count = static_cast<int>(standing.size());
  const bool reached = running_ranks > 0 && count >= 2 && count >= options_.share * running_ranks &&
                       static_cast<int>(slowed_nodes.size()) >= std::min(nodes, 2);
  if (explained) {
    // A culprit explains these slowdowns: they are its, not the job's. A slowdown the job
    // still has once it is gone comes as new reports (a worker raises one per episode).
    for (const auto& [rank, r] : reports_) explained_.insert(rank);
    reports_.clear();
    reached_unix_ms_ = 0;
    return std::nullopt;
  }
  if (!reached) {
    reached_unix_ms_ = 0;  // reached again, and settled again, before it is job-wide
    return std::nullopt;
  }
  if (reached_unix_ms_ == 0) reached_unix_ms_ = now_unix_ms;
  if (named_ || now_unix_ms - reached_unix_ms_ < options_.settle_ms) return std::nullopt;
  named_ = true;

  std::vector<double> ratios;
  for (const auto& [rank, r] : standing) {
    if (r->baseline_ms > 0) ratios.push_back(r->step_ms / r->baseline_ms);
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios.empty() ? 0 : ratios[ratios.size() / 2];
  proto::Incident incident;
  incident.kind = proto::IncidentKindName(proto::IncidentKind::kJobSlow);
  incident.id = fmt::format("{}-job-slow", now_unix_ms);
  incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
  incident.first_event_unix_ms = reached_unix_ms_;
  incident.decided_unix_ms = now_unix_ms;
  incident.decide_ms = static_cast<double>(now_unix_ms - reached_unix_ms_);
  incident.confidence = std::clamp(static_cast<double>(count) / running_ranks, 0.0, 1.0);
  for (const auto& [rank, r] : standing) {
    auto it = now.find(rank);
    const double now_ms = it != now.end() ? it->second.step_ms : 0;
    if (r->baseline_ms > 0) {
      incident.evidence.push_back(fmt::format(
          "rank {} ({}): step {} against its baseline {} ({:+.0f}%){}", rank, r->node, HumanMs(r->step_ms),
          HumanMs(r->baseline_ms), 100 * (r->step_ms / r->baseline_ms - 1),
          now_ms > 0 ? fmt::format(", {} now", HumanMs(now_ms)) : ""));
    } else {  // a worker's verdict stands for the report
      incident.evidence.push_back(fmt::format(
          "rank {} ({}): slow by its worker's detector, step {} (its report is not in this master's window: "
          "read before it led, or aged out)", rank, r->node, HumanMs(now_ms > 0 ? now_ms : r->step_ms)));
    }
    if (incident.evidence.size() == 16 && count > 17) {
      incident.evidence.push_back(fmt::format("... and {} more ranks", count - 16));
      break;
    }
  }
  incident.message = fmt::format(
      "the whole job slowed alike: {} of {} ranks on {} of {} nodes, {}, no straggler or slow link "
      "among them; look at what every rank shares (input pipeline, storage, the fabric, a job-wide "
      "setting): no node is evicted for it",
      count, running_ranks, slowed_nodes.size(), nodes,
      ratios.empty() ? std::string("slow by their workers' detectors")
                     : fmt::format("median step {:.2f}x its baseline", median));
  return incident;
}

}  // namespace ft::master
