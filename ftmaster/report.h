// How ftmaster shows incidents to people (stdout of `ftmaster run`, `ftmaster incidents`): a
// short block, and one machine-readable line
//   INCIDENT id=<id> kind=<kind> suspects=<r@node,...> decide_ms=<n> decision=<d>
#ifndef FT_FTMASTER_REPORT_H_
#define FT_FTMASTER_REPORT_H_

#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

// kind, suspects (node and why), evidence, confidence, time to decide, decision and message,
// the evicted nodes when given; ends with IncidentLine() and a newline.
std::string IncidentBlock(const proto::Incident& incident, const std::vector<std::string>& evicted);
std::string IncidentLine(const proto::Incident& incident);

}  // namespace ft::master

#endif  // FT_FTMASTER_REPORT_H_
