// Hardware evidence for incidents. Workers report what their node's GPUs, NICs and host said
// (hardware events, ftworker/health); the master keeps the recent ones per node (HwLog) and
// attaches those of an incident's suspects' nodes to it (AttachHardware), critical first, or
// says that none were found. The decision reads them (decision.h, "Evict"): a crash evicts its
// node only with evidence against it; a transport hang across nodes evicts the node whose NIC
// port went down, naming the link.
//
// Pure: no Redis, no clock (times are passed in). Used on the master's loop thread.
#ifndef FT_FTMASTER_CORE_HW_EVIDENCE_H_
#define FT_FTMASTER_CORE_HW_EVIDENCE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

// How far before an incident's first event a signal still counts as its evidence: an Xid or a
// link that went down a minute before the crash or the hang is why it happened.
inline constexpr int64_t kEvidenceLookbackMs = 60'000;
// The signals kept per node (the newest), and attached per incident.
inline constexpr size_t kHwPerNode = 256;
inline constexpr size_t kHwPerIncident = 16;

class HwLog {
 public:
  // `s.node` names the node; signals older than `keep_ms` before the newest are let go.
  void Add(proto::HwSignal s);
  // The node's signals with unix_ms in [from_ms, to_ms], oldest first.
  std::vector<proto::HwSignal> Of(const std::string& node, int64_t from_ms, int64_t to_ms) const;
  // Forgets signals older than `before_ms` (every node).
  void Prune(int64_t before_ms);
  size_t size() const;

 private:
  std::map<std::string, std::deque<proto::HwSignal>> by_node_;
};

// For each incident with suspects: `hardware` = the signals of its suspects' nodes from
// kEvidenceLookbackMs before its first event to `unix_ms`, critical ones first, then the
// suspects' own devices, newest first, at most kHwPerIncident; `hardware_checked` set; and one
// evidence line per node saying what was found ("none found" too).
void AttachHardware(std::span<proto::Incident> incidents, const HwLog& log, int64_t unix_ms);

// The critical signals of `node` in the incident's hardware (what makes it evidence against
// the node rather than the software).
std::vector<const proto::HwSignal*> CriticalOn(const proto::Incident& incident, const std::string& node);

// "Xid 79 on GPU 0000:3a:00.0 (rank 5)", "link-downed +2 on NIC mlx5_1/1 (ranks 4,5)": for
// incident lines and eviction reasons.
std::string DescribeSignal(const proto::HwSignal& s);
// "hardware on node1: critical Xid 79 on GPU 0000:3a:00.0 (rank 5): <detail>": an incident's
// evidence line for one signal.
std::string EvidenceLine(const proto::HwSignal& s);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_HW_EVIDENCE_H_
