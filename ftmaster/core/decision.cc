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

// The suspects of the incidents that call for a decision, by what they can still do.
struct Suspects {
  bool any = false;      // an incident calls for a decision
  bool unnamed = false;  // one names nobody (or a rank < 0): no shard can be proven healthy
  std::set<int> unhealthy;
  std::set<int> hang;                 // suspects of "hang" incidents (compute or host hang)
  std::map<int, std::string> other;   // of host-frozen, crash, transport-hang: kind
};

Suspects GatherSuspects(std::span<const proto::Incident> incidents) {
  Suspects s;
  for (const proto::Incident& incident : incidents) {
    if (!Acted(incident)) continue;
    s.any = true;
    for (const proto::Suspect& suspect : incident.suspects) {
      if (suspect.rank < 0) s.unnamed = true;
      s.unhealthy.insert(suspect.rank);
      if (proto::Is(incident, proto::IncidentKind::kHang)) {
        s.hang.insert(suspect.rank);
      } else {
        s.other.emplace(suspect.rank, incident.kind);
      }
    }
    if (incident.suspects.empty()) s.unnamed = true;  // stuck, but nobody named
  }
  return s;
}

// The evictions into `d`, and what the reason says of them (and of the nodes kept).
std::string Evictions(std::span<const proto::Incident> incidents, std::span<const proto::Membership> membership,
                      const std::map<std::string, int>* prior_failures, Decision* d) {
  std::vector<std::string> kept_nodes;  // transport hangs spanning nodes: not evicted
  std::vector<std::string> kept_software;  // crashed or stopped processes with no evidence against their node
  for (const auto& [node, why] : EvictedNodes(incidents, membership, prior_failures, &kept_nodes, &kept_software)) {
    d->evict_nodes.push_back(node);
    d->evict_reasons.push_back(why);
  }
  std::string note;
  if (!kept_nodes.empty()) {
    note = "; not evicting the " + kept_nodes.front() +
           " (a transport hang across nodes does not say which link failed)";
  }
  if (!kept_software.empty()) {
    note += "; not evicting " + kept_software.front() +
            ": a software failure with no evidence against the node (no hardware signal, "
            "not a frozen host): it restarts in place and stays schedulable";
  }
  for (size_t i = 0; i < d->evict_nodes.size(); ++i) {
    note += fmt::format("; evicting {}: {}", d->evict_nodes[i], d->evict_reasons[i]);
  }
  return note;
}

// Why no shard can be planned at all (topology unknown, a suspect unnamed or outside it);
// empty when the shards can be.
std::string CannotPlan(const Topology& topology, const Suspects& suspects) {
  if (!topology.known()) {
    return "topology " + topology.Describe() + ": cannot tell whether a full checkpoint "
           "exists, stopping without saving";
  }
  if (suspects.unnamed) {
    return "a stuck rank could not be named, so no shard can be proven healthy: stopping "
           "without saving";
  }
  for (int r : suspects.unhealthy) {
    if (r >= topology.world_size()) {
      return fmt::format("suspect rank {} is outside the topology ({}): stopping without "
                         "saving", r, topology.Describe());
    }
  }
  return {};
}

// Who saves each shard (the rules in decision.h). Every rank it is asked about is inside the
// topology (0 <= rank < world_size): the membership is indexed by rank in a vector (131k ranks:
// a hash map of them cost most of the decision).
class ShardSaves {
 public:
  ShardSaves(const Topology& topology, std::span<const proto::Membership> membership, const Suspects& suspects,
             bool sharded_optimizer)
      : topology_(topology), membership_(membership), suspects_(suspects), sharded_(sharded_optimizer),
        world_(static_cast<size_t>(topology.world_size())), by_rank_(world_, nullptr), unhealthy_(world_, 0) {
    for (const proto::Membership& m : membership) {
      if (m.rank < 0 || static_cast<size_t>(m.rank) >= world_) continue;
      const proto::Membership*& slot = by_rank_[static_cast<size_t>(m.rank)];
      if (slot == nullptr || m.incarnation > slot->incarnation) slot = &m;
    }
    for (int r : suspects.unhealthy) unhealthy_[static_cast<size_t>(r)] = 1;
  }

