#include "ftmaster/core/ckpt_verify.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace ft::master {
namespace {

std::string ShardName(const ShardId& s) {
  return s.dp >= 0 ? fmt::format("tp={} pp={} dp={}", s.tp, s.pp, s.dp) : fmt::format("tp={} pp={}", s.tp, s.pp);
}

// Where a copy belongs, or false when the topology has no place for it.
bool ShardOfCopy(const proto::CkptCopy& c, const Topology& t, bool sharded, ShardId* out) {
  const bool in_world = c.rank >= 0 && c.rank < t.world_size();
  Coord coord;
  if (in_world) coord = t.CoordOf(c.rank);
  if (c.tp >= 0 && c.pp >= 0) {
    if (c.tp >= t.tp() || c.pp >= t.pp()) return false;
    coord.tp = c.tp;
    coord.pp = c.pp;
    if (c.dp >= 0) {
      if (c.dp >= t.dp()) return false;
      coord.dp = c.dp;
    } else if (!in_world) {
      if (sharded) return false;  // no dp: the shard cannot be named
    }
  } else if (!in_world) {
    return false;
  }
  *out = ShardId{coord.tp, coord.pp, sharded ? coord.dp : -1};
  return true;
}

// What the copies of one step come to, counted as JudgeStep goes: the shards' states and the
// copies set aside.
struct Tally {
  int torn = 0, outside = 0, buddies = 0;
  int missing = 0, untrusted = 0, single = 0, sourceless = 0;
  std::string first_missing, first_untrusted;
};

// The copies by the shard they belong to; torn ones and those outside the topology counted and
// left out. Sets the ranks that reported (j.reported) and voted (the verdict's copies).
std::map<ShardId, std::vector<const proto::CkptCopy*>> CopiesByShard(std::span<const proto::CkptCopy> copies,
                                                                     const Topology& t, bool sharded,
                                                                     StepJudgement* j, Tally* tally) {
  std::map<ShardId, std::vector<const proto::CkptCopy*>> by_shard;
  std::set<int> reporters, voters;
  for (const proto::CkptCopy& c : copies) {
    ShardId s;
    const bool inside = ShardOfCopy(c, t, sharded, &s);
    // A rank counts once, whichever of its copies (its own, a buddy copy) is in.
    if (inside && c.rank >= 0 && c.rank < t.world_size()) reporters.insert(c.rank);
    if (c.torn) {
      ++tally->torn;
      continue;
    }
    if (!inside) {
      ++tally->outside;
      continue;
    }
    if (c.buddy) ++tally->buddies;
    voters.insert(c.rank);
    by_shard[s].push_back(&c);
  }
  j->reported = static_cast<int>(reporters.size());
  j->verdict.copies = static_cast<int>(voters.size());
  return by_shard;
}

// One shard's copies (`list`, sorted here) to its check: accepted when every vote agrees or a
// majority of at least three does, untrusted otherwise; replicas outvoted are SDC findings.
void JudgeShard(const ShardId& id, std::vector<const proto::CkptCopy*>& list, ShardCheck& check, StepJudgement* j,
                Tally* tally) {
  // By rank, a rank's own copy before its buddy copy.
  std::sort(list.begin(), list.end(), [](auto* a, auto* b) {
    return std::tie(a->rank, a->buddy) < std::tie(b->rank, b->buddy);
  });
  // One vote per rank: a buddy copy holds the rank's own bytes again, and counting it would
  // double the rank's vote (in a 2-replica shard an honest replica would be outvoted and
  // named as SDC). The rank's own copy votes; its buddy copy only where the own one is gone.
  std::vector<const proto::CkptCopy*> voting;
  for (const proto::CkptCopy* c : list) {
    if (voting.empty() || voting.back()->rank != c->rank) voting.push_back(c);
  }
  check.copies = static_cast<int>(voting.size());
  std::map<uint64_t, int> votes;
  for (const proto::CkptCopy* c : voting) ++votes[c->digest];
  auto best = std::max_element(votes.begin(), votes.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool all_equal = votes.size() == 1;
  const bool majority = voting.size() >= 3 && 2 * best->second > check.copies;
  if (!all_equal && !majority) {
    check.state = ShardCheck::State::kUntrusted;
    ++tally->untrusted;
    if (tally->first_untrusted.empty()) {
      std::vector<std::string> held;
      for (const proto::CkptCopy* c : voting) held.push_back(fmt::format("rank {} {:016x}", c->rank, c->digest));
      tally->first_untrusted = fmt::format("{} ({})", ShardName(id), fmt::join(held, ", "));
    }
    return;
  }
  check.state = ShardCheck::State::kAccepted;
  check.digest = best->first;
  check.agreeing = best->second;
  if (voting.size() == 1) ++tally->single;
  bool any_source = false;
  // Every copy holding the accepted bytes is a source, buddy copies included.
  for (const proto::CkptCopy* c : list) {
    if (c->digest != check.digest) continue;
    check.holders.push_back(c);
    any_source = any_source || !c->tiers.empty();
  }
  for (const proto::CkptCopy* c : voting) {
    if (c->digest != check.digest) {
      j->sdc.push_back(SdcFinding{c->rank, c->node, c->digest, check.digest, check.agreeing, id});
    }
  }
  if (!any_source) ++tally->sourceless;
}

// The verdict's state, and its why in parts for people, each with its code (v.reasons) in the
// same order.
void Explain(const Tally& tally, bool sharded, StepJudgement* j) {
  proto::StepVerdict& v = j->verdict;
  using Reason = proto::VerdictReason;
  std::vector<std::string> why;
  auto say = [&](Reason reason, std::string text) {
    v.reasons.push_back(reason);
    why.push_back(std::move(text));
  };
  if (tally.untrusted > 0) {
    v.state = proto::VerdictState::kUntrusted;
    say(Reason::kReplicasDisagree,
        fmt::format("{} shard{} whose replicas disagree with no majority, first {}: the step "
                    "is not trusted and an earlier one is restored",
                    tally.untrusted, tally.untrusted == 1 ? "" : "s", tally.first_untrusted));
  }
  if (tally.missing > 0) {
    say(Reason::kShardsMissing, fmt::format("{} of {} shard{} have no copy (first {})", tally.missing, v.shards,
                                            v.shards == 1 ? "" : "s", tally.first_missing));
  }
  if (tally.sourceless > 0) {
    say(Reason::kNoSourceLeft, fmt::format("{} shard{} no tier holds any more", tally.sourceless,
                                           tally.sourceless == 1 ? "" : "s"));
  }
  j->restorable = tally.untrusted == 0 && tally.missing == 0 && tally.sourceless == 0;
  if (tally.untrusted == 0) v.state = j->restorable ? proto::VerdictState::kVerified : proto::VerdictState::kIncomplete;
  if (j->restorable) {
    v.reasons.insert(v.reasons.begin(), Reason::kAccepted);
    why.insert(why.begin(), fmt::format("{} of {} shard{} accepted", v.verified_shards, v.shards,
                                        v.shards == 1 ? "" : "s"));
  }
  if (!j->sdc.empty()) {
    std::vector<std::string> odd;
    for (const SdcFinding& f : j->sdc) {
      odd.push_back(fmt::format("rank {} on {} holds {:016x} where {} replica{} agree on {:016x}", f.rank,
                                f.node, f.digest, f.agreeing, f.agreeing == 1 ? "" : "s", f.majority));
    }
    say(Reason::kSilentDataCorruption,
        fmt::format("majority accepted; silent data corruption: {}", fmt::join(odd, "; ")));
  }
  if (tally.single > 0) {
    say(Reason::kSingleCopy, fmt::format("{} shard{} from a single copy, not cross-checked", tally.single,
                                         tally.single == 1 ? "" : "s"));
  }
  if (sharded) {
    say(Reason::kShardedOptimizer, "sharded optimizer: every rank is its own shard, nothing to compare");
  }
  if (tally.buddies > 0) {
    say(Reason::kBuddyCopies, fmt::format("{} buddy cop{} on other nodes (sources, not votes)", tally.buddies,
                                          tally.buddies == 1 ? "y" : "ies"));
  }
  if (tally.torn > 0) {
    say(Reason::kTornIgnored, fmt::format("{} torn cop{} ignored", tally.torn, tally.torn == 1 ? "y" : "ies"));
  }
  if (tally.outside > 0) {
    say(Reason::kOutsideTopology, fmt::format("{} cop{} outside the topology ignored", tally.outside,
                                              tally.outside == 1 ? "y" : "ies"));
  }
  v.why = fmt::format("{}", fmt::join(why, "; "));
}

}  // namespace

ShardId ShardOfRank(int rank, const Topology& t, bool sharded) {
  Coord c = t.CoordOf(rank);
  return ShardId{c.tp, c.pp, sharded ? c.dp : -1};
}

StepJudgement JudgeStep(int64_t step, std::span<const proto::CkptCopy> copies, const Topology& t,
                        bool sharded, int64_t unix_ms) {
  StepJudgement j;
  proto::StepVerdict& v = j.verdict;
  v.step = step;
  v.unix_ms = unix_ms;
  if (!t.known()) {
    v.state = proto::VerdictState::kIncomplete;
    for (const proto::CkptCopy& c : copies) v.copies += c.torn ? 0 : 1;
    v.why = "topology " + t.Describe() + ": the shards cannot be named, so no copy can be checked";
    v.reasons = {proto::VerdictReason::kTopologyUnknown};
    return j;
  }
  for (int pp = 0; pp < t.pp(); ++pp) {
    for (int tp = 0; tp < t.tp(); ++tp) {
      if (!sharded) {
        j.shards[ShardId{tp, pp, -1}];
        continue;
      }
      for (int dp = 0; dp < t.dp(); ++dp) j.shards[ShardId{tp, pp, dp}];
    }
  }
  v.shards = static_cast<int>(j.shards.size());
  j.expected = t.world_size();
  Tally tally;
  std::map<ShardId, std::vector<const proto::CkptCopy*>> by_shard = CopiesByShard(copies, t, sharded, &j, &tally);
  for (auto& [id, check] : j.shards) {
    auto it = by_shard.find(id);
    if (it != by_shard.end()) {
      JudgeShard(id, it->second, check, &j, &tally);
    } else {
      ++tally.missing;
      if (tally.first_missing.empty()) tally.first_missing = ShardName(id);
    }
  }
  j.every_replica_reported = j.reported >= j.expected;
  std::sort(j.sdc.begin(), j.sdc.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (const SdcFinding& f : j.sdc) v.sdc_ranks.push_back(f.rank);
  v.verified_shards = v.shards - tally.missing - tally.untrusted;
  Explain(tally, sharded, &j);
  return j;
}

namespace {

// The tiers of a copy on an evicted node that can still be read: all of them while its worker
// serves, else only the remote directory's (shared storage, not on the node).
std::vector<std::string> TiersOfEvicted(const proto::CkptCopy& c, const EvictedNodes& evicted) {
  if (evicted.serving.count(c.node)) return c.tiers;
  std::vector<std::string> out;
  for (const std::string& tier : c.tiers) {
    if (tier == "remote") out.push_back(tier);
  }
  return out;
}

}  // namespace

proto::RestorePlan BuildPlan(const StepJudgement& judged, const Topology& t, bool sharded,
                             const std::function<std::string(int)>& node_of,
                             const EvictedNodes& evicted) {
  proto::RestorePlan plan;
  plan.step = judged.verdict.step;
  auto is_evicted = [&](const std::string& node) { return !node.empty() && evicted.nodes.count(node) > 0; };

  // Pass 1: which ranks must pull (no copy of their own on their node, or their node is
  // evicted) and, per shard, their index among its pulling ranks (by rank).
  std::vector<std::string> nodes(static_cast<size_t>(t.world_size()));
  std::vector<int> pull_index(static_cast<size_t>(t.world_size()), -1);
  std::map<ShardId, int> pulling_of_shard;
  for (int rank = 0; rank < t.world_size(); ++rank) {
    const ShardId shard = ShardOfRank(rank, t, sharded);
    auto it = judged.shards.find(shard);
    if (it == judged.shards.end()) continue;
    const std::string& node = nodes[static_cast<size_t>(rank)] = node_of(rank);
    bool own = false;
    for (const proto::CkptCopy* c : it->second.holders) {
      own = own || (c->rank == rank && !c->tiers.empty() && (node.empty() || c->node == node) &&
                    !is_evicted(c->node));
    }
    if (!own) pull_index[static_cast<size_t>(rank)] = pulling_of_shard[shard]++;
  }
  std::map<ShardId, int> ordinal;  // the shard's place in the topology's order
  for (const auto& [id, check] : judged.shards) ordinal.emplace(id, static_cast<int>(ordinal.size()));

  // Pass 2: per rank, its own copy (on its node, not evicted), copies on its node, copies on
  // other healthy nodes — rotated for a pulling rank, so the pulls of one shard, and of
  // neighbouring shards, start on different replicas — and last the copies on evicted nodes
  // (TiersOfEvicted).
  for (int rank = 0; rank < t.world_size(); ++rank) {
    const ShardId shard = ShardOfRank(rank, t, sharded);
    auto it = judged.shards.find(shard);
    if (it == judged.shards.end()) continue;
    const ShardCheck& check = it->second;
    proto::RestoreRank rr;
    rr.rank = rank;
    rr.digest = check.digest;
    const std::string& node = nodes[static_cast<size_t>(rank)];
    std::vector<const proto::CkptCopy*> own, same_node, others, on_evicted;
    for (const proto::CkptCopy* c : check.holders) {  // by rank
      if (c->tiers.empty()) continue;
      if (is_evicted(c->node)) {
        on_evicted.push_back(c);
      } else if (c->rank == rank && (node.empty() || c->node == node)) {
        own.push_back(c);
      } else if (!node.empty() && c->node == node) {
        same_node.push_back(c);
      } else {
        others.push_back(c);
      }
    }
    const int k = pull_index[static_cast<size_t>(rank)];
    if (k >= 0 && others.size() > 1) {
      const size_t by = static_cast<size_t>(ordinal[shard] + k) % others.size();
      std::rotate(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(by), others.end());
    }
    for (const auto* group : {&own, &same_node, &others}) {
      for (const proto::CkptCopy* c : *group) {
        if (rr.sources.size() < kMaxPlanSources) rr.sources.push_back(proto::RestoreSource{c->rank, c->node, c->tiers});
      }
    }
    for (const proto::CkptCopy* c : on_evicted) {
      std::vector<std::string> tiers = TiersOfEvicted(*c, evicted);
      if (!tiers.empty() && rr.sources.size() < kMaxPlanSources) {
        rr.sources.push_back(proto::RestoreSource{c->rank, c->node, std::move(tiers)});
      }
    }
    plan.ranks.push_back(std::move(rr));
  }
  return plan;
}

int FirstRankWithoutSource(const proto::RestorePlan& plan) {
  for (const proto::RestoreRank& rr : plan.ranks) {
    if (rr.sources.empty()) return rr.rank;
  }
  return -1;
}

proto::RestorePlan NoPlan() { return proto::RestorePlan{}; }

bool SamePlanContent(const proto::RestorePlan& a, const proto::RestorePlan& b) {
  return a.step == b.step && a.ranks == b.ranks && a.settling == b.settling && a.ends_seen == b.ends_seen;
}

}  // namespace ft::master
