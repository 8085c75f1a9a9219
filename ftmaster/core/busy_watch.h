// ft::master busy watch: when a rank the hang window found busy on the host (a checkpoint
// write, a data loader, a host-side computation) is back in the job, so that the window closes
// as "resolved" instead of raising a hang. Pure: the window round (window_round.h) reads the
// rank's newest progress and hands it in with what it recorded when the watch began.
//
// Back means all of:
//  - it is not frozen (a SIGSTOPped or silent process enters nothing, whatever its table says);
//  - it entered ops past those it had entered when the watch began;
//  - one of them after the watch began, by its own host's clock (observed_unix_ms minus the
//    entry's age): a worker that restarted during the watch reads ops the rank entered before
//    it, which moves the counts of a rank hung since (the campaign's seeds 1121 and 1030);
//  - it reached every collective a timeout of the window waits in, on the comms it is a
//    member of (point-to-point counts are each rank's own and are not compared).
// The clock comparison takes the master's and the node's clocks as one (NTP keeps them within
// milliseconds); a node's clock behind the master's only delays the verdict to a later look.
#ifndef FT_FTMASTER_CORE_BUSY_WATCH_H_
#define FT_FTMASTER_CORE_BUSY_WATCH_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

// Where a watched busy rank stood when the watch began.
struct BusyWatchStart {
  uint64_t entered_ops = 0;    // the sum of its comms' entered sequence numbers then
  int64_t since_unix_ms = 0;   // when the watch began (the master's clock)
};

// The sum of a table's entered sequence numbers over its comms.
uint64_t EnteredOps(const proto::RankProgress& p);

// When the rank last entered an op, in Unix ms by its node's clock; -1 never (or unknown).
int64_t LastEnteredUnixMs(const proto::RankProgress& p);

// Why the rank is not back in the job yet ("" when it is): one of the reasons above.
// window_events: the open window's events (its timeouts name the waited collectives).
std::string_view WhyNotBack(const proto::RankProgress& now, const BusyWatchStart& start,
                            const std::vector<proto::Event>& window_events);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_BUSY_WATCH_H_
