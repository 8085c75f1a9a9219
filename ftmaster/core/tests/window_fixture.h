// A closed incident window for the tests of what it comes to (window_decision_test.cc) and of
// what the action runner makes of that (ftmaster/tests/loop_decisions_test.cc).
#ifndef FT_FTMASTER_CORE_TESTS_WINDOW_FIXTURE_H_
#define FT_FTMASTER_CORE_TESTS_WINDOW_FIXTURE_H_

#include <string>
#include <vector>

#include "ftmaster/core/incident_window.h"
#include "proto/messages.h"

namespace ft::master::testing {

// An incident as Attribute makes it, suspects rank r on node "n<r>".
inline proto::Incident Made(proto::IncidentKind kind, std::vector<int> ranks) {
  proto::Incident i;
  i.kind = proto::IncidentKindName(kind);
  i.id = "0-" + i.kind;  // Attribute's ids: DecideWindow puts the window's first event in front
  for (int r : ranks) i.suspects.push_back(proto::Suspect{r, "n" + std::to_string(r), "why"});
  return i;
}

// Its first event at 1000, opened at 1005.
inline IncidentWindow Window() {
  IncidentWindow w;
  w.open = true;
  w.first_event_id = "1000-0";
  w.first_unix_ms = 1000;
  w.opened_unix_ms = 1005;
  return w;
}

}  // namespace ft::master::testing

#endif  // FT_FTMASTER_CORE_TESTS_WINDOW_FIXTURE_H_
