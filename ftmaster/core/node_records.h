// A node's history across jobs, as one incident adds to it (proto/node_history.h,
// docs/nodes.md): which records the incident means for which node. Pure: no Redis, no clock;
// the master's NodeHistoryRound (ftmaster/node_history.h) writes what this says.
//
//   suspect    per node among the suspects of a hang, host-frozen, transport-hang or sdc
//              incident (`nodes`: how many nodes it named in all; one among many weighs less)
//   crash      per node among the suspects of a crash incident
//   slow       per node among the suspects of a straggler or slow-link incident (also the
//              eviction for slowness, a straggler incident)
//   evicted    per node the decision evicted (Incident::evicted), with its reason
//   hardware   per critical signal the incident carries (Incident::hardware), on its node
// A busy rank is not a fault (nothing); a restore mismatch is the plan's, not a node's
// (nothing); a `hardware` incident (a signal before anything failed) gives hardware records
// only, not suspect ones.
//
// Bounded: an incident of a 131,072-rank job may name thousands of nodes. Records are written
// for at most `max_nodes` of them — the evicted nodes first, then those with critical
// hardware signals, then the suspects in the incident's order — and the rest are counted
// (nodes_left_out) for the writer to say so.
#ifndef FT_FTMASTER_CORE_NODE_RECORDS_H_
#define FT_FTMASTER_CORE_NODE_RECORDS_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "proto/messages.h"
#include "proto/node_history.h"

namespace ft::master {

// The most critical signals one incident records per node: an incident carries at most 16.
inline constexpr size_t kHardwareRecordsPerNode = 4;

struct IncidentRecords {
  std::vector<proto::NodeRecord> records;  // grouped by node, nodes in the order above
  size_t nodes_named = 0;                  // distinct nodes the incident concerns
  size_t nodes_left_out = 0;               // of them, those past max_nodes: no record
};

// `job`: the job's name as its master was given it. Records are stamped with the incident's
// decided_unix_ms (else its window's close, else its first event).
IncidentRecords NodeRecordsOf(const proto::Incident& incident, std::string_view job, size_t max_nodes);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_NODE_RECORDS_H_
