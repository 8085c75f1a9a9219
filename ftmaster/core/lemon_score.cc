#include "ftmaster/core/lemon_score.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace ft::master {
namespace {

using Kind = proto::NodeRecordKind;

// The identity of a record: the same one written twice (a takeover) is one.
auto Identity(const proto::NodeRecord& r) {
  return std::tie(r.job, r.incident, r.kind, r.detail, r.unix_ms);
}

// Newest first; of one moment (one incident's records) the heaviest first, so that a node's
// last record says the most of it (its eviction rather than the suspicion that led to it).
bool NewerFirst(const proto::NodeRecord& a, const proto::NodeRecord& b) {
  if (a.unix_ms != b.unix_ms) return a.unix_ms > b.unix_ms;
  const double wa = RecordWeight(a), wb = RecordWeight(b);
  if (wa != wb) return wa > wb;
  return Identity(a) < Identity(b);
}

}  // namespace

double RecordWeight(const proto::NodeRecord& r) {
  const double n = std::max(1, r.nodes);
  switch (r.kind) {
    case Kind::kEvicted: return 4.0;
    case Kind::kHardware: return 3.0;
    case Kind::kCrash: return 2.0 / n;
    case Kind::kSuspect: return 1.5 / n;
    case Kind::kSlow: return 1.0 / n;
    case Kind::kCordon:
    case Kind::kUncordon: return 0.0;
  }
  return 0.0;
}

double LemonScore(const std::vector<proto::NodeRecord>& records, int64_t now_unix_ms, const LemonOptions& options) {
  const double half_life = static_cast<double>(std::max<int64_t>(1, options.half_life_ms));
  // job -> incident -> kind -> its heaviest decayed record
  std::map<std::string, std::map<std::string, std::map<Kind, double>>> by_job;
  // job -> signal (its description) -> incident -> decayed weight: one signal carried by two
  // incidents of a job (the `hardware` incident before the crash, and the crash) counts once.
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> signals;
  for (const proto::NodeRecord& r : records) {
    const double w = RecordWeight(r);
    if (w <= 0 || r.job.empty()) continue;
    const double age = static_cast<double>(std::max<int64_t>(0, now_unix_ms - r.unix_ms));
    const double decayed = w * std::exp2(-age / half_life);
    if (r.kind == Kind::kHardware) {
      double& best = signals[r.job][r.detail][r.incident];
      best = std::max(best, decayed);
      continue;
    }
    double& best = by_job[r.job][r.incident][r.kind];
    best = std::max(best, decayed);
  }
  // Each signal goes with the heaviest incident that carried it (else the first).
  for (const auto& [job, of_job] : signals) {
    for (const auto& [detail, incidents] : of_job) {
      auto& job_incidents = by_job[job];
      std::string best_incident = incidents.begin()->first;
      double best_other = -1, weight = 0;
      for (const auto& [incident, w] : incidents) {
        weight = std::max(weight, w);
        double other = 0;
        if (auto it = job_incidents.find(incident); it != job_incidents.end()) {
          for (const auto& [kind, kw] : it->second) other += kind == Kind::kHardware ? 0 : kw;
        }
        if (other > best_other) {
          best_other = other;
          best_incident = incident;
        }
      }
      double& hw = job_incidents[best_incident][Kind::kHardware];
      hw = std::max(hw, weight);
    }
  }
  double score = 0;
  for (const auto& [job, incidents] : by_job) {
    std::vector<double> values;
    for (const auto& [incident, kinds] : incidents) {
      double v = 0;
      for (const auto& [kind, w] : kinds) v += w;
      values.push_back(v);
    }
    std::sort(values.begin(), values.end(), std::greater<>());
    for (size_t k = 0; k < values.size(); ++k) score += values[k] / static_cast<double>(k + 1);
  }
  return score;
}

NodeStanding Assess(std::string node, std::vector<proto::NodeRecord> records, int64_t now_unix_ms,
                    const LemonOptions& options) {
  NodeStanding s;
  s.node = std::move(node);
  std::sort(records.begin(), records.end(), NewerFirst);
  const size_t all = records.size();
  records.erase(std::unique(records.begin(), records.end(),
                            [](const proto::NodeRecord& a, const proto::NodeRecord& b) { return Identity(a) == Identity(b); }),
                records.end());
  s.duplicates = all - records.size();
  std::set<std::string> jobs;
  for (const proto::NodeRecord& r : records) {
    ++s.counts[static_cast<size_t>(r.kind)];
    if (!r.job.empty() && jobs.insert(r.job).second) s.jobs.push_back(r.job);
  }
  if (!records.empty()) s.last = records.front();
  s.score = LemonScore(records, now_unix_ms, options);
  s.lemon = s.score >= kLemonThreshold;
  s.records = std::move(records);
  return s;
}

void SortWorstFirst(std::vector<NodeStanding>* nodes) {
  std::sort(nodes->begin(), nodes->end(), [](const NodeStanding& a, const NodeStanding& b) {
    if (a.score != b.score) return a.score > b.score;
    const int64_t la = a.last ? a.last->unix_ms : 0, lb = b.last ? b.last->unix_ms : 0;
    if (la != lb) return la > lb;
    return a.node < b.node;
  });
}

}  // namespace ft::master
