#include "ftmaster/core/straggler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>

#include "ftmaster/core/text.h"
#include "proto/master_codec.h"

namespace ft::master {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  }
  return m;
}

// What an op's duration is taken to be: its median (who waits for whom), or its undisturbed
// time, the p10 (what a link takes: a busy host only adds to an observed duration), falling back
// to the median where a worker does not report it.
double TypicalMs(const proto::OpSummary& op) { return op.p50_ms; }
double UndisturbedMs(const proto::OpSummary& op) { return op.p10_ms >= 0 ? op.p10_ms : op.p50_ms; }

// The rank's collective duration on a comm (`ms` of each op, weighted by count), or -1 when its
// summary has none.
double CollectiveMs(const proto::RankSummary& s, uint64_t comm, double (*ms)(const proto::OpSummary&) = TypicalMs) {
  double weighted = 0;
  uint64_t count = 0;
  for (const proto::OpSummary& op : s.ops) {
    if (op.comm_id != comm || op.count == 0) continue;
    weighted += ms(op) * static_cast<double>(op.count);
    count += op.count;
  }
  return count == 0 ? -1 : weighted / static_cast<double>(count);
}

// The rank's fastest op on a point-to-point comm (the undisturbed time of its quickest (op,
// size)), or -1. Of the two ends of a message one arrives last and waits for nobody: its op is
// the transfer.
double FastestOpMs(const proto::RankSummary& s, uint64_t comm) {
  double fastest = -1;
  for (const proto::OpSummary& op : s.ops) {
    if (op.comm_id != comm || op.count == 0) continue;
    if (fastest < 0 || UndisturbedMs(op) < fastest) fastest = UndisturbedMs(op);
  }
  return fastest;
}

}  // namespace

StragglerOptions StragglerOptions::FromConfig(const Config& config) {
  StragglerOptions o;
  o.steps = static_cast<int>(std::max<int64_t>(1, config.straggler_steps));
  o.min_excess = static_cast<double>(std::max<int64_t>(1, config.straggler_pct)) / 100.0;
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  o.interval_ms = std::max<int64_t>(1, duration_cast<milliseconds>(config.summary_interval).count());
  o.stale_ms = 2 * duration_cast<milliseconds>(config.summary_refresh).count() + 5000;
  return o;
}

StragglerDetector::StragglerDetector(StragglerOptions options) : options_(options) {}

void StragglerDetector::SetMembership(std::span<const proto::Membership> membership) {
  std::unordered_map<uint64_t, std::map<int, int>> by_comm;  // comm -> comm rank -> rank
  std::unordered_map<uint64_t, bool> collective;
  for (const proto::Membership& m : membership) {
    for (const proto::CommMember& c : m.comms) {
      if (c.comm_size < 2) continue;
      by_comm[c.comm_id][c.comm_rank] = m.rank;
      collective[c.comm_id] = collective[c.comm_id] || !c.p2p;
    }
  }
  comms_.clear();
  p2p_comms_.clear();
  for (auto& [id, members] : by_comm) {
    std::vector<int>& ranks = collective[id] ? comms_[id] : p2p_comms_[id];
    for (const auto& [comm_rank, rank] : members) ranks.push_back(rank);
  }
  for (auto it = streaks_.begin(); it != streaks_.end();) {
    it = comms_.count(it->first) ? std::next(it) : streaks_.erase(it);
  }
}

void StragglerDetector::Add(const proto::RankSummary& summary) {
  auto [it, inserted] = latest_.try_emplace(summary.rank, summary);
  if (!inserted && summary.unix_ms > it->second.unix_ms) it->second = summary;
}

void StragglerDetector::Count(Tally* tally, int64_t at, uint64_t steps, int64_t now_unix_ms) const {
  if (tally->count > 0) {
    const bool newer = at > tally->last_counted_ms;
    const bool again = stalled_ ? newer && steps > tally->last_counted_steps
                                : newer || now_unix_ms - tally->counted_at_ms >= options_.interval_ms;
    if (!again) return;
  }
  ++tally->count;
  tally->last_counted_ms = at;
  tally->last_counted_steps = steps;
  tally->counted_at_ms = now_unix_ms;
}