  // Every shard's savers into `save`, by rank; false with *why (the first shard that cannot be
  // saved) otherwise.
  bool Plan(std::vector<SaveTarget>* save, std::string* why) {
    for (int pp = 0; pp < topology_.pp(); ++pp) {
      for (int tp = 0; tp < topology_.tp(); ++tp) {
        if (!(sharded_ ? PlanSlices(tp, pp, save, why) : PlanReplicas(tp, pp, save, why))) {
          save->clear();
          return false;
        }
      }
    }
    SortByRank(save);
    return true;
  }

  // "; the hung but alive suspects 3,5 save too (...)", "; suspect 4 left out (...)".
  std::string SuspectsNote() {
    std::sort(suspects_saving_.begin(), suspects_saving_.end());
    std::string note;
    if (!suspects_saving_.empty()) {
      note = fmt::format(
          "; the hung but alive suspect{} {} save{} too (agent thread and copy engines free{})",
          suspects_saving_.size() == 1 ? "" : "s", RankList(suspects_saving_),
          suspects_saving_.size() == 1 ? "s" : "", sharded_ ? "" : "; no healthy replica of its shard");
    }
    if (!suspects_left_.empty()) {
      note += fmt::format("; suspect{} {} left out (a healthy replica saves the shard)",
                          suspects_left_.size() == 1 ? "" : "s", RankList(suspects_left_));
    }
    return note;
  }

 private:
  const proto::Membership* Member(int rank) const { return by_rank_[static_cast<size_t>(rank)]; }
  std::string NodeOf(int rank) const {
    const proto::Membership* m = Member(rank);
    return m == nullptr ? std::string() : m->node;
  }
  bool Healthy(int rank) const {
    if (unhealthy_[static_cast<size_t>(rank)]) return false;
    if (membership_.empty()) return true;
    const proto::Membership* m = Member(rank);
    return m != nullptr && !proto::CannotSave(m->state);
  }
  // A hang suspect whose process is alive (membership lists it in a state that can save, and
  // no incident calls it frozen, dead or part of a hung transport): its app stream or thread
  // is stuck, but libft.so's agent thread and the GPU's copy engines are free, so it can copy
  // its own state. The copy holds the last completed step unless the stuck work had begun the
  // optimizer's update, which the agent marks torn (never restored).
  bool AliveSuspect(int rank) const {
    if (!unhealthy_[static_cast<size_t>(rank)]) return false;  // not a suspect at all
    if (!suspects_.hang.count(rank) || suspects_.other.count(rank)) return false;
    const proto::Membership* m = Member(rank);
    return m != nullptr && !proto::CannotSave(m->state);
  }
  // Why a rank can save nothing, for the reason.
  std::string WhyNot(int rank) const {
    const proto::Membership* m = Member(rank);
    if (auto k = suspects_.other.find(rank); k != suspects_.other.end()) return "a " + k->second + " suspect";
    if (m == nullptr) return membership_.empty() ? "a suspect with no membership to show it alive" : "not in membership";
    if (proto::CannotSave(m->state)) return m->state;
    return "a suspect";
  }

  // Sharded optimizer: every DP rank holds a different slice of the optimizer state: each must
  // save its own, the alive hang suspects included.
  bool PlanSlices(int tp, int pp, std::vector<SaveTarget>* save, std::string* why) {
    for (int r : topology_.ShardRanks(tp, pp)) {
      if (AliveSuspect(r)) {
        suspects_saving_.push_back(r);
      } else if (!Healthy(r)) {
        *why = fmt::format(
            "optimizer state is sharded across DP and rank {} of shard tp={} pp={} cannot save "
            "its slice ({}): no full checkpoint of this moment, stopping without saving (the "
            "restore plan keeps the newest step every shard has)", r, tp, pp, WhyNot(r));
        return false;
      }
      save->push_back(SaveTarget{r, NodeOf(r)});
    }
    return true;
  }

