// ft::master::DecideWindow: what a closed incident window comes to, as a value — one pure
// function of the window's state (incident_window.h), its attribution (attribution.h), the
// topology, the members, the workers' hardware signals, each node's earlier failures and the
// policy; no Redis, no clock. The window round (ftmaster/window_round.h) reads those, calls
// this, then commits the result with one fenced write (FencedWriter::WriteIncidents) and
// applies it only once that write is accepted: the shape of etcd raft's Ready/Advance, decision
// apart from I/O.
#ifndef FT_FTMASTER_CORE_WINDOW_DECISION_H_
#define FT_FTMASTER_CORE_WINDOW_DECISION_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ftmaster/core/decision.h"
#include "ftmaster/core/hw_evidence.h"
#include "ftmaster/core/incident_window.h"
#include "ftmaster/core/topology.h"
#include "proto/messages.h"

namespace ft::master {

// Each node's crashes and stopped processes (Unix ms), as the master keeps them
// (`failures:<node>` in the master hash): those within kRepeatedFailureMs are Decide's
// prior_failures.
using FailureHistory = std::map<std::string, std::vector<int64_t>>;

struct WindowDecision {
  enum class Kind {
    kClose,  // nothing to report: the window closes (close_why)
    kWatch,  // a busy rank holds the job up: watched; written when its outcome changed, once it
             // has held the job for busy_report_ms
    kAct,    // an incident that stops the job: written with `action`, the window closes
  };
  Kind kind = Kind::kClose;
  std::string close_why;
  // The incidents to write (ids and times set); busy ones only when their outcome changed.
  std::vector<proto::Incident> to_write;
  std::string busy_outcome;  // "busy:3,5", "" when no rank is busy
  std::vector<int> busy_ranks;  // 3, 5
  // The window's busy outcomes once this one is written (IncidentWindow::outcomes,
  // last_outcome): they name the next busy incident of the same window.
  int outcomes = 0;
  std::string last_outcome;
  // kAct
  Action action;
  std::vector<std::string> evict_nodes;
  std::vector<std::string> evict_reasons;  // one per evict_nodes
  // The nodes of its crash and stopped-process suspects: their failures, counted for the next
  // decision (Decide's prior_failures).
  std::vector<std::string> failed_nodes;
  // Those nodes' failure histories once this decision is written: pruned to
  // kRepeatedFailureMs, this failure added. The round persists them with the decision.
  FailureHistory failures;
  std::string reason;        // the decision's, for the log
  std::string topology;      // described, for the log
};

// Whether DecideWindow acts on these incidents (one of them stops the job): only then does it
// need the topology.
bool WindowActs(std::span<const proto::Incident> incidents);

// `incidents`, `why_none`: Attribute's answer for `window`. Ids are made from the window's first
// event (the same for any master deciding it). `topology`: needed only when WindowActs
// (nullptr otherwise). `decided_unix_ms`: the tick's time plus what it has cost so far.
// `busy_report_ms` (FT_BUSY_REPORT_AFTER): a busy outcome alone is written only once the window
// is that old — a healthy job's host work (a benchmark's setup between sizes, a data loader's
// refill, a 20 s pause) holds its peers for seconds and is no incident; a rank busy for
// minutes is worth an operator's look. With an acted incident, busy ones are written at once.
// `hardware`: the suspects' signals become the incidents' evidence. `failures`: each node's
// earlier failures, as of `unix_ms`.
WindowDecision DecideWindow(std::vector<proto::Incident> incidents, const std::string& why_none,
                            const IncidentWindow& window, int64_t unix_ms, int64_t decided_unix_ms,
                            const Topology* topology, const std::vector<proto::Membership>& members,
                            bool sharded_optimizer, int64_t busy_report_ms, const HwLog* hardware = nullptr,
                            const FailureHistory* failures = nullptr);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_WINDOW_DECISION_H_
