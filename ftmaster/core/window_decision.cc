#include "ftmaster/core/window_decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

namespace ft::master {
namespace {

// Ids from the window's first event as persisted: the same for any master deciding it. The
// busy incident's ranks make the window's busy outcome ("busy:3,5").
void StampIncidents(std::vector<proto::Incident>& incidents, const IncidentWindow& window, int64_t unix_ms,
                    int64_t decided_unix_ms, WindowDecision* d) {
  const int64_t first = window.first_unix_ms;
  for (proto::Incident& incident : incidents) {
    const size_t dash = incident.id.find('-');
    incident.id = fmt::format("{}{}", first,
                              dash == std::string::npos ? "-" + incident.kind : incident.id.substr(dash));
    incident.first_event_unix_ms = first;
    incident.window_closed_unix_ms = unix_ms;
    incident.decided_unix_ms = decided_unix_ms;
    incident.decide_ms = static_cast<double>(decided_unix_ms - first);
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      d->busy_outcome = "busy:";
      for (size_t i = 0; i < incident.suspects.size(); ++i) {
        d->busy_outcome += (i ? "," : "") + std::to_string(incident.suspects[i].rank);
        d->busy_ranks.push_back(incident.suspects[i].rank);
      }
    }
  }
}

// What is written: every incident, but a busy one only when its outcome changed, and alone
// (nothing acted) only once the window is busy_report_ms old.
void ChooseWrites(const std::vector<proto::Incident>& incidents, bool acted, bool busy_long, WindowDecision* d) {
  for (const proto::Incident& incident : incidents) {
    proto::Incident written = incident;
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      if (!acted && !busy_long) continue;  // watched, not yet worth an incident
      if (d->busy_outcome == d->last_outcome) continue;  // unchanged: written before
      ++d->outcomes;
      if (d->outcomes > 1) written.id += fmt::format("-{}", d->outcomes);
      d->last_outcome = d->busy_outcome;
    }
    d->to_write.push_back(std::move(written));
  }
}

// The nodes of crash and stopped-process suspects, and their failure histories with this one.
void CountFailures(const std::vector<proto::Incident>& incidents, int64_t unix_ms, const FailureHistory* history,
                   WindowDecision* d) {
  std::set<std::string> failed;
  for (const proto::Incident& incident : incidents) {
    if (!proto::Is(incident, proto::IncidentKind::kCrash) && !proto::Is(incident, proto::IncidentKind::kHostFrozen)) continue;
    for (const proto::Suspect& s : incident.suspects) {
      if (!s.node.empty()) failed.insert(s.node);
    }
  }
  d->failed_nodes.assign(failed.begin(), failed.end());
  for (const std::string& node : d->failed_nodes) {
    std::vector<int64_t>& times = d->failures[node];
    if (history != nullptr) {
      if (auto it = history->find(node); it != history->end()) times = it->second;
    }
    std::erase_if(times, [&](int64_t t) { return t < unix_ms - kRepeatedFailureMs; });
    times.push_back(unix_ms);
  }
}

// Each node's failures within kRepeatedFailureMs before `unix_ms`.
std::map<std::string, int> PriorFailures(const FailureHistory* history, int64_t unix_ms) {
  std::map<std::string, int> prior;
  if (history == nullptr) return prior;
  for (const auto& [node, times] : *history) {
    prior[node] = static_cast<int>(std::count_if(times.begin(), times.end(), [&](int64_t t) {
      return t >= unix_ms - kRepeatedFailureMs;
    }));
  }
  return prior;
}

// kAct: the checkpoint decision (decision.h) written into the incidents and the action.
void Act(const std::vector<proto::Incident>& incidents, const IncidentWindow& window, int64_t unix_ms,
         int64_t decided_unix_ms, const Topology& topology, const std::vector<proto::Membership>& members,
         bool sharded_optimizer, const FailureHistory* history, WindowDecision* d) {
  d->kind = WindowDecision::Kind::kAct;
  const std::map<std::string, int> prior = PriorFailures(history, unix_ms);
  Decision decision = Decide(incidents, topology, members, sharded_optimizer, &prior);
  CountFailures(incidents, unix_ms, history, d);
  ApplyDecision(decision, d->to_write);
  for (proto::Incident& incident : d->to_write) {
    if (Acted(incident)) {
      d->action.incident = incident.id;
      // The evictions travel with the incident that decided them (a node's history across
      // jobs is built from the incident stream).
      for (size_t i = 0; i < decision.evict_nodes.size() && i < decision.evict_reasons.size(); ++i) {
        incident.evicted.push_back({decision.evict_nodes[i], decision.evict_reasons[i]});
      }
      break;
    }
  }
  d->action.decision = decision.decision;
  d->action.save = std::move(decision.save);  // 131k targets: not used after this
  d->action.phase = proto::FirstPhase(decision.decision);
  // The processes the action is for: those running when the incident window opened. A
  // launcher that restarted the group in place meanwhile (torchrun's elastic agent, at once)
  // runs new processes by the decision, a second or more later: a stop or save decided for the
  // failed run must not reach them (the workers refuse a command decided before a rank's
  // process started), and the master watches them as a new run.
  // Nor may it reach a process that started after the window's first event, however late the
  // master read it (a Redis restored from a snapshot, a takeover's backlog).
  d->action.decided_unix_ms =
      window.opened_unix_ms > 0 ? std::min(decided_unix_ms, window.opened_unix_ms) : decided_unix_ms;
  if (window.first_unix_ms > 0) d->action.decided_unix_ms = std::min(d->action.decided_unix_ms, window.first_unix_ms);
  d->evict_nodes = std::move(decision.evict_nodes);
  d->evict_reasons = std::move(decision.evict_reasons);
  d->reason = std::move(decision.reason);
  d->topology = topology.Describe();
}

}  // namespace

bool WindowActs(std::span<const proto::Incident> incidents) {
  return std::any_of(incidents.begin(), incidents.end(), [](const proto::Incident& i) { return Acted(i); });
}

WindowDecision DecideWindow(std::vector<proto::Incident> incidents, const std::string& why_none,
                            const IncidentWindow& window, int64_t unix_ms, int64_t decided_unix_ms,
                            const Topology* topology, const std::vector<proto::Membership>& members,
                            bool sharded_optimizer, int64_t busy_report_ms, const HwLog* hardware,
                            const FailureHistory* failures) {
  WindowDecision d;
  d.outcomes = window.outcomes;
  d.last_outcome = window.last_outcome;
  if (incidents.empty()) {
    d.kind = WindowDecision::Kind::kClose;
    d.close_why = why_none.empty()
                      ? fmt::format("resolved: nothing waits any more ({} event{} in the window)",
                                    window.events.size(), window.events.size() == 1 ? "" : "s")
                      : "no incident: " + why_none;
    return d;
  }
  StampIncidents(incidents, window, unix_ms, decided_unix_ms, &d);
  const bool acted = WindowActs(incidents);
  // What the suspects' GPUs, NICs and hosts said around the incident: in the incident, and in
  // the decision (a crash evicts its node only with evidence against it).
  if (hardware != nullptr) AttachHardware(incidents, *hardware, unix_ms);
  ChooseWrites(incidents, acted, decided_unix_ms - window.first_unix_ms >= busy_report_ms, &d);
  if (!acted) {
    d.kind = WindowDecision::Kind::kWatch;
    return d;
  }
  Act(incidents, window, unix_ms, decided_unix_ms, *topology, members, sharded_optimizer, failures, &d);
  return d;
}

}  // namespace ft::master
