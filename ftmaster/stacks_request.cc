#include "ftmaster/stacks_request.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "schema/streams.h"

namespace ft::master {
namespace {

bool HasStacks(const proto::Incident& i) {
  using proto::IncidentKind;
  return proto::Is(i, IncidentKind::kHang) || proto::Is(i, IncidentKind::kHostFrozen) ||
         proto::Is(i, IncidentKind::kTransportHang) || proto::Is(i, IncidentKind::kBusy);
}

}  // namespace

std::vector<redis::Argv> StacksRequests(std::span<const proto::Incident> incidents,
                                        std::span<const proto::Membership> members, int64_t unix_ms,
                                        const proto::Keys& keys) {
  std::map<int, const proto::Membership*> by_rank;
  for (const proto::Membership& m : members) {
    if (m.rank < 0 || m.node.empty() || proto::ProcessGone(m.state)) continue;
    const proto::Membership*& slot = by_rank[m.rank];
    if (slot == nullptr || m.incarnation > slot->incarnation) slot = &m;
  }
  std::vector<redis::Argv> writes;
  for (const proto::Incident& incident : incidents) {
    if (!HasStacks(incident)) continue;
    std::set<int> suspects;
    for (const proto::Suspect& s : incident.suspects) suspects.insert(s.rank);
    std::vector<int> ranks(suspects.begin(), suspects.end());
    // Healthy ranks to compare with: the lowest ranks that are not suspects (in a hang they
    // wait on the suspect: the dominant stack of the waiting ranks).
    size_t healthy = 0;
    for (const auto& [rank, m] : by_rank) {
      if (healthy == kStackHealthySample) break;
      if (suspects.count(rank)) continue;
      ranks.push_back(rank);
      ++healthy;
    }
    for (int rank : ranks) {
      auto it = by_rank.find(rank);
      if (it == by_rank.end()) continue;  // gone, or no node known: nothing to ask
      proto::Command command;
      command.id = fmt::format("{}-stacks-{}", incident.id, rank);
      command.kind = proto::CommandKindName(proto::CommandKind::kStacks);
      command.rank = rank;
      command.text = incident.id;
      command.unix_ms = unix_ms;
      command.decided_unix_ms = unix_ms;
      command.incarnations = {proto::RankIncarnation{rank, it->second->incarnation}};
      writes.push_back(schema::PostCommand(keys, it->second->node, command));
    }
  }
  return writes;
}

}  // namespace ft::master
