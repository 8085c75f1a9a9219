// The live page's panels as JSON (render.h): /api/<panel>.json, each a view of the snapshot
// (UTF-8; invalid bytes replaced).
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ftmaster/core/goodput.h"
#include "ftmaster/page/render.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"

namespace ft::master::page {

namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"; }


// ---- JSON --------------------------------------------------------------------------------------

Json GarbledJson(const std::vector<Garbled>& garbled) {
  Json list = Json::array();
  for (const Garbled& g : garbled) list.push_back({{"where", g.where}, {"raw", g.raw}, {"why", g.why}});
  return list;
}

Json JobJson(const Snapshot& s) {
  return {{"job", s.job},
          {"taken_unix_ms", s.taken_unix_ms},
          {"redis_up", s.redis_up},
          {"redis_error", s.redis_error},
          {"state", s.job_state},
          {"leader", s.leader.empty() ? Json(nullptr) : Json(s.leader)},
          {"open_incident", s.open_incident},
          {"evicted_nodes", s.evicted_nodes},
          {"ranks", s.ranks.size()},
          {"incidents", s.incidents_total},
          {"garbled", GarbledJson(s.garbled)}};
}


Json RankJson(const RankRow& r) {
  return {{"rank", r.rank}, {"node", r.node}, {"state", r.state.empty() ? "unknown" : r.state},
          {"step", r.step}, {"step_ms", r.step_ms}, {"reported", r.reported}};
}

Json RanksJson(const Snapshot& s) {
  const std::vector<RankGroup> groups = GroupRanks(s.ranks);
  std::map<std::string, int> states;
  std::set<std::string> nodes;
  for (const RankRow& r : s.ranks) {
    ++states[r.state.empty() ? "unknown" : r.state];
    nodes.insert(r.node);
  }
  Json j = {{"ranks", s.ranks.size()}, {"nodes", nodes.size()}, {"read_unix_ms", s.ranks_read_unix_ms}, {"states", states}};
  const bool by_group = !groups.empty() && groups.front().nodes > 1;
  j["grouped_by"] = by_group ? "node-group" : "node";
  Json rows = Json::array();
  for (const RankGroup& g : groups) {
    rows.push_back({{"first_node", g.first_node}, {"last_node", g.last_node}, {"nodes", g.nodes},
                    {"ranks", g.ranks}, {"states", g.states}, {"min_step", g.min_step},
                    {"max_step", g.max_step}, {"max_step_ms", g.max_step_ms}});
  }
  j["groups"] = std::move(rows);
  Json notable = Json::array();
  for (const RankRow* r : NotableRanks(s)) notable.push_back(RankJson(*r));
  j["not_running"] = std::move(notable);
  if (s.ranks.size() <= kRankRowsMax) {
    Json list = Json::array();
    for (const RankRow& r : s.ranks) list.push_back(RankJson(r));
    j["list"] = std::move(list);
  }
  return j;
}

Json IncidentJson(const IncidentRow& row) {
  const proto::Incident& i = row.incident;
  Json suspects = Json::array();
  for (const proto::Suspect& s : i.suspects) suspects.push_back({{"rank", s.rank}, {"node", s.node}, {"why", s.why}});
  const WaitForGraph g = WaitFor(i);
  Json edges = Json::array();
  for (const WaitEdge& e : g.edges) edges.push_back({{"waiter", e.waiter}, {"waited_on", e.waited_on}, {"what", e.what}});
  Json unnamed = Json::object();
  for (const auto& [rank, n] : g.unnamed_waiters) unnamed[std::to_string(rank)] = n;
  Json evicted = Json::array();
  for (const proto::Eviction& e : i.evicted) evicted.push_back({{"node", e.node}, {"why", e.why}});
  return {{"stream_id", row.stream_id}, {"id", i.id}, {"kind", i.kind}, {"decision", i.decision},
          {"confidence", i.confidence}, {"first_event_unix_ms", i.first_event_unix_ms},
          {"decided_unix_ms", i.decided_unix_ms}, {"decide_ms", i.decide_ms}, {"message", i.message},
          {"suspects", std::move(suspects)}, {"wait_for", {{"edges", std::move(edges)}, {"unnamed_waiters", std::move(unnamed)}}},
          {"evidence", i.evidence}, {"evicted", std::move(evicted)}};
}

Json IncidentsJson(const Snapshot& s) {
  Json list = Json::array();
  for (const IncidentRow& r : s.incidents) list.push_back(IncidentJson(r));
  Json garbled = Json::array();
  for (const Garbled& g : s.garbled) {
    if (g.where.rfind("incident", 0) == 0) garbled.push_back({{"where", g.where}, {"raw", g.raw}, {"why", g.why}});
  }
  return {{"total", s.incidents_total}, {"shown", s.incidents.size()}, {"incidents", std::move(list)},
          {"garbled", std::move(garbled)}};
}

Json CheckpointsJson(const Snapshot& s) {
  Json list = Json::array();
  for (const CheckpointRow& c : s.checkpoints) {
    Json r = {{"step", c.step}};
    if (c.verdict) {
      r["verdict"] = proto::VerdictStateName(c.verdict->state);
      r["shards"] = c.verdict->shards;
      r["verified_shards"] = c.verdict->verified_shards;
      r["copies"] = c.verdict->copies;
      r["sdc_ranks"] = c.verdict->sdc_ranks;
      r["why"] = c.verdict->why;
    } else {
      r["verdict"] = "unjudged";
    }
    list.push_back(std::move(r));
  }
  Json plan = nullptr;
  if (s.plan) {
    plan = {{"version", s.plan->version}, {"step", s.plan->step}, {"ranks", s.plan->ranks.size()},
            {"settling", s.plan->settling}, {"final", s.plan->settling.empty()}};
  }
  return {{"steps", std::move(list)}, {"restore_plan", std::move(plan)}};
}

Json GoodputJson(const Snapshot& s) {
  if (!s.goodput) return {{"ettr", nullptr}};
  const proto::Goodput& g = *s.goodput;
  Json rank = Json::object(), wall = Json::object();
  for (proto::GoodputCause c : proto::kGoodputCauses) {
    rank[proto::GoodputCauseName(c)] = g.rank_s[static_cast<size_t>(c)];
    wall[proto::GoodputCauseName(c)] = g.wall_s[static_cast<size_t>(c)];
  }
  Json incidents = Json::array();
  for (const proto::GoodputIncident& i : g.incidents) {
    incidents.push_back({{"id", i.id}, {"lost_rank_s", GoodputLedger::TotalOf(i.rank_s)}, {"open", i.open}});
  }
  return {{"ettr", GoodputLedger(g).Ettr()}, {"phase", proto::GoodputCauseName(g.phase)},
          {"furthest_step", g.furthest_step}, {"rank_s", std::move(rank)}, {"wall_s", std::move(wall)},
          {"incidents", std::move(incidents)}};
}

Json NodesJson(const Snapshot& s) {
  Json cordons = Json::array();
  for (const proto::CordonEntry& c : s.cordons) {
    cordons.push_back({{"node", c.node}, {"reason", c.reason}, {"unix_ms", c.unix_ms},
                       {"until_unix_ms", c.until_unix_ms}, {"active", c.Active(s.taken_unix_ms)}});
  }
  Json nodes = Json::array();
  for (const NodeHistoryRow& n : s.node_history) {
    Json records = Json::array();
    for (const proto::NodeRecord& r : n.records) {
      records.push_back({{"kind", proto::NodeRecordKindName(r.kind)}, {"job", r.job}, {"incident", r.incident},
                         {"unix_ms", r.unix_ms}, {"detail", r.detail}});
    }
    nodes.push_back({{"node", n.node}, {"records", n.total}, {"newest", std::move(records)}});
  }
  return {{"present", s.node_keys_present}, {"cordons", std::move(cordons)}, {"nodes", std::move(nodes)}};
}

}  // namespace

std::string RenderJson(const Snapshot& s, Panel panel) {
  switch (panel) {
    case Panel::kJob: return Dump(JobJson(s));
    case Panel::kRanks: return Dump(RanksJson(s));
    case Panel::kIncidents: return Dump(IncidentsJson(s));
    case Panel::kCheckpoints: return Dump(CheckpointsJson(s));
    case Panel::kGoodput: return Dump(GoodputJson(s));
    case Panel::kNodes: return Dump(NodesJson(s));
  }
  return "{}\n";
}

}  // namespace ft::master::page
