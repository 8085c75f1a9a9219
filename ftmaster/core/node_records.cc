#include "ftmaster/core/node_records.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ftmaster/core/hw_evidence.h"

namespace ft::master {
namespace {

// What being a suspect of this kind of incident is, for the node's history; none: nothing.
std::optional<proto::NodeRecordKind> SuspectRecordKind(const proto::Incident& incident) {
  const std::optional<proto::IncidentKind> kind = proto::ParseIncidentKind(incident.kind);
  if (!kind) return std::nullopt;
  switch (*kind) {
    case proto::IncidentKind::kHang:
    case proto::IncidentKind::kHostFrozen:
    case proto::IncidentKind::kTransportHang:
    case proto::IncidentKind::kSdc: return proto::NodeRecordKind::kSuspect;
    case proto::IncidentKind::kCrash: return proto::NodeRecordKind::kCrash;
    case proto::IncidentKind::kStraggler:
    case proto::IncidentKind::kSlowLink:
    case proto::IncidentKind::kJobSlow: return proto::NodeRecordKind::kSlow;
    case proto::IncidentKind::kBusy:             // working on the host: not a fault
    case proto::IncidentKind::kRestoreMismatch:  // the plan's, not a node's
    case proto::IncidentKind::kHardware:         // its signals are recorded as hardware
      return std::nullopt;
  }
  return std::nullopt;
}

int64_t StampOf(const proto::Incident& i) {
  if (i.decided_unix_ms > 0) return i.decided_unix_ms;
  if (i.window_closed_unix_ms > 0) return i.window_closed_unix_ms;
  return i.first_event_unix_ms;
}

}  // namespace

IncidentRecords NodeRecordsOf(const proto::Incident& incident, std::string_view job, size_t max_nodes) {
  IncidentRecords out;
  const std::optional<proto::NodeRecordKind> suspect_kind = SuspectRecordKind(incident);
  // Per node, what the incident says of it, gathered in the order of priority.
  struct OfNode {
    int rank = -1;            // its first suspect rank
    std::string why;          // that suspect's why
    bool suspect = false;
    const proto::Eviction* evicted = nullptr;
    std::vector<const proto::HwSignal*> hardware;
  };
  std::map<std::string, OfNode> by_node;
  std::vector<std::string> evicted_order, hardware_order, suspect_order;
  std::set<std::string> suspect_nodes;
  for (const proto::Suspect& s : incident.suspects) {
    if (s.node.empty()) continue;
    if (suspect_nodes.insert(s.node).second) {
      OfNode& n = by_node[s.node];
      n.rank = s.rank;
      n.why = s.why;
      n.suspect = true;
      suspect_order.push_back(s.node);
    }
  }
  for (const proto::Eviction& e : incident.evicted) {
    if (e.node.empty()) continue;
    OfNode& n = by_node[e.node];
    if (n.evicted == nullptr) evicted_order.push_back(e.node);
    n.evicted = &e;
  }
  for (const proto::HwSignal& s : incident.hardware) {
    if (!s.critical || s.node.empty()) continue;
    OfNode& n = by_node[s.node];
    if (n.hardware.empty()) hardware_order.push_back(s.node);
    if (n.hardware.size() < kHardwareRecordsPerNode) n.hardware.push_back(&s);
  }
  if (!suspect_kind) suspect_order.clear();  // its suspects alone give no record
  std::set<std::string> named(evicted_order.begin(), evicted_order.end());
  named.insert(hardware_order.begin(), hardware_order.end());
  named.insert(suspect_order.begin(), suspect_order.end());
  out.nodes_named = named.size();
  const int nodes = static_cast<int>(std::max<size_t>(1, suspect_nodes.size()));
  const int64_t stamp = StampOf(incident);
  auto record = [&](proto::NodeRecordKind kind, const std::string& node, int rank, std::string_view detail) {
    proto::NodeRecord r;
    r.kind = kind;
    r.node = node;
    r.job = std::string(job);
    r.incident = incident.id;
    r.incident_kind = incident.kind;
    r.unix_ms = stamp;
    r.rank = rank;
    r.nodes = nodes;
    r.detail = proto::CutText(detail, proto::kNodeRecordDetailBytes);
    out.records.push_back(std::move(r));
  };
  std::set<std::string> done;
  size_t written = 0;
  for (const std::vector<std::string>* order : {&evicted_order, &hardware_order, &suspect_order}) {
    for (const std::string& node : *order) {
      if (!done.insert(node).second) continue;
      if (written >= max_nodes) {
        ++out.nodes_left_out;
        continue;
      }
      ++written;
      const OfNode& n = by_node[node];
      if (n.suspect && suspect_kind) record(*suspect_kind, node, n.rank, n.why);
      if (n.evicted != nullptr) record(proto::NodeRecordKind::kEvicted, node, n.rank, n.evicted->why);
      for (const proto::HwSignal* s : n.hardware) {
        record(proto::NodeRecordKind::kHardware, node, s->ranks.empty() ? n.rank : s->ranks.front(), DescribeSignal(*s));
      }
    }
  }
  return out;
}

}  // namespace ft::master
