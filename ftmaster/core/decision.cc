#include "ftmaster/core/decision.h"

#include "ftmaster/core/hw_evidence.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace ft::master {
bool Acted(const proto::Incident& i) {
  using proto::IncidentKind;
  std::optional<IncidentKind> k = proto::ParseIncidentKind(i.kind);
  return k == IncidentKind::kHang || k == IncidentKind::kHostFrozen || k == IncidentKind::kCrash ||
         k == IncidentKind::kTransportHang;
}

namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

int PriorFailures(const std::map<std::string, int>* prior_failures, const std::string& node) {
  if (prior_failures == nullptr) return 0;
  auto it = prior_failures->find(node);
  return it == prior_failures->end() ? 0 : it->second;
}

// Which suspect nodes are evicted, and why. A hang (a stuck kernel or host thread) evicts its
// node as it always did. A crash or a stopped process evicts only with evidence against the node:
// a critical hardware signal there (hw_evidence.h), for a stopped process every rank of the node
// stopped (a frozen host), or an earlier crash or stop there within the hour (prior_failures). A transport hang whose members share a node evicts it; across
// nodes it evicts only the nodes whose NIC port reported a link failure (the link named), none
// when no port did.
std::map<std::string, std::string> EvictedNodes(std::span<const proto::Incident> incidents,
                                                std::span<const proto::Membership> membership,
                                                const std::map<std::string, int>* prior_failures,
                                                std::vector<std::string>* kept_nodes,
                                                std::vector<std::string>* kept_software) {
  std::map<std::string, std::string> evict;
  std::set<int> frozen;  // suspects of host-frozen incidents
  for (const proto::Incident& incident : incidents) {
    if (!Acted(incident) || !proto::Is(incident, proto::IncidentKind::kHostFrozen)) continue;
    for (const proto::Suspect& s : incident.suspects) frozen.insert(s.rank);
  }
  // Every rank membership lists on `node` is frozen (and there is at least one).
  auto host_frozen = [&](const std::string& node) {
    bool any_rank = false;
    for (const proto::Membership& m : membership) {
      if (m.node != node || m.rank < 0 || proto::ProcessGone(m.state)) continue;
      any_rank = true;
      if (!frozen.count(m.rank)) return false;
    }
    return any_rank || membership.empty();
  };
  auto evidence = [&](const proto::Incident& incident, const std::string& node) -> std::string {
    std::vector<const proto::HwSignal*> critical = CriticalOn(incident, node);
    return critical.empty() ? std::string() : DescribeSignal(*critical.front());
  };
  for (const proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    std::set<std::string> nodes;
    for (const proto::Suspect& s : incident.suspects) {
      if (!s.node.empty()) nodes.insert(s.node);
    }
    const bool crash = proto::Is(incident, proto::IncidentKind::kCrash);
    const bool stopped = proto::Is(incident, proto::IncidentKind::kHostFrozen);
    if (proto::Is(incident, proto::IncidentKind::kTransportHang) && nodes.size() > 1) {
      std::map<std::string, std::string> links;
      for (const std::string& node : nodes) {
        for (const proto::HwSignal* s : CriticalOn(incident, node)) {
          if (s->source == "rdma") {
            links.emplace(node, "its NIC's link failed during a transport hang: " + DescribeSignal(*s));
          }
        }
      }
      if (!links.empty() && links.size() < nodes.size()) {
        evict.insert(links.begin(), links.end());
      } else {
        kept_nodes->push_back(fmt::format("{} nodes of comm {:016x}", nodes.size(), incident.comm_id));
      }
      continue;
    }
    for (const std::string& node : nodes) {
      const std::string against = evidence(incident, node);
      if (crash || stopped) {
        if (!against.empty()) {
          evict.emplace(node, fmt::format("a {} with hardware evidence: {}", incident.kind, against));
        } else if (stopped && host_frozen(node)) {
          evict.emplace(node, "host frozen: every rank on it stopped");
        } else if (const int prior = PriorFailures(prior_failures, node); prior > 0) {
          evict.emplace(node, fmt::format("repeated failures: a {} after {} earlier crash{} or stop{} on it within the hour",
                                          incident.kind, prior, prior == 1 ? "" : "es", prior == 1 ? "" : "s"));
        } else {
          kept_software->push_back(node);
        }
        continue;
      }
      evict.emplace(node, against.empty() ? fmt::format("a {} suspect", incident.kind)
                                          : fmt::format("a {} suspect; hardware: {}", incident.kind, against));
    }
  }
  for (const auto& [node, why] : evict) {
    kept_software->erase(std::remove(kept_software->begin(), kept_software->end(), node), kept_software->end());
  }
  return evict;
}

}  // namespace

