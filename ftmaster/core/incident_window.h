// ft::master::IncidentWindow: the events of one incident window while the master collects
// them. A window opens at the first timeout, exit or error event; busy events join an open
// window; events are de-duplicated by content (a worker may deliver one twice after an
// outage) and capped. Its durable part (proto::OpenIncident, `open_incident` in the master
// hash) lets another master continue the window; its events are re-read from the stream.
// A plain value (no Redis, no clock): the round that reads events into it and writes it is
// WindowRound (ftmaster/window_round.h); what it comes to once closed is DecideWindow's
// (window_decision.h).
#ifndef FT_FTMASTER_CORE_INCIDENT_WINDOW_H_
#define FT_FTMASTER_CORE_INCIDENT_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "proto/master_codec.h"
#include "proto/messages.h"

namespace ft::master {

// Event kinds that open a window, and that a window collects (the incidents that call for a
// decision: decision.h's Acted).
bool OpensWindow(const proto::Event& event);
bool CollectedInWindow(const std::string& kind);

struct IncidentWindow {
  static constexpr size_t kMaxEvents = 100000;

  bool open = false;
  std::string first_event_id;
  int64_t first_unix_ms = 0;
  int64_t opened_unix_ms = 0;
  int outcomes = 0;             // busy outcomes written for this window
  std::string last_outcome;     // "busy:3,5"
  bool watching = false;        // a busy outcome stands; re-evaluate every hang_window
  int64_t next_eval_unix_ms = 0;
  std::vector<proto::Event> events;
  std::unordered_set<std::string> seen;  // event identity (dedupe redelivered events)

  // Keeps `event` unless it was seen or the window is full.
  void Add(proto::Event event);
  // The durable part, and a window continued from it (open, no events yet).
  proto::OpenIncident Persisted() const;
  static IncidentWindow Continued(const proto::OpenIncident& persisted, int64_t unix_ms);
};

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_INCIDENT_WINDOW_H_
