#include "ftmaster/page/render.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "common/names.h"
#include "ftmaster/core/goodput.h"
#include "ftmaster/core/text.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"

namespace ft::master::page {

namespace {

std::string E(std::string_view text) { return HtmlEscape(text); }

std::string Ms(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const int64_t s = unix_ms / 1000;
  return fmt::format("{:02}:{:02}:{:02}.{:03} UTC", (s / 3600) % 24, (s / 60) % 60, s % 60, unix_ms % 1000);
}

// A job's or a rank's state as a colour: on track, neither, or wrong.
std::string StateClass(std::string_view state) {
  if (state == "running" || state == "finished") return "ok";
  if (state == "" || state == "unknown" || state == "exited" || state == "stopping") return "unk";
  return "bad";  // dead, stopped, disabled, garbled
}

// Length of the valid UTF-8 sequence at text[i], 0 if none.
size_t Utf8Len(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(text[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
    return 0;
  }
  return n;
}

constexpr Named<Panel> kPanelNames[] = {
    {Panel::kJob, "job"}, {Panel::kRanks, "ranks"}, {Panel::kIncidents, "incidents"},
    {Panel::kCheckpoints, "checkpoints"}, {Panel::kGoodput, "goodput"}, {Panel::kNodes, "nodes"}};
static_assert(NamesAreUnique(kPanelNames));
}  // namespace

const char* PanelName(Panel p) { return NameIn(kPanelNames, p); }

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&#39;"; ++i; continue;
      default: break;
    }
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7F) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    const size_t n = Utf8Len(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

WaitForGraph WaitFor(const proto::Incident& incident) {
  WaitForGraph g;
  g.suspects = incident.suspects;
  static const std::regex kLine(R"(^rank (\d+)(?: \(.*\))? waits on (.*?)(?: \(GPU started [^)]*\))?, blocked by rank (\d+)(?: \(.*\))?$)");
  static const std::regex kDirect(R"((\d+) ranks? wait on it directly)");
  std::map<int, int> named;  // waited-on -> distinct waiters named
  std::set<std::pair<int, int>> seen;
  for (const std::string& line : incident.evidence) {
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) continue;
    WaitEdge e;
    e.waiter = std::stoi(m[1].str().substr(0, 9));
    e.what = m[2].str();
    e.waited_on = std::stoi(m[3].str().substr(0, 9));
    if (!seen.insert({e.waiter, e.waited_on}).second) continue;
    ++named[e.waited_on];
    g.edges.push_back(std::move(e));
  }
  for (const proto::Suspect& s : incident.suspects) {
    std::smatch m;
    if (!std::regex_search(s.why, m, kDirect)) continue;
    const int direct = std::stoi(m[1].str().substr(0, 9));
    const int more = direct - named[s.rank];
    if (more > 0) g.unnamed_waiters[s.rank] = more;
  }
  return g;
}

