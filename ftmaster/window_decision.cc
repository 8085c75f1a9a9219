#include "ftmaster/window_decision.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include <utility>

#include "ftmaster/core/decision.h"
#include "ftmaster/core/hw_evidence.h"

namespace ft::master {

WindowDecision DecideWindow(std::vector<proto::Incident> incidents, const std::string& why_none,
                            const IncidentWindow& window, int64_t unix_ms, int64_t decided_unix_ms,
                            const Topology* topology, const std::vector<proto::Membership>& members,
                            bool sharded_optimizer, int64_t busy_report_ms, const HwLog* hardware,
                            const std::map<std::string, int>* prior_failures) {
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
  const int64_t first = window.first_unix_ms;
  bool acted = false;
  std::string busy_outcome;
  for (proto::Incident& incident : incidents) {
    // Ids from the window's first event as persisted: the same for any master deciding it.
    const size_t dash = incident.id.find('-');
    incident.id = fmt::format("{}{}", first,
                              dash == std::string::npos ? "-" + incident.kind : incident.id.substr(dash));
    incident.first_event_unix_ms = first;
    incident.window_closed_unix_ms = unix_ms;
    incident.decided_unix_ms = decided_unix_ms;
    incident.decide_ms = static_cast<double>(decided_unix_ms - first);
    acted = acted || Acted(incident);
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      busy_outcome = "busy:";
      for (size_t i = 0; i < incident.suspects.size(); ++i) {
        busy_outcome += (i ? "," : "") + std::to_string(incident.suspects[i].rank);
        d.busy_ranks.push_back(incident.suspects[i].rank);
      }
    }
  }
  // What the suspects' GPUs, NICs and hosts said around the incident: in the incident, and in
  // the decision (a crash evicts its node only with evidence against it).
  if (hardware != nullptr) AttachHardware(incidents, *hardware, unix_ms);
  const bool busy_long = decided_unix_ms - first >= busy_report_ms;
  for (proto::Incident& incident : incidents) {
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      if (!acted && !busy_long) continue;  // watched, not yet worth an incident
      if (busy_outcome == d.last_outcome) continue;  // unchanged: written before
      ++d.outcomes;
      if (d.outcomes > 1) incident.id += fmt::format("-{}", d.outcomes);
      d.last_outcome = busy_outcome;
    }
    d.to_write.push_back(incident);
  }
  d.busy_outcome = std::move(busy_outcome);
  if (!acted) {
    d.kind = WindowDecision::Kind::kWatch;
    return d;
  }

  d.kind = WindowDecision::Kind::kAct;
  Decision decision = Decide(incidents, *topology, members, sharded_optimizer, prior_failures);
  std::set<std::string> failed;
  for (const proto::Incident& incident : incidents) {
    if (!proto::Is(incident, proto::IncidentKind::kCrash) && !proto::Is(incident, proto::IncidentKind::kHostFrozen)) continue;
    for (const proto::Suspect& s : incident.suspects) {
      if (!s.node.empty()) failed.insert(s.node);
    }
  }
  d.failed_nodes.assign(failed.begin(), failed.end());
  ApplyDecision(decision, d.to_write);
  for (proto::Incident& incident : d.to_write) {
    if (Acted(incident)) {
      d.action.incident = incident.id;
      // The evictions travel with the incident that decided them (a node's history across
      // jobs is built from the incident stream).
      for (size_t i = 0; i < decision.evict_nodes.size() && i < decision.evict_reasons.size(); ++i) {
        incident.evicted.push_back({decision.evict_nodes[i], decision.evict_reasons[i]});
      }
      break;
    }
  }
  d.action.decision = decision.decision;
  d.action.save = std::move(decision.save);  // 131k targets: not used after this
  d.action.phase = proto::FirstPhase(decision.decision);
  // The processes the action is for: those running when the incident window opened. A
  // launcher that restarted the group in place meanwhile (torchrun's elastic agent, at once)
  // runs new processes by the decision, a second or more later: a stop or save decided for the
  // failed run must not reach them (the workers refuse a command decided before a rank's
  // process started), and the master watches them as a new run.
  // Nor may it reach a process that started after the window's first event, however late the
  // master read it (a Redis restored from a snapshot, a takeover's backlog).
  d.action.decided_unix_ms =
      window.opened_unix_ms > 0 ? std::min(decided_unix_ms, window.opened_unix_ms) : decided_unix_ms;
  if (first > 0) d.action.decided_unix_ms = std::min(d.action.decided_unix_ms, first);
  d.evict_nodes = std::move(decision.evict_nodes);
  d.evict_reasons = std::move(decision.evict_reasons);
  d.reason = std::move(decision.reason);
  d.topology = topology->Describe();
  return d;
}

}  // namespace ft::master
