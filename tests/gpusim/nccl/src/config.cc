#include "config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpusim::nccl {
namespace {

using Parser = bool (*)(const char* value, Config* cfg);

bool ParseTimeout(const char* v, Config* cfg) {
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(d > 0)) return false;
  cfg->init_timeout_s = d;
  return true;
}

bool ParseDebug(const char* v, Config* cfg) {
  cfg->debug = std::strcmp(v, "0") != 0 && v[0] != '\0';
  return true;
}

bool ParseChunk(const char* v, Config* cfg) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v) return false;
  if (*end == 'k' || *end == 'K') {
    n <<= 10;
    ++end;
  } else if (*end == 'm' || *end == 'M') {
    n <<= 20;
    ++end;
  }
  if (*end != '\0' || n < 4096 || n > (256ull << 20)) return false;
  cfg->chunk_bytes = n;
  return true;
}

bool ParsePrefix(const char* v, Config* cfg) {
  if (v[0] != '/' || std::strchr(v + 1, '/') != nullptr || std::strlen(v) > 200) return false;
  cfg->shm_prefix = v;
  return true;
}

// "<name>:<N>[,<name>:<N>...]"
bool ParseStall(const char* v, Config* cfg) {
  std::vector<StallRule> rules;
  std::string s(v);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      size_t colon = item.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) return false;
      char* end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(item.c_str() + colon + 1, &end, 10);
      if (errno != 0 || *end != '\0') return false;
      rules.push_back({item.substr(0, colon), n});
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  cfg->stalls = std::move(rules);
  return true;
}

// <comm>:<ms>[@<rank>+<rank>...][,...]
bool ParseSlow(const char* v, Config* cfg) {
  std::vector<SlowRule> rules;
  std::string s(v);
  size_t pos = 0;
  auto number = [](const std::string& text, long max, long* out) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || n < 0 || n > max) return false;
    *out = n;
    return true;
  };
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      SlowRule rule;
      std::string ranks;
      if (size_t at = item.find('@'); at != std::string::npos) {
        ranks = item.substr(at + 1);
        item.resize(at);
        if (ranks.empty()) return false;
      }
      size_t colon = item.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) return false;
      long ms = 0;
      if (!number(item.substr(colon + 1), 600000, &ms)) return false;
      rule.comm = item.substr(0, colon);
      rule.ms = static_cast<int>(ms);
      for (size_t p = 0; !ranks.empty() && p <= ranks.size();) {
        size_t plus = ranks.find('+', p);
        long r = 0;
        if (!number(ranks.substr(p, plus == std::string::npos ? std::string::npos : plus - p), 1 << 30, &r)) {
          return false;
        }
        rule.ranks.push_back(static_cast<int>(r));
        if (plus == std::string::npos) break;
        p = plus + 1;
      }
      rules.push_back(std::move(rule));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  cfg->slows = std::move(rules);
  return true;
}

bool ParseRank(const char* v, Config* cfg) {
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 0 || n > (1 << 30)) return false;
  cfg->process_rank = static_cast<int>(n);
  return true;
}

bool ParseMs(const char* v, int* out) {
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 0 || n > 600000) return false;
  *out = static_cast<int>(n);
  return true;
}
bool ParseTeardown(const char* v, Config* cfg) { return ParseMs(v, &cfg->teardown_ms); }
bool ParseLaunchDelay(const char* v, Config* cfg) { return ParseMs(v, &cfg->launch_delay_ms); }
bool ParseViolationAbort(const char* v, Config* cfg) {
  cfg->abort_on_violation = std::strcmp(v, "0") != 0 && v[0] != '\0';
  return true;
}

struct Entry {
  const char* key;
  Parser parse;
  const char* help;
};

// The one table of settings (README.md lists the same).
constexpr Entry kTable[] = {
    {"GPUSIM_NCCL_INIT_TIMEOUT_S", ParseTimeout,
     "seconds a communicator init (or split exchange) waits for all members (default 120)"},
    {"GPUSIM_NCCL_DEBUG", ParseDebug, "1: print init/abort lines on stderr"},
    {"GPUSIM_NCCL_CHUNK_BYTES", ParseChunk,
     "bytes per rank per collective round (default 1M, 4K..256M, suffix K/M); all members "
     "of a communicator must agree"},
    {"GPUSIM_NCCL_SHM_PREFIX", ParsePrefix,
     "name prefix of the shared-memory segments (default /gpusim-nccl-)"},
    {"GPUSIM_NCCL_STALL", ParseStall,
     "<comm>:<N>[,...]: collective N+1 on that communicator never completes (until abort)"},
    {"GPUSIM_NCCL_SLOW", ParseSlow,
     "<comm>:<ms>[@<rank>+<rank>...][,...]: every collective on that communicator takes <ms> longer "
     "once all its members arrived, and every send once its receiver is there (a slow link), in the processes whose "
     "RANK is listed (all if none)"},
    {"RANK", ParseRank, "the launcher's global rank of this process (GPUSIM_NCCL_SLOW's rank list)"},
    {"GPUSIM_NCCL_TEARDOWN_MS", ParseTeardown,
     "milliseconds ncclCommDestroy/ncclCommAbort spend tearing down (default 0, max 600000)"},
    {"GPUSIM_NCCL_LAUNCH_DELAY_MS", ParseLaunchDelay,
     "milliseconds a nonblocking communicator's operations stay ncclInProgress before their "
     "work is enqueued (default 0; an abort ends the wait)"},
    {"GPUSIM_NCCL_VIOLATION_ABORT", ParseViolationAbort,
     "1: abort() the process at the first use of a communicator NCCL forbids (see README)"},
};

}  // namespace

Config LoadConfig() {
  Config cfg;
  for (const Entry& e : kTable) {
    const char* v = std::getenv(e.key);
    if (v == nullptr) continue;
    if (!e.parse(v, &cfg)) {
      cfg.problems.push_back(std::string("ignoring malformed ") + e.key + "=\"" + v + "\" (" +
                             e.help + ")");
    }
  }
  return cfg;
}

void DebugLog(const Config& cfg, const char* fmt, ...) {
  if (!cfg.debug) return;
  char line[1024];
  int n = std::snprintf(line, sizeof line, "gpusim-nccl[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = std::strlen(line);
  line[len] = '\n';
  // One write so lines of concurrent processes do not interleave.
  ssize_t ignored = write(STDERR_FILENO, line, len + 1);
  (void)ignored;
}

}  // namespace gpusim::nccl
