#include "ftmaster/core/window_reads.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <unordered_set>

namespace ft::master {
void WindowReads::Rebuild(std::span<const proto::Membership> membership) {
  membership_ = membership;
  rank_index_.clear();
  members_.clear();
  rank_index_.reserve(membership.size());
  for (size_t i = 0; i < membership.size(); ++i) {
    const proto::Membership& m = membership[i];
    if (m.rank < 0) continue;
    auto [it, inserted] = rank_index_.emplace(m.rank, static_cast<int>(i));
    if (!inserted) {
      if (m.incarnation <= membership[static_cast<size_t>(it->second)].incarnation) continue;
      it->second = static_cast<int>(i);
    }
    for (const proto::CommMember& c : m.comms) members_[c.comm_id].push_back(m.rank);
  }
}

WindowReads::Plan WindowReads::Make(std::span<const proto::RankProgress> progress,
                                    std::span<const proto::Event> events) const {
  Plan plan;
  if (events.empty()) return plan;
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const proto::Event& e : events) first = std::min(first, e.unix_ms);

  std::unordered_map<int, const proto::RankProgress*> report;
  auto offer = [&](const proto::RankProgress& p) {
    if (p.rank < 0) return;
    const proto::RankProgress*& slot = report[p.rank];
    if (slot == nullptr || p.observed_unix_ms > slot->observed_unix_ms) slot = &p;
  };
  for (const proto::RankProgress& p : progress) offer(p);
  for (const proto::Event& e : events) offer(e.progress);
  auto find = [&](int rank) -> const proto::RankProgress* {
    auto it = report.find(rank);
    return it == report.end() ? nullptr : it->second;
  };

  std::unordered_set<uint64_t> comm_seen;
  std::unordered_set<int> rank_seen;
  std::vector<uint64_t> queue;
  std::vector<int> ranks;
  auto add_comm = [&](uint64_t id) {
    if (comm_seen.insert(id).second) queue.push_back(id);
  };
  // A rank of the window: its report, when known, says which communicators it waits on.
  auto add_rank = [&](int rank) {
    if (!rank_seen.insert(rank).second) return;
    ranks.push_back(rank);
    if (const proto::RankProgress* p = find(rank)) {
      for (const proto::CommRow& row : p->comms) {
        if (row.started_seq > row.completed_seq) add_comm(row.comm_id);
      }
    }
  };
  for (const proto::Event& e : events) {
    if (proto::Is(e, proto::EventKind::kTimeout) && e.comm_id != 0) {
      add_comm(e.comm_id);
      continue;
    }
    if (e.rank < 0) continue;
    add_rank(e.rank);
    auto it = rank_index_.find(e.rank);
    if (it != rank_index_.end()) {
      for (const proto::CommMember& c : membership_[static_cast<size_t>(it->second)].comms) {
        add_comm(c.comm_id);
      }
    }
    if (const proto::RankProgress* p = find(e.rank)) {
      for (const proto::CommRow& row : p->comms) add_comm(row.comm_id);
    }
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    auto it = members_.find(queue[head]);
    if (it == members_.end()) continue;
    for (int rank : it->second) add_rank(rank);
  }

  std::sort(ranks.begin(), ranks.end());
  for (int rank : ranks) {
    const proto::RankProgress* p = find(rank);
    bool gone = p != nullptr && proto::ProcessGone(p->state);
    auto it = rank_index_.find(rank);
    if (it != rank_index_.end() && proto::ProcessGone(membership_[static_cast<size_t>(it->second)].state)) {
      gone = true;
    }
    if (!gone && (p == nullptr || p->observed_unix_ms < first)) plan.needed.push_back(rank);
  }
  plan.members = std::move(ranks);
  return plan;
}

std::vector<proto::Membership> WindowReads::MembershipOf(const std::vector<int>& ranks) const {
  std::vector<proto::Membership> out;
  out.reserve(ranks.size());
  for (int rank : ranks) {
    auto it = rank_index_.find(rank);
    if (it != rank_index_.end()) out.push_back(membership_[static_cast<size_t>(it->second)]);
  }
  return out;
}

}  // namespace ft::master
