#include "ftworker/health/rdma_port_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {
namespace {

// The counters read, and the kind each becomes.
struct Counter {
  const char* file;
  std::string_view kind;
};
constexpr Counter kCounters[] = {
    {"counters/link_downed", kLinkDowned},
    {"counters/link_error_recovery", kLinkErrorRecovery},
    {"counters/symbol_error", kSymbolError},
    {"counters/port_rcv_errors", kPortRcvErrors},
    {"counters/port_xmit_discards", kPortXmitDiscards},
    {"counters/port_xmit_wait", kPortXmitWait},
    {"hw_counters/local_ack_timeout_err", kLocalAckTimeout},
    {"hw_counters/out_of_sequence", kOutOfSequence},
};

// A small sysfs file's text, or nullopt when it cannot be read (then *err is the errno).
std::optional<std::string> ReadSmall(const std::string& path, int* err = nullptr) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err != nullptr) *err = errno;
    return std::nullopt;
  }
  char buf[128];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  if (n < 0 && err != nullptr) *err = errno;
  close(fd);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::optional<uint64_t> ParseCounter(const std::string& text) {
  size_t end = text.find_first_of(" \n");
  std::string_view digits(text.data(), end == std::string::npos ? text.size() : end);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

}  // namespace

RdmaPortSource::RdmaPortSource(std::string sysfs_root, std::chrono::milliseconds rescan)
    : root_(std::move(sysfs_root)), rescan_ms_(rescan.count()) {}

void RdmaPortSource::Rescan(int64_t unix_ms) {
  next_rescan_ms_ = unix_ms + rescan_ms_;
  const std::string ib = root_ + "/class/infiniband";
  for (const std::string& dev : ListDir(ib)) {
    for (const std::string& port : ListDir(ib + "/" + dev + "/ports")) {
      const std::string name = dev + "/" + port;
      if (ports_.count(name)) continue;
      ports_[name].dir = ib + "/" + dev + "/ports/" + port;
    }
  }
}

std::vector<proto::HwSignal> RdmaPortSource::Poll(int64_t unix_ms) {
  // unix_ms is the wall clock: one set back (NTP, by hand) must not postpone the rescan.
  if (unix_ms >= next_rescan_ms_ || unix_ms + rescan_ms_ < next_rescan_ms_) Rescan(unix_ms);
  std::vector<proto::HwSignal> out;
  auto signal = [&](const std::string& port, std::string_view kind, int64_t value, int64_t total,
                    std::string detail) {
    out.push_back(MakeSignal("rdma", port, kind, value, total, unix_ms, std::move(detail)));
  };
  for (auto& [name, port] : ports_) {
    for (const Counter& c : kCounters) {
      const std::string path = port.dir + "/" + c.file;
      int err = 0;
      std::optional<std::string> text = ReadSmall(path, &err);
      std::optional<uint64_t> value = text ? ParseCounter(*text) : std::nullopt;
      if (!value) {
        // hw_counters are driver-specific: a missing one is normal; an unreadable or garbled
        // one is said once.
        if ((text || err != ENOENT) && complained_.insert(path).second) {
          FT_LOG(Info, Worker, "RDMA counter {} skipped ({}); the port's other counters are still read", path,
                 text ? "not a number" : std::strerror(err));
        }
        continue;
      }
      auto it = port.last.find(c.file);
      if (it != port.last.end() && *value > it->second) {
        signal(name, c.kind, static_cast<int64_t>(*value - it->second), static_cast<int64_t>(*value),
               fmt::format("{} {} -> {}", c.file, it->second, *value));
      }
      port.last[c.file] = *value;  // a counter that went down (reset): a new baseline
    }
    std::optional<std::string> state = ReadSmall(port.dir + "/state");
    if (!state) continue;
    while (!state->empty() && (state->back() == '\n' || state->back() == ' ')) state->pop_back();
    const bool active = state->find("ACTIVE") != std::string::npos;
    if (!active && port.active.value_or(true)) {
      int number = 0;
      std::from_chars(state->data(), state->data() + state->size(), number);
      signal(name, kPortDown, number, 0, "state " + *state);
    }
    port.active = active;
  }
  return out;
}

}  // namespace ft::worker::health
