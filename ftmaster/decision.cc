#include "ftmaster/decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace ft::master {
bool Acted(const proto::Incident& i) {
  return i.kind == "hang" || i.kind == "host-frozen" || i.kind == "crash" || i.kind == "transport-hang";
}

namespace {

bool CannotSave(const std::string& state) {
  return state == "dead" || state == "exited" || state == "stopped" || state == "disabled";
}

}  // namespace

Decision Decide(std::span<const proto::Incident> incidents, const Topology& topology,
                std::span<const proto::Membership> membership, bool sharded_optimizer) {
  Decision d;
  std::set<int> unhealthy;
  std::set<std::string> evict;
  std::vector<std::string> kept_nodes;  // transport hangs spanning nodes: not evicted
  bool any = false;
  bool bad_suspect = false;
  for (const proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    any = true;
    std::set<std::string> nodes;
    for (const proto::Suspect& s : incident.suspects) {
      if (s.rank < 0) bad_suspect = true;
      unhealthy.insert(s.rank);
      if (!s.node.empty()) nodes.insert(s.node);
    }
    if (incident.suspects.empty()) bad_suspect = true;  // stuck, but nobody named
    if (incident.kind == "transport-hang" && nodes.size() > 1) {
      kept_nodes.push_back(fmt::format("{} nodes of comm {:016x}", nodes.size(), incident.comm_id));
      continue;
    }
    evict.insert(nodes.begin(), nodes.end());
  }
  if (!any) {
    d.reason = "no hang or crash: nothing to decide";
    return d;
  }
  d.evict_nodes.assign(evict.begin(), evict.end());
  std::string evict_note;
  if (!kept_nodes.empty()) {
    evict_note = "; not evicting the " + kept_nodes.front() +
                 " (a transport hang across nodes does not say which link failed)";
  }

  d.decision = "stop";
  if (!topology.known()) {
    d.reason = "topology " + topology.Describe() + ": cannot tell whether a full checkpoint "
               "exists, stopping without saving" + evict_note;
    return d;
  }
  if (bad_suspect) {
    d.reason = "a stuck rank could not be named, so no shard can be proven healthy: stopping "
               "without saving" + evict_note;
    return d;
  }
  for (int r : unhealthy) {
    if (r >= topology.world_size()) {
      d.reason = fmt::format("suspect rank {} is outside the topology ({}): stopping without "
                             "saving", r, topology.Describe()) + evict_note;
      return d;
    }
  }

  std::unordered_map<int, const proto::Membership*> by_rank;
  for (const proto::Membership& m : membership) {
    auto [it, inserted] = by_rank.emplace(m.rank, &m);
    if (!inserted && m.incarnation > it->second->incarnation) it->second = &m;
  }
  auto node_of = [&](int rank) -> std::string {
    auto it = by_rank.find(rank);
    return it == by_rank.end() ? std::string() : it->second->node;
  };
  auto healthy = [&](int rank) {
    if (unhealthy.count(rank)) return false;
    if (membership.empty()) return true;
    auto it = by_rank.find(rank);
    return it != by_rank.end() && !CannotSave(it->second->state);
  };

  for (int pp = 0; pp < topology.pp(); ++pp) {
    for (int tp = 0; tp < topology.tp(); ++tp) {
      const std::vector<int> replicas = topology.ShardRanks(tp, pp);
      if (sharded_optimizer) {
        for (int r : replicas) {
          if (!healthy(r)) {
            d.save.clear();
            d.reason = fmt::format(
                "optimizer state is sharded across DP and rank {} of shard tp={} pp={} is not "
                "healthy: no full checkpoint, stopping without saving", r, tp, pp) + evict_note;
            return d;
          }
          d.save.push_back(SaveTarget{r, node_of(r)});
        }
        continue;
      }
      // Every healthy replica saves: their digests are compared (ckpt_verify.h), which is what
      // catches a replica whose bytes silently differ.
      const size_t before = d.save.size();
      for (int r : replicas) {
        if (healthy(r)) d.save.push_back(SaveTarget{r, node_of(r)});
      }
      if (d.save.size() == before) {
        d.save.clear();
        d.reason = fmt::format(
            "no healthy DP replica of shard tp={} pp={} (ranks {}..): no full checkpoint, "
            "stopping without saving", tp, pp, replicas.front()) + evict_note;
        return d;
      }
    }
  }
  std::sort(d.save.begin(), d.save.end(),
            [](const SaveTarget& a, const SaveTarget& b) { return a.rank < b.rank; });
  d.decision = "save-then-stop";
  d.reason = fmt::format(
      "{} shards ({}) have a healthy {}: saving from {} ranks (every healthy replica, to be "
      "compared), then stopping{}",
      topology.tp() * topology.pp(), topology.Describe(),
      sharded_optimizer ? "full DP group (sharded optimizer)" : "DP replica", d.save.size(),
      evict_note);
  return d;
}

void ApplyDecision(const Decision& decision, std::span<proto::Incident> incidents) {
  for (proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    incident.decision = decision.decision;
    if (!decision.reason.empty()) {
      incident.message += incident.message.empty() ? decision.reason : "; " + decision.reason;
    }
  }
}

}  // namespace ft::master