std::vector<proto::Incident> StragglerDetector::Evaluate(int64_t now_unix_ms) {
  struct Finding {
    std::vector<std::string> evidence;
    double ratio = 0;
  };
  std::map<int, Finding> qualifying;  // rank -> evidence, over all comms
  std::vector<double> computes;
  for (auto& [comm, ranks] : comms_) {
    int fastest = -1, slowest = -1;
    double fastest_ms = 0, slowest_compute = 0;
    int members = 0;
    auto usable = [&](int rank) -> const proto::RankSummary* {
      auto it = latest_.find(rank);
      if (it == latest_.end() || it->second.compute_ms <= 0) return nullptr;
      if (now_unix_ms - it->second.unix_ms > options_.stale_ms) return nullptr;
      return &it->second;
    };
    for (int rank : ranks) {
      const proto::RankSummary* summary = usable(rank);
      if (summary == nullptr) continue;
      const double ms = CollectiveMs(*summary, comm);
      if (ms < 0) continue;
      ++members;
      if (fastest < 0 || ms < fastest_ms) {
        fastest = rank;
        fastest_ms = ms;
      }
      if (slowest < 0 || summary->compute_ms > slowest_compute) {
        slowest = rank;
        slowest_compute = summary->compute_ms;
      }
    }
    Streak& streak = streaks_[comm];
    bool candidate = members >= 2 && fastest == slowest;
    double median = 0, others_ms = 0;
    if (candidate) {
      computes.clear();
      std::vector<double> durations;
      for (int rank : ranks) {
        const proto::RankSummary* summary = usable(rank);
        if (rank == fastest || summary == nullptr) continue;
        const double ms = CollectiveMs(*summary, comm);
        if (ms < 0) continue;
        computes.push_back(summary->compute_ms);
        durations.push_back(ms);
      }
      median = Median(computes);
      others_ms = Median(durations);
      candidate = median > 0 && slowest_compute >= (1 + options_.min_excess) * median;
    }
    if (!candidate) {
      streak = Streak{};
      continue;
    }
    const proto::RankSummary& latest = latest_[fastest];
    if (streak.rank != fastest) {
      streak = Streak{};
      streak.rank = fastest;
    }
    Count(&streak.tally, latest.unix_ms, latest.steps, now_unix_ms);
    streak.ratio = slowest_compute / median;
    streak.own_ms = fastest_ms;
    streak.others_ms = others_ms;
    streak.compute_ms = slowest_compute;
    streak.median_compute_ms = median;
    if (streak.tally.count >= options_.steps) {
      Finding& f = qualifying[fastest];
      f.ratio = std::max(f.ratio, streak.ratio);
      f.evidence.push_back(fmt::format(
          "comm {}: compute {} vs the others' median {} ({:.2f}x), collective p50 {} vs {} "
          "(waits least: arrives last), {} summaries in a row",
          CommHex(comm), HumanMs(slowest_compute), HumanMs(median), streak.ratio,
          HumanMs(fastest_ms), HumanMs(others_ms), streak.tally.count));
    }
  }

  std::vector<proto::Incident> out;
  for (auto it = named_.begin(); it != named_.end();) {
    it = qualifying.count(*it) ? std::next(it) : named_.erase(it);
  }
  for (auto& [rank, f] : qualifying) {
    if (!named_.insert(rank).second) continue;
    const proto::RankSummary& s = latest_[rank];
    proto::Incident incident;
    incident.kind = proto::IncidentKindName(proto::IncidentKind::kStraggler);
    incident.id = fmt::format("{}-straggler-{}", now_unix_ms, rank);
    incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
    incident.first_event_unix_ms = now_unix_ms;
    incident.decided_unix_ms = now_unix_ms;
    std::sort(f.evidence.begin(), f.evidence.end());
    incident.suspects.push_back(proto::Suspect{
        rank, s.node,
        fmt::format("straggler: compute {:.2f}x its peers' median and the shortest collective "
                    "waits on {} comm{}", f.ratio, f.evidence.size(),
                    f.evidence.size() == 1 ? "" : "s")});
    incident.evidence = std::move(f.evidence);
    // 1.1x barely qualifies (0.55); 1.5x and more is a clear case (0.95).
    incident.confidence = std::clamp(0.55 + (f.ratio - 1.1), 0.55, 0.95);
    incident.message = fmt::format(
        "rank {} ({}) slows its communicators: {:.2f}x the compute time of its peers; check "
        "its GPU clocks, thermals and input pipeline", rank, s.node, f.ratio);
    out.push_back(std::move(incident));
  }
  EvaluateLinks(now_unix_ms, &out);
  return out;
}

