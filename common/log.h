// Logging with levels and subsystems. The level check is one relaxed atomic load and happens
// before any formatting, so a disabled FT_LOG costs nothing in a hot path. Each line carries
// time, level, subsystem, host, pid and rank (when known):
//   2026-11-22T04:10:00.123Z W ft[shm] host=n1 pid=4242 rank=3: segment ... ignored; ...
// Thread-safe; every line is written with a single write(2), so lines never interleave.
// Warnings and errors say what to do next.
#ifndef FT_COMMON_LOG_H_
#define FT_COMMON_LOG_H_

#include <fmt/format.h>

#include <atomic>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft {

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };
enum class Subsystem : int { kCommon = 0, kShm, kPreload, kWorker, kMaster, kCkpt, kRdma, kCount };

const char* SubsystemName(Subsystem subsystem);

// Where finished lines go. The default writes to stderr; tests install their own.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(std::string_view line) = 0;
};

namespace log {

// Parses "info" and "shm=debug,worker=warn" (FT_LOG_LEVEL, FT_LOG). On a bad value nothing
// changes and the error names the offending part.
Status Configure(std::string_view default_level, std::string_view per_subsystem);
// Rank to print on every line; -1 hides it. Host is read once, pid at each line (fork).
void SetRank(int rank);
// nullptr restores stderr. The sink must outlive its installation.
void SetSink(LogSink* sink);

extern std::atomic<int> g_levels[static_cast<int>(Subsystem::kCount)];

inline bool Enabled(Subsystem subsystem, LogLevel level) {
  return static_cast<int>(level) >=
         g_levels[static_cast<int>(subsystem)].load(std::memory_order_relaxed);
}

void Write(Subsystem subsystem, LogLevel level, std::string_view message);

}  // namespace log
}  // namespace ft

// FT_LOG(Warn, Shm, "segment {} ignored: {}; remove it with ftdump --reclaim", name, why);
#define FT_LOG(level, subsystem, ...)                                                        \
  do {                                                                                       \
    if (::ft::log::Enabled(::ft::Subsystem::k##subsystem, ::ft::LogLevel::k##level)) {       \
      ::ft::log::Write(::ft::Subsystem::k##subsystem, ::ft::LogLevel::k##level,              \
                       ::fmt::format(__VA_ARGS__));                                          \
    }                                                                                        \
  } while (0)

#endif  // FT_COMMON_LOG_H_