Decision Decide(std::span<const proto::Incident> incidents, const Topology& topology,
                std::span<const proto::Membership> membership, bool sharded_optimizer,
                const std::map<std::string, int>* prior_failures) {
  Decision d;
  std::set<int> unhealthy;
  std::set<int> hang_suspects;   // suspects of "hang" incidents (compute or host hang)
  std::map<int, std::string> other_suspects;  // of host-frozen, crash, transport-hang: kind
  std::vector<std::string> kept_nodes;  // transport hangs spanning nodes: not evicted
  std::vector<std::string> kept_software;  // crashed or stopped processes with no evidence against their node
  bool any = false;
  bool bad_suspect = false;
  for (const proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    any = true;
    std::set<std::string> nodes;
    for (const proto::Suspect& s : incident.suspects) {
      if (s.rank < 0) bad_suspect = true;
      unhealthy.insert(s.rank);
      if (proto::Is(incident, proto::IncidentKind::kHang)) {
        hang_suspects.insert(s.rank);
      } else {
        other_suspects.emplace(s.rank, incident.kind);
      }
      if (!s.node.empty()) nodes.insert(s.node);
    }
    if (incident.suspects.empty()) bad_suspect = true;  // stuck, but nobody named
  }
  if (!any) {
    d.reason = "no hang or crash: nothing to decide";
    return d;
  }
  const std::map<std::string, std::string> evict = EvictedNodes(incidents, membership, prior_failures, &kept_nodes, &kept_software);
  for (const auto& [node, why] : evict) {
    d.evict_nodes.push_back(node);
    d.evict_reasons.push_back(why);
  }
  std::string evict_note;
  if (!kept_nodes.empty()) {
    evict_note = "; not evicting the " + kept_nodes.front() +
                 " (a transport hang across nodes does not say which link failed)";
  }
  if (!kept_software.empty()) {
    evict_note += "; not evicting " + kept_software.front() +
                  ": a software failure with no evidence against the node (no hardware signal, "
                  "not a frozen host): it restarts in place and stays schedulable";
  }
  for (size_t i = 0; i < d.evict_nodes.size(); ++i) {
    evict_note += fmt::format("; evicting {}: {}", d.evict_nodes[i], d.evict_reasons[i]);
  }

  d.decision = proto::DecisionKind::kStop;
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

  // Every rank from here on is inside the topology (0 <= rank < world_size): the membership
  // is indexed by rank in a vector (131k ranks: a hash map of them cost most of the decision).
  const auto world = static_cast<size_t>(topology.world_size());
  std::vector<const proto::Membership*> by_rank(world, nullptr);
  for (const proto::Membership& m : membership) {
    if (m.rank < 0 || static_cast<size_t>(m.rank) >= world) continue;
    const proto::Membership*& slot = by_rank[static_cast<size_t>(m.rank)];
    if (slot == nullptr || m.incarnation > slot->incarnation) slot = &m;
  }
  std::vector<char> is_unhealthy(world, 0);
  for (int r : unhealthy) is_unhealthy[static_cast<size_t>(r)] = 1;
  auto member = [&](int rank) { return by_rank[static_cast<size_t>(rank)]; };
  auto node_of = [&](int rank) -> std::string {
    const proto::Membership* m = member(rank);
    return m == nullptr ? std::string() : m->node;
  };
  auto healthy = [&](int rank) {
    if (is_unhealthy[static_cast<size_t>(rank)]) return false;
    if (membership.empty()) return true;
    const proto::Membership* m = member(rank);
    return m != nullptr && !proto::CannotSave(m->state);
  };
  // A hang suspect whose process is alive (membership lists it in a state that can save, and
  // no incident calls it frozen, dead or part of a hung transport): its app stream or thread
  // is stuck, but libft.so's agent thread and the GPU's copy engines are free, so it can copy
  // its own state. The copy holds the last completed step unless the stuck work had begun the
  // optimizer's update, which the agent marks torn (never restored).
  auto alive_suspect = [&](int rank) {
    if (!is_unhealthy[static_cast<size_t>(rank)]) return false;  // not a suspect at all
    if (!hang_suspects.count(rank) || other_suspects.count(rank)) return false;
    const proto::Membership* m = member(rank);
    return m != nullptr && !proto::CannotSave(m->state);
  };
  // Why a rank can save nothing, for the reason.
  auto why_not = [&](int rank) -> std::string {
    const proto::Membership* m = member(rank);
    if (auto k = other_suspects.find(rank); k != other_suspects.end()) return "a " + k->second + " suspect";
    if (m == nullptr) return membership.empty() ? "a suspect with no membership to show it alive" : "not in membership";
    if (proto::CannotSave(m->state)) return m->state;
    return "a suspect";
  };
  std::vector<int> suspects_saving;  // alive hang suspects asked to save
  std::vector<int> suspects_left;    // alive hang suspects whose shard has healthy replicas

  for (int pp = 0; pp < topology.pp(); ++pp) {
    for (int tp = 0; tp < topology.tp(); ++tp) {
      const std::vector<int> replicas = topology.ShardRanks(tp, pp);
      if (sharded_optimizer) {
        // Every DP rank holds a different slice of the optimizer state: each must save its own,
        // the alive hang suspects included.
        for (int r : replicas) {
          if (alive_suspect(r)) {
            suspects_saving.push_back(r);
          } else if (!healthy(r)) {
            d.save.clear();
            d.reason = fmt::format(
                "optimizer state is sharded across DP and rank {} of shard tp={} pp={} cannot save "
                "its slice ({}): no full checkpoint of this moment, stopping without saving (the "
                "restore plan keeps the newest step every shard has)", r, tp, pp, why_not(r)) + evict_note;
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
      // A shard without a healthy replica: its alive hang suspects save (a single copy each,
      // accepted unless two disagree); with healthy replicas they are left out as before.
      const bool shard_has_healthy = d.save.size() > before;
      for (int r : replicas) {
        if (!alive_suspect(r)) continue;
        if (shard_has_healthy) {
          suspects_left.push_back(r);
        } else {
          suspects_saving.push_back(r);
          d.save.push_back(SaveTarget{r, node_of(r)});
        }
      }
      if (d.save.size() == before) {
        d.save.clear();
        d.reason = fmt::format(
            "no healthy DP replica of shard tp={} pp={} (ranks {}..) and none of its suspects "
            "can save: no full checkpoint, stopping without saving", tp, pp, replicas.front()) + evict_note;
        return d;
      }
    }
  }
  // By rank: each rank is in one shard and listed once, so a pass over the ranks orders them.
  std::vector<int> at(world, -1);
  bool twice = false;
  for (size_t i = 0; i < d.save.size(); ++i) {
    int& slot = at[static_cast<size_t>(d.save[i].rank)];
    twice = twice || slot >= 0;
    slot = static_cast<int>(i);
  }
  if (twice) {
    std::stable_sort(d.save.begin(), d.save.end(),
                     [](const SaveTarget& a, const SaveTarget& b) { return a.rank < b.rank; });
  } else {
    std::vector<SaveTarget> by_rank_order;
    by_rank_order.reserve(d.save.size());
    for (int i : at) {
      if (i >= 0) by_rank_order.push_back(std::move(d.save[static_cast<size_t>(i)]));
    }
    d.save = std::move(by_rank_order);
  }
  d.decision = proto::DecisionKind::kSaveThenStop;
  std::sort(suspects_saving.begin(), suspects_saving.end());
  std::string suspects_note;
  if (!suspects_saving.empty()) {
    suspects_note = fmt::format(
        "; the hung but alive suspect{} {} save{} too (agent thread and copy engines free{})",
        suspects_saving.size() == 1 ? "" : "s", RankList(suspects_saving),
        suspects_saving.size() == 1 ? "s" : "",
        sharded_optimizer ? "" : "; no healthy replica of its shard");
  }
  if (!suspects_left.empty()) {
    suspects_note += fmt::format("; suspect{} {} left out (a healthy replica saves the shard)",
                                 suspects_left.size() == 1 ? "" : "s", RankList(suspects_left));
  }
  d.reason = fmt::format(
      "{} shards ({}) can be saved: saving from {} ranks ({}){}, then stopping{}",
      sharded_optimizer ? topology.world_size() : topology.tp() * topology.pp(), topology.Describe(),
      d.save.size(),
      sharded_optimizer ? "every DP rank: each holds its own slice of the sharded optimizer state"
                        : "every healthy replica, to be compared",
      suspects_note, evict_note);
  return d;
}

void ApplyDecision(const Decision& decision, std::span<proto::Incident> incidents) {
  for (proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    incident.decision = proto::DecisionKindName(decision.decision);
    if (!decision.reason.empty()) {
      incident.message += incident.message.empty() ? decision.reason : "; " + decision.reason;
    }
  }
}

}  // namespace ft::master
