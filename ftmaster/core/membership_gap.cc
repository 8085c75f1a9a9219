#include "ftmaster/core/membership_gap.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace ft::master {

std::string MembershipGap::Text() const {
  std::vector<std::string> parts;
  if (!event_ranks.empty()) {
    parts.push_back(fmt::format("rank{} {} of its events", event_ranks.size() == 1 ? "" : "s",
                                fmt::join(event_ranks, ", ")));
  }
  if (members < world) parts.push_back(fmt::format("{} of the job's {} ranks known", members, world));
  return fmt::format("{}", fmt::join(parts, "; "));
}

MembershipGap FindMembershipGap(std::span<const proto::Membership> members, std::span<const proto::Event> events,
                                int explicit_world) {
  MembershipGap gap;
  gap.world = std::max(explicit_world, 0);
  std::unordered_set<int> known;
  known.reserve(members.size());
  for (const proto::Membership& m : members) {
    if (m.rank < 0) continue;
    known.insert(m.rank);
    gap.world = std::max(gap.world, m.world_size);
  }
  gap.members = static_cast<int>(known.size());
  for (const proto::Event& e : events) {
    if (e.rank >= 0 && !known.contains(e.rank)) gap.event_ranks.push_back(e.rank);
  }
  std::sort(gap.event_ranks.begin(), gap.event_ranks.end());
  gap.event_ranks.erase(std::unique(gap.event_ranks.begin(), gap.event_ranks.end()), gap.event_ranks.end());
  return gap;
}

}  // namespace ft::master
