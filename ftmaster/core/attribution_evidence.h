// Attribution, phase 4 (attribution.h): the findings (attribution_classify.h) in words — the
// incidents with their suspects (why each is suspected), evidence lines (the window's first
// events, what waits on whom, the order a cascade of deaths took, the teardown set aside),
// messages and confidences; `why_none` when nothing is named but a teardown was set aside.
// Ids are "<first event>-<kind>[-<comm hex>]". Pure.
#ifndef FT_FTMASTER_CORE_ATTRIBUTION_EVIDENCE_H_
#define FT_FTMASTER_CORE_ATTRIBUTION_EVIDENCE_H_

#include <string>
#include <vector>

#include "ftmaster/core/attribution.h"
#include "ftmaster/core/attribution_classify.h"
#include "ftmaster/core/attribution_graph.h"
#include "ftmaster/core/attribution_snapshot.h"
#include "proto/messages.h"

namespace ft::master::attribution {

// The incidents, in the order crash, host-frozen, hang, transport hangs (by comm, as found),
// busy; those naming nobody left out (a hang with unexplained waiters excepted).
std::vector<proto::Incident> WriteIncidents(const Findings& findings, const Snapshot& snap,
                                            const WaitForGraph& graph, const AttributionInput& in,
                                            std::string* why_none);

}  // namespace ft::master::attribution

#endif  // FT_FTMASTER_CORE_ATTRIBUTION_EVIDENCE_H_
