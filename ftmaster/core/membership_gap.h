// ft::master::MembershipGap: what the membership lacks that an incident window's decision
// needs — a rank that raised one of its events, or ranks of the job's world (by its members'
// world size, or an explicit --topology). A master that decides without them names no save
// target for a rank it does not know (the shard counts as having no healthy replica: a stop
// without a checkpoint) and stops no node it does not know (the workers set names none either
// after Redis lost its data: a seeded campaign schedule left a frozen rank's job hung until its
// launcher's timeout). Redis that lost its data (a restart without persistence, a failover,
// FLUSHALL) is the case: every worker writes its ranks again once it reconnects, within its
// reconnect backoff and a report. The window waits that long for them (window_round.cc), not
// longer: a rank that never registers (a process without libft.so) must not hold a decision.
// Pure.
#ifndef FT_FTMASTER_CORE_MEMBERSHIP_GAP_H_
#define FT_FTMASTER_CORE_MEMBERSHIP_GAP_H_

#include <span>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

struct MembershipGap {
  std::vector<int> event_ranks;  // ranks of the window's events with no membership (sorted)
  int world = 0;                 // the job's world size as known (0: not known)
  int members = 0;               // distinct ranks the membership holds
  bool empty() const { return event_ranks.empty() && members >= world; }
  // "ranks 3, 7 of its events; 2 of the job's 4 ranks known" (only the parts that apply).
  std::string Text() const;
};

// `explicit_world`: an explicit topology's world size (0: none).
MembershipGap FindMembershipGap(std::span<const proto::Membership> members, std::span<const proto::Event> events,
                                int explicit_world);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_MEMBERSHIP_GAP_H_
