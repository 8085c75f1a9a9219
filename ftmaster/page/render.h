// The live page as pure functions: a Snapshot (snapshot.h) in, HTML or one panel's JSON out. No
// Redis, no clock, no thread: the reader (reader.h) renders each snapshot once and serves the
// strings. Every byte that came from Redis (node names, messages, reasons) is escaped; bytes that
// are not UTF-8 become U+FFFD, so a garbled value shows as garbled, never as markup.
//
// Bounded whatever the job's size: ranks are listed one by one up to kRankRowsMax, summarized by
// node up to kGroupRowsMax nodes, and beyond that by groups of consecutive nodes (131,072 ranks
// on 16,384 nodes: 256 rows of 64 nodes); the ranks not running are listed up to kNotableMax.
#ifndef FT_FTMASTER_PAGE_RENDER_H_
#define FT_FTMASTER_PAGE_RENDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ftmaster/page/snapshot.h"
#include "proto/messages.h"

namespace ft::master::page {

inline constexpr size_t kRankRowsMax = 256;
inline constexpr size_t kGroupRowsMax = 256;
inline constexpr size_t kNotableMax = 100;
inline constexpr size_t kGraphWaitersMax = 24;

// The panels of /api/<panel>.json.
enum class Panel { kJob, kRanks, kIncidents, kCheckpoints, kGoodput, kNodes };
inline constexpr Panel kPanels[] = {Panel::kJob, Panel::kRanks, Panel::kIncidents, Panel::kCheckpoints,
                                    Panel::kGoodput, Panel::kNodes};
const char* PanelName(Panel p);

// Text for HTML (element content and quoted attributes): & < > " ' escaped, bytes that are not
// valid UTF-8 and control characters other than \n and \t as U+FFFD.
std::string HtmlEscape(std::string_view text);

// Who waits on whom in an incident: the evidence lines "rank W (node) waits on <what>, blocked
// by rank B (node)" (core/attribution.cc), the suspects, and for each suspect the waiters its
// `why` counts ("N ranks wait on it directly") beyond those the evidence names.
struct WaitEdge {
  int waiter = -1;
  int waited_on = -1;
  std::string what;  // "allreduce #812 of comm 3fa2..."
};
struct WaitForGraph {
  std::vector<proto::Suspect> suspects;
  std::vector<WaitEdge> edges;
  std::map<int, int> unnamed_waiters;  // suspect rank -> waiters counted but not named
};
WaitForGraph WaitFor(const proto::Incident& incident);

// A row of the ranks panel: one node, or a group of consecutive nodes (natural order).
struct RankGroup {
  std::string first_node, last_node;
  int nodes = 0;
  int ranks = 0;
  std::map<std::string, int> states;  // state -> ranks ("" is "unknown")
  int64_t min_step = -1, max_step = -1;
  double max_step_ms = 0;
};
std::vector<RankGroup> GroupRanks(const std::vector<RankRow>& ranks, size_t max_rows = kGroupRowsMax);

// The ranks not running, in rank order, at most kNotableMax.
std::vector<const RankRow*> NotableRanks(const Snapshot& s);

// "node2" before "node10".
bool NaturalLess(std::string_view a, std::string_view b);

// The whole page; refresh_s > 0 adds a meta refresh.
std::string RenderHtml(const Snapshot& s, int refresh_s);
// One panel as JSON (UTF-8; invalid bytes replaced; render_json.cc).
std::string RenderJson(const Snapshot& s, Panel panel);

}  // namespace ft::master::page

#endif  // FT_FTMASTER_PAGE_RENDER_H_
