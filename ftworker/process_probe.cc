#include "ftworker/process_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

namespace ft::worker {
namespace {

// Reads a small /proc file whole; empty on any failure.
std::string ReadSmallFile(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[1024];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 64 * 1024) break;
  }
  close(fd);
  return out;
}

bool ParseU64(std::string_view text, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

class SystemProbe final : public ProcessProbe {
 public:
  bool PidExists(int pid) override {
    if (pid <= 0) return false;
    return kill(pid, 0) == 0 || errno == EPERM;
  }

  std::optional<ProcStat> ReadStat(int pid) override {
    if (pid <= 0) return std::nullopt;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    std::string text = ReadSmallFile(path);
    if (text.empty()) return std::nullopt;
    return ParseProcStat(text);
  }

  std::optional<uint64_t> ReadRunDelayNs(int pid) override {
    if (pid <= 0) return std::nullopt;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
    std::string text = ReadSmallFile(path);
    // "<on-cpu ns> <run-queue wait ns> <timeslices>\n"
    size_t first = text.find(' ');
    if (first == std::string::npos) return std::nullopt;
    size_t second = text.find(' ', first + 1);
    if (second == std::string::npos) return std::nullopt;
    uint64_t wait = 0;
    if (!ParseU64(std::string_view(text).substr(first + 1, second - first - 1), &wait)) return std::nullopt;
    return wait;
  }

  uint64_t TicksPerSecond() override {
    static const long ticks = sysconf(_SC_CLK_TCK);
    return ticks > 0 ? static_cast<uint64_t>(ticks) : 100;
  }

  int64_t BootTimeUnixS() override {
    static const int64_t btime = [] {
      std::string text = ReadSmallFile("/proc/stat");
      size_t at = text.find("\nbtime ");
      if (at == std::string::npos) return int64_t{0};
      size_t begin = at + 7;
      size_t end = text.find('\n', begin);
      uint64_t value = 0;
      if (!ParseU64(std::string_view(text).substr(begin, end - begin), &value)) return int64_t{0};
      return static_cast<int64_t>(value);
    }();
    return btime;
  }

  Status Signal(int pid, int signal) override {
    if (pid <= 0) return Status::InvalidArgument("no pid to signal");
    if (kill(pid, signal) != 0) {
      return Status::FromErrno(errno, "kill(" + std::to_string(pid) + ", " + strsignal(signal) + ")");
    }
    return Status::Ok();
  }
};

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);  // from field 3 (state)
  ProcStat stat;
  uint64_t utime = 0, stime = 0;
  int field = 3;
  bool have_start = false;
  while (!rest.empty() && field <= 22) {
    size_t space = rest.find(' ');
    std::string_view token = rest.substr(0, space);
    if (field == 3) {
      if (token.size() != 1) return std::nullopt;
      stat.state = token[0];
    } else if (field == 14) {
      if (!ParseU64(token, &utime)) return std::nullopt;
    } else if (field == 15) {
      if (!ParseU64(token, &stime)) return std::nullopt;
    } else if (field == 22) {
      if (!ParseU64(token, &stat.start_ticks)) return std::nullopt;
      have_start = true;
    }
    ++field;
    if (space == std::string_view::npos) break;
    rest = rest.substr(space + 1);
  }
  if (!have_start) return std::nullopt;
  stat.cpu_ticks = utime + stime;
  return stat;
}

ProcessProbe* SystemProcessProbe() {
  static SystemProbe probe;
  return &probe;
}

}  // namespace ft::worker