void StragglerDetector::EvaluateLinks(int64_t now_unix_ms, std::vector<proto::Incident>* out) {
  struct Link {
    uint64_t comm = 0;
    double transfer_ms = 0;
    int64_t newest_ms = 0;  // the newest member summary
    uint64_t most_steps = 0;  // the most steps a member's summary counts
    std::vector<int> members;
    bool p2p = false;
  };
  std::map<std::string, std::vector<Link>> roles;  // role -> its comms reporting in full
  for (const bool p2p : {false, true}) {
    for (const auto& [comm, ranks] : p2p ? p2p_comms_ : comms_) {
      Link link{comm, -1, 0, 0, ranks, p2p};
      std::set<std::pair<int, int>> shape;  // (op, bucket)
      bool whole = ranks.size() >= 2;
      for (int rank : ranks) {
        auto it = latest_.find(rank);
        if (it == latest_.end() || now_unix_ms - it->second.unix_ms > options_.stale_ms) {
          whole = false;
          break;
        }
        const double ms = p2p ? FastestOpMs(it->second, comm) : CollectiveMs(it->second, comm, UndisturbedMs);
        if (ms < 0) {
          whole = false;
          break;
        }
        link.transfer_ms = link.transfer_ms < 0 ? ms : std::min(link.transfer_ms, ms);
        link.newest_ms = std::max(link.newest_ms, it->second.unix_ms);
        link.most_steps = std::max(link.most_steps, it->second.steps);
        for (const proto::OpSummary& op : it->second.ops) {
          if (op.comm_id == comm && op.count > 0) shape.emplace(static_cast<int>(op.op), op.bucket);
        }
      }
      if (!whole) continue;
      std::string role = fmt::format("{}{}", p2p ? "p2p|" : "", ranks.size());
      for (const auto& [op, bucket] : shape) role += fmt::format("|{}:{}", op, bucket);
      roles[role].push_back(std::move(link));
    }
  }

  std::unordered_set<uint64_t> qualifying;
  std::vector<const Link*> found;
  std::map<uint64_t, double> role_median;
  for (auto& [role, links] : roles) {
    if (links.size() < 3) continue;
    for (const Link& link : links) {
      std::vector<double> others;
      for (const Link& other : links) {
        if (other.comm != link.comm) others.push_back(other.transfer_ms);
      }
      const double median = Median(others);
      Tally& streak = link_streaks_[link.comm];
      const bool slow = link.transfer_ms >= (1 + options_.min_excess) * median &&
                        link.transfer_ms - median >= kLinkFloorMs;
      if (!slow) {
        streak = Tally{};
        continue;
      }
      Count(&streak, link.newest_ms, link.most_steps, now_unix_ms);
      if (streak.count < options_.steps) continue;
      qualifying.insert(link.comm);
      found.push_back(&link);
      role_median[link.comm] = median;
    }
  }
  for (auto it = link_streaks_.begin(); it != link_streaks_.end();) {
    it = comms_.count(it->first) || p2p_comms_.count(it->first) ? std::next(it) : link_streaks_.erase(it);
  }
  for (auto it = named_links_.begin(); it != named_links_.end();) {
    it = qualifying.count(*it) ? std::next(it) : named_links_.erase(it);
  }
  for (const Link* link : found) {
    if (!named_links_.insert(link->comm).second) continue;
    const double median = role_median[link->comm];
    proto::Incident incident;
    incident.kind = proto::IncidentKindName(proto::IncidentKind::kSlowLink);
    incident.id = fmt::format("{}-slow-link-{}", now_unix_ms, CommHex(link->comm));
    incident.comm_id = link->comm;
    incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
    incident.first_event_unix_ms = now_unix_ms;
    incident.decided_unix_ms = now_unix_ms;
    std::set<std::string> nodes;
    std::string ends;
    for (int rank : link->members) {
      const proto::RankSummary& s = latest_[rank];
      nodes.insert(s.node);
      incident.suspects.push_back(proto::Suspect{
          rank, s.node, fmt::format("an end of comm {}, whose transfer takes {} where its role's take {}",
                                    CommHex(link->comm), HumanMs(link->transfer_ms), HumanMs(median))});
      ends += fmt::format("{}rank {} ({})", ends.empty() ? "" : ", ", rank, s.node);
    }
    incident.evidence.push_back(fmt::format(
        "comm {}: {} {} against the median {} of the other comms of its role{}, {} summaries in a row",
        CommHex(link->comm),
        link->p2p ? "the fastest send/recv p10 of any member (a message whose other end was there first)"
                  : "the shortest member's collective p10 (the transfer once every member arrived)",
        HumanMs(link->transfer_ms), HumanMs(median), RatioSuffix(link->transfer_ms, median), options_.steps));
    // A role whose other links take no measurable time leaves no doubt (a slow link still exceeds
    // them by kLinkFloorMs).
    const double ratio = median > 0 ? link->transfer_ms / median : 2.0;
    incident.confidence = std::clamp(0.55 + (ratio - 1.1), 0.55, 0.95);
    incident.message = fmt::format(
        "the link of comm {} is slow: its members arrive on time and wait {} for the transfer where their "
        "role's other comms wait {}{}; its ends: {}; check the NICs, cables and switch ports between {} (not a "
        "compute straggler: no node is evicted for it)",
        CommHex(link->comm), HumanMs(link->transfer_ms), HumanMs(median), RatioSuffix(link->transfer_ms, median),
        ends, fmt::join(nodes, " and "));
    out->push_back(std::move(incident));
  }
}

}  // namespace ft::master
