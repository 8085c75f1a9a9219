// Small helpers shared by the classes of the master's loop (master_loop.h: MasterLoop,
// WindowRound, ActionRunner, CkptRound, SummaryRound, JobMembership). Private to ftmaster/.
#ifndef FT_FTMASTER_LOOP_UTIL_H_
#define FT_FTMASTER_LOOP_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "common/config.h"

namespace ft::master {

using Ms = std::chrono::milliseconds;

inline constexpr size_t kEventBatch = 1000;           // stream entries per XRANGE
inline constexpr int kMaxEventBatchesPerTick = 10;
inline constexpr Ms kAckPoll{50};
inline constexpr int kMaxWindowReadRounds = 16;        // HMGETs following waits, per read
inline constexpr const char* kSummaryChunk = "4096";   // HSCAN COUNT of the summary pass
inline constexpr const char* kRanksChunk = "8192";     // HSCAN COUNT of the membership pass
// Steady reads (the summary pass) take at most about 1/kSteadyShare of the master's time.
inline constexpr double kSteadyShare = 12;
inline constexpr Ms kStatePoll{1000};
inline constexpr Ms kSecretCheck{5000};  // STRLEN of the transfer secret (lost when Redis is)
// An open window's notice is renewed this often: a worker that missed it (restarted, or
// reconnected after a failover that lost it) writes its tables within about this; workers let
// a window go after 30 s without a renewal.
inline constexpr Ms kWindowNoticeRenew{1000};

inline int64_t ToMs(Duration d) { return std::chrono::duration_cast<Ms>(d).count(); }

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Spaces a periodic read so it takes at most 1/share (a third by default) of the loop's time.
inline Ms Spacing(Ms nominal, double cost_ms, double share = 3) {
  return std::max(nominal, Ms(static_cast<int64_t>(share * cost_ms)));
}

}  // namespace ft::master

#endif  // FT_FTMASTER_LOOP_UTIL_H_