std::vector<RankGroup> GroupRanks(const std::vector<RankRow>& ranks, size_t max_rows) {
  std::map<std::string, std::vector<const RankRow*>> by_node;
  for (const RankRow& r : ranks) by_node[r.node].push_back(&r);
  std::vector<std::string> nodes;
  nodes.reserve(by_node.size());
  for (const auto& [node, rows] : by_node) nodes.push_back(node);
  std::sort(nodes.begin(), nodes.end(), [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  const size_t per = max_rows == 0 ? nodes.size() : std::max<size_t>(1, (nodes.size() + max_rows - 1) / max_rows);
  std::vector<RankGroup> out;
  for (size_t i = 0; i < nodes.size(); i += per) {
    RankGroup g;
    g.first_node = nodes[i];
    const size_t end = std::min(nodes.size(), i + per);
    g.last_node = nodes[end - 1];
    g.nodes = static_cast<int>(end - i);
    for (size_t k = i; k < end; ++k) {
      for (const RankRow* r : by_node[nodes[k]]) {
        ++g.ranks;
        ++g.states[r->state.empty() ? "unknown" : r->state];
        if (r->step >= 0) {
          g.min_step = g.min_step < 0 ? r->step : std::min(g.min_step, r->step);
          g.max_step = std::max(g.max_step, r->step);
        }
        g.max_step_ms = std::max(g.max_step_ms, r->step_ms);
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<const RankRow*> NotableRanks(const Snapshot& s) {
  std::vector<const RankRow*> out;
  for (const RankRow& r : s.ranks) {
    if (r.state != "running" && out.size() < kNotableMax) out.push_back(&r);
  }
  return out;
}

namespace {

// ---- HTML --------------------------------------------------------------------------------------

constexpr const char* kCss = R"(
body{font:14px/1.35 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 18px}header h1{margin:0;font-size:18px}
main{padding:10px 18px;display:grid;gap:14px}
section{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:10px 14px}
h2{font-size:15px;margin:12px 0 6px}section>h2:first-child{margin-top:0}table{border-collapse:collapse;font-size:13px}
td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eceef2;vertical-align:top}
.ok{color:#17803d}.bad{color:#b42318;font-weight:600}.unk{color:#8a6d00}
.garbled{color:#b42318;font-family:monospace;background:#fff1f0}
.mono{font-family:monospace;font-size:12px}.dim{color:#667085}
.incident{border-top:1px solid #eceef2;padding-top:6px;margin-top:6px}
svg text{font:12px system-ui,sans-serif}svg .suspect rect{fill:#fde3e1;stroke:#b42318;stroke-width:2}
svg .waiter rect{fill:#e8f0fe;stroke:#3b6fd8}svg line{stroke:#444;stroke-width:1.5}
)";

std::string StatesText(const std::map<std::string, int>& states) {
  std::string out;
  for (const auto& [state, n] : states) {
    out += fmt::format("{}<span class=\"{}\">{} {}</span>", out.empty() ? "" : ", ", StateClass(state), n, E(state));
  }
  return out;
}

void JobHtml(const Snapshot& s, std::string* out) {
  *out += "<section id=\"job\"><h2>Job</h2><table>";
  *out += fmt::format("<tr><th>job</th><td>{}</td></tr>", E(s.job));
  *out += fmt::format("<tr><th>state</th><td class=\"{}\" data-state=\"{}\">{}</td></tr>", StateClass(s.job_state),
                      E(s.job_state), E(s.job_state));
  *out += fmt::format("<tr><th>leader</th><td>{}</td></tr>", s.leader.empty() ? "(none)" : E(s.leader));
  *out += fmt::format("<tr><th>ranks</th><td>{}</td></tr>", s.ranks.size());
  *out += fmt::format("<tr><th>incidents</th><td>{}{}</td></tr>", s.incidents_total,
                      s.open_incident ? " (a window is open: the master is deciding)" : "");
  *out += fmt::format("<tr><th>evicted nodes</th><td>{}</td></tr>", s.evicted_nodes);
  *out += fmt::format("<tr><th>Redis</th><td class=\"{}\">{}</td></tr>", s.redis_up ? "ok" : "bad",
                      s.redis_up ? "up" : "down: " + E(s.redis_error));
  *out += fmt::format("<tr><th>read at</th><td>{}</td></tr></table>", Ms(s.taken_unix_ms));
  if (!s.garbled.empty()) {
    *out += "<h2>Garbled values</h2><table>";
    for (const Garbled& g : s.garbled) {
      *out += fmt::format("<tr><td>{}</td><td class=\"garbled\">garbled: {}</td><td class=\"dim\">{}</td></tr>",
                          E(g.where), E(g.raw), E(g.why));
    }
    *out += "</table>";
  }
  *out += "</section>";
}

void RankRowHtml(const RankRow& r, std::string* out) {
  *out += fmt::format("<tr data-rank=\"{}\"><td>{}</td><td>{}</td><td class=\"{}\">{}{}</td><td>{}</td><td>{}</td></tr>",
                      r.rank, r.rank, E(r.node), StateClass(r.state), E(r.state.empty() ? "unknown" : r.state),
                      r.reported ? "" : " (no report)", r.step >= 0 ? std::to_string(r.step) : "-",
                      r.step_ms > 0 ? HumanMs(r.step_ms) : "-");
}

void RanksHtml(const Snapshot& s, std::string* out) {
  const std::vector<RankGroup> groups = GroupRanks(s.ranks);
  const bool by_group = !groups.empty() && groups.front().nodes > 1;
  std::map<std::string, int> states;
  for (const RankRow& r : s.ranks) ++states[r.state.empty() ? "unknown" : r.state];
  *out += fmt::format("<section id=\"ranks\"><h2>Ranks</h2><p>{} ranks: {}{}</p>", s.ranks.size(), StatesText(states),
                      s.ranks_read_unix_ms > 0 && s.ranks_read_unix_ms + 1500 < s.taken_unix_ms
                          ? fmt::format(" <span class=\"dim\">(read at {})</span>", Ms(s.ranks_read_unix_ms)) : "");
  if (s.ranks.empty()) {
    *out += "<p class=\"dim\">no rank has joined (is ftworker running on the nodes, with this job?)</p></section>";
    return;
  }
  *out += fmt::format("<h2>By {}</h2><table><tr><th>node{}</th><th>nodes</th><th>ranks</th><th>states</th>"
                      "<th>steps</th><th>slowest step</th></tr>",
                      by_group ? "group" : "node", by_group ? "s" : "");
  for (const RankGroup& g : groups) {
    const std::string name = g.nodes > 1 ? E(g.first_node) + " &hellip; " + E(g.last_node) : E(g.first_node);
    const std::string steps = g.min_step < 0 ? "-" : g.min_step == g.max_step ? std::to_string(g.min_step)
                                                   : fmt::format("{}&ndash;{}", g.min_step, g.max_step);
    *out += fmt::format("<tr class=\"group\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        name, g.nodes, g.ranks, StatesText(g.states), steps,
                        g.max_step_ms > 0 ? HumanMs(g.max_step_ms) : "-");
  }
  *out += "</table>";
  const std::vector<const RankRow*> notable = NotableRanks(s);
  if (s.ranks.size() <= kRankRowsMax) {
    *out += "<h2>Each rank</h2><table><tr><th>rank</th><th>node</th><th>state</th><th>step</th><th>step time</th></tr>";
    for (const RankRow& r : s.ranks) RankRowHtml(r, out);
    *out += "</table>";
  } else if (!notable.empty()) {
    *out += fmt::format("<h2>Not running{}</h2><table><tr><th>rank</th><th>node</th><th>state</th><th>step</th>"
                        "<th>step time</th></tr>",
                        notable.size() == kNotableMax ? fmt::format(" (the first {})", kNotableMax) : "");
    for (const RankRow* r : notable) RankRowHtml(*r, out);
    *out += "</table>";
  }
  *out += "</section>";
}

// The wait-for graph: waiters on the left, the ranks they wait on (suspects marked) on the right.
void GraphSvg(const WaitForGraph& g, std::string* out) {
  std::vector<int> right;  // waited on: suspects first, then others waited on
  for (const proto::Suspect& s : g.suspects) {
    if (std::find(right.begin(), right.end(), s.rank) == right.end()) right.push_back(s.rank);
  }
  for (const WaitEdge& e : g.edges) {
    if (std::find(right.begin(), right.end(), e.waited_on) == right.end()) right.push_back(e.waited_on);
  }
  std::vector<int> left;
  size_t waiters_left_off = 0;
  for (const WaitEdge& e : g.edges) {
    if (std::find(right.begin(), right.end(), e.waiter) != right.end()) continue;
    if (std::find(left.begin(), left.end(), e.waiter) != left.end()) continue;
    if (left.size() < kGraphWaitersMax) {
      left.push_back(e.waiter);
    } else {
      ++waiters_left_off;
    }
  }
  int unnamed = 0;
  for (const auto& [rank, n] : g.unnamed_waiters) unnamed += n;
  const size_t left_rows = left.size() + (unnamed > 0 || waiters_left_off > 0 ? 1 : 0);
  const size_t rows = std::max<size_t>({left_rows, right.size(), 1});
  const int row_h = 30, w = 620, box_w = 190, box_h = 22;
  const int h = static_cast<int>(rows) * row_h + 12;
  const int lx = 10, rx = w - box_w - 10;
  auto y_of = [&](size_t i) { return 6 + static_cast<int>(i) * row_h; };
  std::map<int, std::string> node_of;
  std::set<int> suspect;
  for (const proto::Suspect& s : g.suspects) {
    node_of[s.rank] = s.node;
    suspect.insert(s.rank);
  }
  *out += fmt::format("<svg class=\"waitfor\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"wait-for graph\">",
                      w, h, w, h);
  *out += "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
          "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\" fill=\"#444\"/></marker></defs>";
  auto index_in = [](const std::vector<int>& v, int r) {
    return static_cast<size_t>(std::find(v.begin(), v.end(), r) - v.begin());
  };
  // Edges first (under the boxes).
  for (const WaitEdge& e : g.edges) {
    const size_t ti = index_in(right, e.waited_on);
    int x1 = 0, y1 = 0;
    const size_t li = index_in(left, e.waiter);
    if (li < left.size()) {
      x1 = lx + box_w;
      y1 = y_of(li) + box_h / 2;
    } else if (size_t ri = index_in(right, e.waiter); ri < right.size()) {
      x1 = rx;  // a waited-on rank that waits too: from its left edge
      y1 = y_of(ri) + box_h / 2;
    } else {
      continue;  // a waiter left off the drawing (counted in the "more" box)
    }
    *out += fmt::format("<g class=\"edge\" data-waiter=\"{}\" data-waited-on=\"{}\"><title>rank {} waits on rank {}: {}</title>"
                        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" marker-end=\"url(#arrow)\"/></g>",
                        e.waiter, e.waited_on, e.waiter, e.waited_on, E(e.what), x1, y1, rx - 2,
                        y_of(ti) + box_h / 2);
  }
  if (unnamed > 0 || waiters_left_off > 0) {
    const int y = y_of(left.size()) + box_h / 2;
    for (const auto& [rank, n] : g.unnamed_waiters) {
      *out += fmt::format("<g class=\"edge more\" data-waiter=\"more\" data-count=\"{}\" data-waited-on=\"{}\">"
                          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke-dasharray=\"4 3\" marker-end=\"url(#arrow)\"/></g>",
                          n, rank, lx + box_w, y, rx - 2, y_of(index_in(right, rank)) + box_h / 2);
    }
  }
  for (size_t i = 0; i < left.size(); ++i) {
    *out += fmt::format("<g class=\"rank waiter\" data-rank=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"4\"/>"
                        "<text x=\"{}\" y=\"{}\">rank {}</text></g>",
                        left[i], lx, y_of(i), box_w, box_h, lx + 8, y_of(i) + 15, left[i]);
  }
  if (unnamed > 0 || waiters_left_off > 0) {
    const size_t more = static_cast<size_t>(unnamed) + waiters_left_off;
    *out += fmt::format("<g class=\"rank waiter more\" data-count=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                        "rx=\"4\" stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\">{} more rank{} waiting</text></g>",
                        more, lx, y_of(left.size()), box_w, box_h, lx + 8, y_of(left.size()) + 15, more,
                        more == 1 ? "" : "s");
  }
  for (size_t i = 0; i < right.size(); ++i) {
    const bool is_suspect = suspect.count(right[i]) > 0;
    const auto node = node_of.find(right[i]);
    std::string label = fmt::format("rank {}", right[i]);
    if (node != node_of.end() && !node->second.empty()) {
      std::string n = node->second.size() > 14 ? node->second.substr(0, 13) + "~" : node->second;
      label += " (" + E(n) + ")";
    }
    *out += fmt::format("<g class=\"rank {}\" data-rank=\"{}\"{}><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"4\"/>"
                        "<text x=\"{}\" y=\"{}\">{}{}</text></g>",
                        is_suspect ? "suspect" : "waited", right[i], is_suspect ? " data-suspect=\"1\"" : "", rx, y_of(i),
                        box_w, box_h, rx + 8, y_of(i) + 15, label, is_suspect ? " &#9888; suspect" : "");
  }
  *out += "</svg>";
}

void IncidentsHtml(const Snapshot& s, std::string* out) {
  *out += fmt::format("<section id=\"incidents\"><h2>Incidents</h2><p>{} in the stream{}</p>", s.incidents_total,
                      s.incidents_total > static_cast<int64_t>(s.incidents.size())
                          ? fmt::format(", the newest {} shown", s.incidents.size()) : "");
  for (const Garbled& g : s.garbled) {
    if (g.where.rfind("incident", 0) != 0) continue;
    *out += fmt::format("<div class=\"incident\"><b>{}</b>: <span class=\"garbled\">garbled: {}</span></div>", E(g.where),
                        E(g.raw));
  }
  // Newest first: the timeline reads down into the past.
  for (auto it = s.incidents.rbegin(); it != s.incidents.rend(); ++it) {
    const proto::Incident& i = it->incident;
    *out += fmt::format("<div class=\"incident\" data-incident=\"{}\" data-kind=\"{}\"><b>{}</b> {} &mdash; "
                        "decision <b>{}</b>, confidence {:.2f}; first event {}, decided {} ({})",
                        E(i.id), E(i.kind), E(i.kind), E(i.id), E(i.decision.empty() ? "(deciding)" : i.decision),
                        i.confidence, Ms(i.first_event_unix_ms), Ms(i.decided_unix_ms),
                        i.decide_ms > 0 ? HumanMs(i.decide_ms) : "-");
    if (!i.message.empty()) *out += "<div>" + E(i.message) + "</div>";
    if (!i.suspects.empty()) {
      *out += "<table><tr><th>suspect</th><th>node</th><th>why</th></tr>";
      for (const proto::Suspect& sp : i.suspects) {
        *out += fmt::format("<tr class=\"suspect\" data-rank=\"{}\"><td class=\"bad\">rank {}</td><td>{}</td><td>{}</td></tr>",
                            sp.rank, sp.rank, E(sp.node), E(sp.why));
      }
      *out += "</table>";
    }
    const WaitForGraph g = WaitFor(i);
    if (!g.edges.empty() || !g.unnamed_waiters.empty()) {
      GraphSvg(g, out);
    } else {
      *out += "<div class=\"dim\">no wait-for edges in the evidence</div>";
    }
    if (!i.evicted.empty()) {
      *out += "<div>evicted: ";
      for (const proto::Eviction& e : i.evicted) *out += E(e.node) + " (" + E(e.why) + ") ";
      *out += "</div>";
    }
    if (!i.evidence.empty()) {
      *out += "<details><summary>evidence</summary><ul class=\"mono\">";
      for (const std::string& line : i.evidence) *out += "<li>" + E(line) + "</li>";
      *out += "</ul></details>";
    }
    *out += "</div>";
  }
  *out += "</section>";
}

void CheckpointsHtml(const Snapshot& s, std::string* out) {
  *out += "<section id=\"checkpoints\"><h2>Checkpoints</h2>";
  if (s.plan) {
    *out += fmt::format("<p data-plan-step=\"{}\">restore plan {}: {}{}</p>", s.plan->step, s.plan->version,
                        s.plan->step >= 0 ? fmt::format("restores step {} ({} ranks)", s.plan->step, s.plan->ranks.size())
                                          : std::string("no verified checkpoint"),
                        s.plan->settling.empty() ? "" : ", settling: " + E(s.plan->settling));
  } else {
    *out += "<p class=\"dim\">no restore plan yet</p>";
  }
  if (s.checkpoints.empty()) {
    *out += "<p class=\"dim\">no checkpoint steps</p></section>";
    return;
  }
  *out += "<table><tr><th>step</th><th>verdict</th><th>shards verified</th><th>copies</th><th>why</th></tr>";
  for (const CheckpointRow& c : s.checkpoints) {
    if (c.verdict) {
      const std::string state = proto::VerdictStateName(c.verdict->state);
      *out += fmt::format("<tr data-step=\"{}\"><td>{}</td><td class=\"{}\">{}</td><td>{}/{}</td><td>{}</td><td>{}</td></tr>",
                          c.step, c.step, state == "verified" ? "ok" : "bad", E(state), c.verdict->verified_shards,
                          c.verdict->shards, c.verdict->copies, E(c.verdict->why));
    } else {
      *out += fmt::format("<tr data-step=\"{}\"><td>{}</td><td class=\"unk\">unjudged</td><td>-</td><td>-</td><td></td></tr>",
                          c.step, c.step);
    }
  }
  *out += "</table></section>";
}

void GoodputHtml(const Snapshot& s, std::string* out) {
  *out += "<section id=\"goodput\"><h2>Goodput</h2>";
  if (!s.goodput) {
    *out += "<p class=\"dim\">nothing accounted yet</p></section>";
    return;
  }
  const proto::Goodput& g = *s.goodput;
  const double total = GoodputLedger::TotalOf(g.rank_s);
  *out += fmt::format("<p>ETTR <b data-ettr=\"{:.4f}\">{:.3f}</b> over {:.0f} rank-s; now {}{}</p>", GoodputLedger(g).Ettr(),
                      GoodputLedger(g).Ettr(), total, proto::GoodputCauseName(g.phase),
                      g.furthest_step >= 0 ? fmt::format("; furthest step {}", g.furthest_step) : "");
  // One bar, a segment per cause.
  static const char* kColors[] = {"#17803d", "#8a6d00", "#b42318", "#d9480f", "#7048e8", "#1971c2", "#e8590c", "#868e96"};
  const int bw = 600;
  *out += fmt::format("<svg class=\"goodput-bar\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"22\">", bw);
  double x = 0;
  size_t k = 0;
  for (proto::GoodputCause c : proto::kGoodputCauses) {
    const double v = g.rank_s[static_cast<size_t>(c)];
    const double width = total > 0 ? bw * v / total : 0;
    *out += fmt::format("<rect data-cause=\"{}\" x=\"{:.1f}\" y=\"0\" width=\"{:.1f}\" height=\"22\" fill=\"{}\">"
                        "<title>{} {:.1f} rank-s</title></rect>",
                        proto::GoodputCauseName(c), x, width, kColors[k % 8], proto::GoodputCauseName(c), v);
    x += width;
    ++k;
  }
  *out += "</svg><table><tr><th>cause</th><th>rank-s</th><th>wall</th><th>share</th></tr>";
  k = 0;
  for (proto::GoodputCause c : proto::kGoodputCauses) {
    const double v = g.rank_s[static_cast<size_t>(c)];
    *out += fmt::format("<tr data-cause=\"{}\"><td><span style=\"color:{}\">&#9632;</span> {}</td><td>{:.1f}</td><td>{}</td>"
                        "<td>{:.1f}%</td></tr>",
                        proto::GoodputCauseName(c), kColors[k % 8], proto::GoodputCauseName(c), v,
                        HumanMs(g.wall_s[static_cast<size_t>(c)] * 1000.0), total > 0 ? 100.0 * v / total : 0.0);
    ++k;
  }
  *out += "</table>";
  for (const proto::GoodputIncident& i : g.incidents) {
    *out += fmt::format("<div>incident {}: lost {:.1f} rank-s{}</div>", E(i.id.empty() ? "(deciding)" : i.id),
                        GoodputLedger::TotalOf(i.rank_s), i.open ? ", still costing" : "");
  }
  *out += "</section>";
}

void NodesHtml(const Snapshot& s, std::string* out) {
  *out += "<section id=\"nodes\"><h2>Node history</h2>";
  if (!s.node_keys_present) {
    *out += "<p class=\"dim\">no node history in this Redis (ft:nodes, ft:cordon absent)</p></section>";
    return;
  }
  if (!s.cordons.empty()) {
    *out += "<table><tr><th>cordoned</th><th>reason</th><th>since</th><th>active</th></tr>";
    for (const proto::CordonEntry& c : s.cordons) {
      *out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", E(c.node), E(c.reason), Ms(c.unix_ms),
                          c.Active(s.taken_unix_ms) ? "yes" : "lapsed");
    }
    *out += "</table>";
  }
  if (s.node_history.empty()) {
    *out += "<p class=\"dim\">none of the job's nodes has a history</p>";
  } else {
    *out += "<table><tr><th>node</th><th>records</th><th>newest</th></tr>";
    for (const NodeHistoryRow& n : s.node_history) {
      std::string newest;
      for (const proto::NodeRecord& r : n.records) {
        newest += fmt::format("{}{} ({}{})", newest.empty() ? "" : "; ", proto::NodeRecordKindName(r.kind),
                              E(r.job.empty() ? "operator" : r.job), r.detail.empty() ? "" : ": " + E(r.detail));
      }
      *out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>", E(n.node), n.total, newest);
    }
    *out += "</table>";
  }
  *out += "</section>";
}

}  // namespace

std::string RenderHtml(const Snapshot& s, int refresh_s) {
  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">";
  if (refresh_s > 0) out += fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">", refresh_s);
  out += fmt::format("<title>ft: {}</title><style>{}</style></head><body>", E(s.job), kCss);
  out += fmt::format("<header><h1>ft job {} &mdash; <span data-state=\"{}\">{}</span></h1></header><main>", E(s.job),
                     E(s.job_state), E(s.job_state));
  JobHtml(s, &out);
  GoodputHtml(s, &out);
  IncidentsHtml(s, &out);
  RanksHtml(s, &out);
  CheckpointsHtml(s, &out);
  NodesHtml(s, &out);
  out += "</main></body></html>\n";
  return out;
}

}  // namespace ft::master::page
