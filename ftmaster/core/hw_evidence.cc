#include "ftmaster/core/hw_evidence.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ft::master {

void HwLog::Add(proto::HwSignal s) {
  std::deque<proto::HwSignal>& q = by_node_[s.node];
  // Workers report in their own order; kept sorted by time so Of can cut a range.
  auto at = std::upper_bound(q.begin(), q.end(), s.unix_ms,
                             [](int64_t t, const proto::HwSignal& x) { return t < x.unix_ms; });
  q.insert(at, std::move(s));
  while (q.size() > kHwPerNode) q.pop_front();
}

std::vector<proto::HwSignal> HwLog::Of(const std::string& node, int64_t from_ms, int64_t to_ms) const {
  std::vector<proto::HwSignal> out;
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return out;
  for (const proto::HwSignal& s : it->second) {
    if (s.unix_ms >= from_ms && s.unix_ms <= to_ms) out.push_back(s);
  }
  return out;
}

void HwLog::Prune(int64_t before_ms) {
  for (auto it = by_node_.begin(); it != by_node_.end();) {
    std::deque<proto::HwSignal>& q = it->second;
    while (!q.empty() && q.front().unix_ms < before_ms) q.pop_front();
    it = q.empty() ? by_node_.erase(it) : std::next(it);
  }
}

size_t HwLog::size() const {
  size_t n = 0;
  for (const auto& [node, q] : by_node_) n += q.size();
  return n;
}

std::string DescribeSignal(const proto::HwSignal& s) {
  std::string what;
  if (s.kind == "xid") {
    what = fmt::format("Xid {}", s.value);
  } else if (s.total != 0 || s.value > 1) {
    what = fmt::format("{} +{}", s.kind, s.value);
  } else {
    what = s.kind;
  }
  std::string where;
  if (s.source == "rdma") {
    where = "NIC " + s.device;
  } else if (s.device.empty() || s.device == "host") {
    where = "the host";
  } else {
    where = "GPU " + s.device;
  }
  std::string whose;
  if (!s.ranks.empty()) {
    whose = s.ranks.size() == 1 ? " (rank " : " (ranks ";
    for (size_t i = 0; i < s.ranks.size(); ++i) whose += (i ? "," : "") + std::to_string(s.ranks[i]);
    whose += ")";
  }
  return fmt::format("{}{} on {}{}", s.critical ? "critical " : "", what, where, whose);
}

std::string EvidenceLine(const proto::HwSignal& s) {
  return fmt::format("hardware on {}: {}{}", s.node, DescribeSignal(s), s.detail.empty() ? "" : ": " + s.detail.substr(0, 120));
}

void AttachHardware(std::span<proto::Incident> incidents, const HwLog& log, int64_t unix_ms) {
  for (proto::Incident& incident : incidents) {
    if (incident.suspects.empty()) continue;
    std::set<std::string> nodes;
    std::set<int> suspects;
    for (const proto::Suspect& s : incident.suspects) {
      if (!s.node.empty()) nodes.insert(s.node);
      suspects.insert(s.rank);
    }
    const int64_t first = incident.first_event_unix_ms > 0 ? incident.first_event_unix_ms : unix_ms;
    std::vector<proto::HwSignal> found;
    for (const std::string& node : nodes) {
      std::vector<proto::HwSignal> of = log.Of(node, first - kEvidenceLookbackMs, unix_ms);
      if (of.empty()) {
        incident.evidence.push_back(fmt::format("hardware: none found on {} from {} s before the incident",
                                                node, kEvidenceLookbackMs / 1000));
      }
      for (proto::HwSignal& s : of) found.push_back(std::move(s));
    }
    auto own = [&](const proto::HwSignal& s) {
      return std::any_of(s.ranks.begin(), s.ranks.end(), [&](int r) { return suspects.count(r) > 0; });
    };
    std::stable_sort(found.begin(), found.end(), [&](const proto::HwSignal& a, const proto::HwSignal& b) {
      if (a.critical != b.critical) return a.critical;
      if (own(a) != own(b)) return own(a);
      return a.unix_ms > b.unix_ms;
    });
    if (found.size() > kHwPerIncident) found.resize(kHwPerIncident);
    for (const proto::HwSignal& s : found) incident.evidence.push_back(EvidenceLine(s));
    incident.hardware = std::move(found);
    incident.hardware_checked = true;
  }
}

std::vector<const proto::HwSignal*> CriticalOn(const proto::Incident& incident, const std::string& node) {
  std::vector<const proto::HwSignal*> out;
  for (const proto::HwSignal& s : incident.hardware) {
    if (s.critical && s.node == node) out.push_back(&s);
  }
  return out;
}

}  // namespace ft::master
