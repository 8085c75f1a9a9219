#include "common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

namespace ft {

const char* SubsystemName(Subsystem subsystem) {
  switch (subsystem) {
    case Subsystem::kCommon: return "common";
    case Subsystem::kShm: return "shm";
    case Subsystem::kPreload: return "preload";
    case Subsystem::kWorker: return "worker";
    case Subsystem::kMaster: return "master";
    case Subsystem::kCkpt: return "ckpt";
    case Subsystem::kRdma: return "rdma";
    case Subsystem::kCount: break;
  }
  return "?";
}

namespace log {

std::atomic<int> g_levels[static_cast<int>(Subsystem::kCount)] = {
    static_cast<int>(LogLevel::kInfo), static_cast<int>(LogLevel::kInfo),
    static_cast<int>(LogLevel::kInfo), static_cast<int>(LogLevel::kInfo),
    static_cast<int>(LogLevel::kInfo), static_cast<int>(LogLevel::kInfo),
    static_cast<int>(LogLevel::kInfo)};

namespace {

std::atomic<int> g_rank{-1};
std::atomic<LogSink*> g_sink{nullptr};

const char kLevelLetters[] = "TDIWE";

bool ParseLevel(std::string_view text, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
      {"off", LogLevel::kOff}};
  for (const auto& [name, level] : kNames) {
    if (text == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

bool ParseSubsystem(std::string_view text, Subsystem* out) {
  for (int i = 0; i < static_cast<int>(Subsystem::kCount); ++i) {
    if (text == SubsystemName(static_cast<Subsystem>(i))) {
      *out = static_cast<Subsystem>(i);
      return true;
    }
  }
  return false;
}

const std::string& HostName() {
  static const std::string host = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("?");
    return std::string(buf);
  }();
  return host;
}

}  // namespace

Status Configure(std::string_view default_level, std::string_view per_subsystem) {
  LogLevel base;
  if (!ParseLevel(default_level, &base)) {
    return Status::InvalidArgument("log level '" + std::string(default_level) +
                                   "' is not one of trace, debug, info, warn, error, off");
  }
  std::vector<LogLevel> levels(static_cast<int>(Subsystem::kCount), base);
  std::string_view rest = per_subsystem;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    Subsystem subsystem;
    LogLevel level;
    if (eq == std::string_view::npos || !ParseSubsystem(item.substr(0, eq), &subsystem) ||
        !ParseLevel(item.substr(eq + 1), &level)) {
      return Status::InvalidArgument("log setting '" + std::string(item) +
                                     "' is not subsystem=level (e.g. shm=debug)");
    }
    levels[static_cast<int>(subsystem)] = level;
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    g_levels[i].store(static_cast<int>(levels[i]), std::memory_order_relaxed);
  }
  return Status::Ok();
}

void SetRank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void SetSink(LogSink* sink) { g_sink.store(sink, std::memory_order_release); }

void Write(Subsystem subsystem, LogLevel level, std::string_view message) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm utc;
  gmtime_r(&now.tv_sec, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
  int level_index = static_cast<int>(level);
  char letter = level_index >= 0 && level_index < 5 ? kLevelLetters[level_index] : '?';
  int rank = g_rank.load(std::memory_order_relaxed);

  fmt::memory_buffer line;
  fmt::format_to(std::back_inserter(line), "{}.{:03d}Z {} ft[{}] host={} pid={}", stamp,
                 static_cast<int>(now.tv_nsec / 1000000), letter, SubsystemName(subsystem),
                 HostName(), static_cast<int>(getpid()));
  if (rank >= 0) fmt::format_to(std::back_inserter(line), " rank={}", rank);
  fmt::format_to(std::back_inserter(line), ": {}\n", message);

  LogSink* sink = g_sink.load(std::memory_order_acquire);
  if (sink != nullptr) {
    sink->Write(std::string_view(line.data(), line.size()));
    return;
  }
  // One write per line; a short or failed write to stderr is not worth failing for.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace log
}  // namespace ft