  // Every healthy replica saves: their digests are compared (ckpt_verify.h), which is what
  // catches a replica whose bytes silently differ. A shard without a healthy replica: its alive
  // hang suspects save (a single copy each, accepted unless two disagree); with healthy
  // replicas they are left out.
  bool PlanReplicas(int tp, int pp, std::vector<SaveTarget>* save, std::string* why) {
    const std::vector<int> replicas = topology_.ShardRanks(tp, pp);
    const size_t before = save->size();
    for (int r : replicas) {
      if (Healthy(r)) save->push_back(SaveTarget{r, NodeOf(r)});
    }
    const bool shard_has_healthy = save->size() > before;
    for (int r : replicas) {
      if (!AliveSuspect(r)) continue;
      if (shard_has_healthy) {
        suspects_left_.push_back(r);
      } else {
        suspects_saving_.push_back(r);
        save->push_back(SaveTarget{r, NodeOf(r)});
      }
    }
    if (save->size() > before) return true;
    *why = fmt::format(
        "no healthy DP replica of shard tp={} pp={} (ranks {}..) and none of its suspects "
        "can save: no full checkpoint, stopping without saving", tp, pp, replicas.front());
    return false;
  }

  // By rank: each rank is in one shard and listed once, so a pass over the ranks orders them.
  void SortByRank(std::vector<SaveTarget>* save) const {
    std::vector<int> at(world_, -1);
    bool twice = false;
    for (size_t i = 0; i < save->size(); ++i) {
      int& slot = at[static_cast<size_t>((*save)[i].rank)];
      twice = twice || slot >= 0;
      slot = static_cast<int>(i);
    }
    if (twice) {
      std::stable_sort(save->begin(), save->end(),
                       [](const SaveTarget& a, const SaveTarget& b) { return a.rank < b.rank; });
      return;
    }
    std::vector<SaveTarget> by_rank_order;
    by_rank_order.reserve(save->size());
    for (int i : at) {
      if (i >= 0) by_rank_order.push_back(std::move((*save)[static_cast<size_t>(i)]));
    }
    *save = std::move(by_rank_order);
  }

  const Topology& topology_;
  std::span<const proto::Membership> membership_;
  const Suspects& suspects_;
  const bool sharded_;
  const size_t world_;
  std::vector<const proto::Membership*> by_rank_;
  std::vector<char> unhealthy_;
  std::vector<int> suspects_saving_;  // alive hang suspects asked to save
  std::vector<int> suspects_left_;    // alive hang suspects whose shard has healthy replicas
};

}  // namespace

Decision Decide(std::span<const proto::Incident> incidents, const Topology& topology,
                std::span<const proto::Membership> membership, bool sharded_optimizer,
                const std::map<std::string, int>* prior_failures) {
  Decision d;
  const Suspects suspects = GatherSuspects(incidents);
  if (!suspects.any) {
    d.reason = "no hang or crash: nothing to decide";
    return d;
  }
  const std::string evict_note = Evictions(incidents, membership, prior_failures, &d);
  d.decision = proto::DecisionKind::kStop;
  if (std::string why = CannotPlan(topology, suspects); !why.empty()) {
    d.reason = why + evict_note;
    return d;
  }
  ShardSaves saves(topology, membership, suspects, sharded_optimizer);
  if (std::string why; !saves.Plan(&d.save, &why)) {
    d.reason = why + evict_note;
    return d;
  }
  d.decision = proto::DecisionKind::kSaveThenStop;
  d.reason = fmt::format(
      "{} shards ({}) can be saved: saving from {} ranks ({}){}, then stopping{}",
      sharded_optimizer ? topology.world_size() : topology.tp() * topology.pp(), topology.Describe(),
      d.save.size(),
      sharded_optimizer ? "every DP rank: each holds its own slice of the sharded optimizer state"
                        : "every healthy replica, to be compared",
      saves.SuspectsNote(), evict_note);
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
