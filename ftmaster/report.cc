#include "ftmaster/report.h"

#include <fmt/format.h>

#include <cmath>

#include "ftmaster/core/text.h"
#include "proto/codec.h"

namespace ft::master {

std::string IncidentLine(const proto::Incident& incident) {
  std::string suspects = proto::SuspectsField(incident.suspects);
  return fmt::format("INCIDENT id={} kind={} suspects={} decide_ms={} decision={}", incident.id,
                     incident.kind, suspects.empty() ? "-" : suspects,
                     static_cast<int64_t>(std::llround(incident.decide_ms)),
                     incident.decision.empty() ? "none" : incident.decision);
}

std::string IncidentBlock(const proto::Incident& incident, const std::vector<std::string>& evicted) {
  std::string out = fmt::format("== incident {}: {} (confidence {:.2f}, decided {} after the first "
                                "event)\n",
                                incident.id, incident.kind, incident.confidence,
                                HumanMs(incident.decide_ms));
  if (!incident.message.empty()) out += fmt::format("   {}\n", incident.message);
  if (incident.comm_id != 0) out += fmt::format("   communicator: {}\n", CommHex(incident.comm_id));
  out += "   suspects:\n";
  const size_t kMaxShown = 16;
  for (size_t i = 0; i < incident.suspects.size() && i < kMaxShown; ++i) {
    const proto::Suspect& s = incident.suspects[i];
    out += fmt::format("     rank {} on {}: {}\n", s.rank, s.node.empty() ? "?" : s.node, s.why);
  }
  if (incident.suspects.size() > kMaxShown) {
    out += fmt::format("     ... and {} more\n", incident.suspects.size() - kMaxShown);
  }
  if (incident.suspects.empty()) out += "     (none named)\n";
  if (!incident.evidence.empty()) {
    out += "   evidence:\n";
    for (const std::string& line : incident.evidence) out += fmt::format("     - {}\n", line);
  }
  out += fmt::format("   decision: {}\n", incident.decision.empty() ? "none" : incident.decision);
  if (!evicted.empty()) {
    out += "   evicted:";
    for (const std::string& node : evicted) out += " " + node;
    out += "\n";
  }
  out += IncidentLine(incident);
  out += "\n";
  return out;
}

}  // namespace ft::master
