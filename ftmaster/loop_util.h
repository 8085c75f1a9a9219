// Small helpers shared by the classes of the master's loop (master_loop.h: MasterLoop,
// WindowRound, ActionRunner, CkptRound, SummaryRound, JobMembership). Private to ftmaster/.
#ifndef FT_FTMASTER_LOOP_UTIL_H_
#define FT_FTMASTER_LOOP_UTIL_H_

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// A master-hash field of Unix ms times, comma-separated (`slow_evictions`, `failures:<node>`).
// Entries that are not a positive number are left out, and *garbled says there were some.
inline std::vector<int64_t> ParseUnixMsList(std::string_view text, bool* garbled = nullptr) {
  std::vector<int64_t> times;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    int64_t ms = 0;
    auto [end, ec] = std::from_chars(text.data() + at, text.data() + comma, ms);
    if (ec == std::errc() && end == text.data() + comma && ms > 0) {
      times.push_back(ms);
    } else if (garbled != nullptr) {
      *garbled = true;
    }
    at = comma + 1;
  }
  return times;
}

inline std::string UnixMsList(std::span<const int64_t> times) {
  std::string out;
  for (int64_t t : times) out += (out.empty() ? "" : ",") + std::to_string(t);
  return out;
}

}  // namespace ft::master

#endif  // FT_FTMASTER_LOOP_UTIL_H_
