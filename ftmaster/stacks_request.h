// The master's request for the stuck code's stack: when it writes an incident that names live
// suspects (a hang, a frozen process, a transport hang, a busy rank), it asks each suspect's
// worker for the suspect's stacks, and the workers of a few healthy ranks for theirs, to
// compare with (`stacks` commands, ftworker/command_runner.h). The acks carry them;
// `ftmaster incidents` groups and shows them (cli.cc). A crashed rank has no stack to take.
#ifndef FT_FTMASTER_STACKS_REQUEST_H_
#define FT_FTMASTER_STACKS_REQUEST_H_

#include <cstdint>
#include <span>
#include <vector>

#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/store.h"

namespace ft::master {

// Healthy ranks asked for comparison, per incident.
inline constexpr size_t kStackHealthySample = 2;

// The XADDs of the `stacks` commands for `incidents` (those of the kinds above), ids
// "<incident>-stacks-<rank>"; none for a rank with no node in `members`.
std::vector<redis::Argv> StacksRequests(std::span<const proto::Incident> incidents,
                                        std::span<const proto::Membership> members, int64_t unix_ms,
                                        const proto::Keys& keys);

}  // namespace ft::master

#endif  // FT_FTMASTER_STACKS_REQUEST_H_
