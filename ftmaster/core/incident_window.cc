#include "ftmaster/core/incident_window.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

namespace ft::master {
namespace {

std::string EventKey(const proto::Event& e) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}", e.kind, e.rank, e.node, e.unix_ms, e.comm_id, e.seq,
                     e.code);
}

}  // namespace

bool OpensWindow(const proto::Event& event) {
  // A clean exit is how every rank of a finished job ends: alone it says nothing is stuck. A
  // rank that returned early leaves its peers waiting, and their timeouts open the window
  // (with this exit in it as evidence). A death or a freeze is an incident on its own, seen
  // waited on or not (attribution.h says which deaths are a teardown).
  if (proto::Is(event, proto::EventKind::kExit)) return !proto::EndedCleanly(event);
  return proto::Is(event, proto::EventKind::kTimeout) || proto::Is(event, proto::EventKind::kError) ||
         proto::Is(event, proto::EventKind::kFrozen);
}
bool CollectedInWindow(const std::string& kind) {
  std::optional<proto::EventKind> k = proto::ParseEventKind(kind);
  return k.has_value() && *k != proto::EventKind::kSlowdown;  // slowdowns go to the straggler round
}

void IncidentWindow::Add(proto::Event event) {
  if (events.size() >= kMaxEvents) return;
  if (seen.insert(EventKey(event)).second) events.push_back(std::move(event));
}

proto::OpenIncident IncidentWindow::Persisted() const {
  return proto::OpenIncident{.first_event_id = first_event_id, .first_event_unix_ms = first_unix_ms,
                             .opened_unix_ms = opened_unix_ms, .outcomes = outcomes,
                             .last_outcome = last_outcome, .watching = watching};
}

IncidentWindow IncidentWindow::Continued(const proto::OpenIncident& p, int64_t unix_ms) {
  return IncidentWindow{.open = true, .first_event_id = p.first_event_id, .first_unix_ms = p.first_event_unix_ms,
                        .opened_unix_ms = p.opened_unix_ms, .outcomes = p.outcomes,
                        .last_outcome = p.last_outcome, .watching = p.watching,
                        .next_eval_unix_ms = unix_ms, .events = {}, .seen = {}};
}

}  // namespace ft::master
