#include "ftworker/monitor/process_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <charconv>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"

namespace ft::worker {
namespace {

// A process that started this long after its segment's creation time cannot have made it
// (clock steps and boot-time rounding stay well inside this).
constexpr double kStartSlackS = 30;

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
  explicit SystemProbe(std::function<void(int pid)> after_open = {}) : after_open_(std::move(after_open)) {}

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

  Status Verify(const ProcessClaim& claim, VerifiedProcess* out) override {
    if (claim.pid <= 0) return Status::InvalidArgument(fmt::format("pid {} names no process", claim.pid));
    // The pidfd first: whatever the checks below read must be about the process it names,
    // which the final pidfd_send_signal(0) confirms (a pid recycled in between fails it).
    int fd = static_cast<int>(syscall(SYS_pidfd_open, claim.pid, 0));
    if (fd < 0 && errno == ESRCH) {
      return Status::NotFound(fmt::format("no process {} here (gone, or in another pid namespace)", claim.pid));
    }
    if (fd < 0 && errno != ENOSYS && errno != EPERM) {
      return Status::FromErrno(errno, fmt::format("pidfd_open({})", claim.pid));
    }
    if (fd < 0) {
      static bool warned = false;
      if (!warned) {
        warned = true;
        FT_LOG(Warn, Worker, "pidfd_open is not available ({}): ranks are signalled by pid after "
               "re-checking their start time, which leaves a short window for a recycled pid. "
               "Linux 5.3 or newer (and a seccomp profile that allows pidfd_open) closes it",
               strerror(errno));
      }
      if (!PidExists(claim.pid)) return Status::NotFound(fmt::format("no process {} here", claim.pid));
    }
    struct Closer {
      int fd;
      ~Closer() {
        if (fd >= 0) close(fd);
      }
    } closer{fd};  // on every early return
    if (after_open_) after_open_(claim.pid);
    Status owner = CheckOwner(claim);
    // A rank killed while it is checked leaves no /proc status to read: that is a death to
    // report (kNotFound: read, judged by its heartbeat), not a false claim to ignore for good.
    if (!owner.ok() && Ended(claim.pid, fd)) {
      return Status::NotFound(fmt::format("process {} ended while it was checked", claim.pid));
    }
    if (!owner.ok()) return owner;
    auto stat = ReadStat(claim.pid);
    if (!stat) {
      return Status::NotFound(fmt::format("process {} vanished while it was checked", claim.pid));
    }
    int64_t boot = BootTimeUnixS();
    if (boot > 0 && claim.created_unix_ns > 0) {
      double started_s = static_cast<double>(boot) +
                         static_cast<double>(stat->start_ticks) / static_cast<double>(TicksPerSecond());
      double created_s = static_cast<double>(claim.created_unix_ns) / 1e9;
      if (started_s > created_s + kStartSlackS) {
        return Status::Corrupt(fmt::format(
            "process {} started {:.0f} s after the segment was created: it is not the process "
            "that made it (a recycled pid)", claim.pid, started_s - created_s));
      }
    }
    Status mapped = CheckMapped(claim);
    if (!mapped.ok()) return mapped;
    if (fd >= 0 && syscall(SYS_pidfd_send_signal, fd, 0, nullptr, 0) != 0) {
      return Status::NotFound(fmt::format("process {} ended while it was checked", claim.pid));
    }
    closer.fd = -1;  // *out owns it now
    *out = VerifiedProcess(claim.pid, fd, stat->start_ticks);
    return Status::Ok();
  }

  Status Signal(const VerifiedProcess& process, int signal) override {
    if (!process.valid()) return Status::InvalidArgument("no verified process to signal");
    std::string what = fmt::format("signal {} to pid {}", strsignal(signal), process.pid());
    if (process.pidfd() >= 0) {
      if (syscall(SYS_pidfd_send_signal, process.pidfd(), signal, nullptr, 0) != 0) {
        if (errno == ESRCH) return Status::NotFound(what + ": the process is gone");
        return Status::FromErrno(errno, "pidfd_send_signal: " + what);
      }
      return Status::Ok();
    }
    auto stat = ReadStat(process.pid());
    if (!stat || stat->start_ticks != process.start_ticks()) {
      return Status::NotFound(what + ": the process is gone (its pid is free or someone else's now)");
    }
    if (kill(process.pid(), signal) != 0) return Status::FromErrno(errno, "kill: " + what);
    return Status::Ok();
  }

 private:
  // Whether the process `fd` (or, without a pidfd, `pid`) has ended and been reaped.
  bool Ended(int pid, int fd) {
    if (fd < 0) return !PidExists(pid);
    return syscall(SYS_pidfd_send_signal, fd, 0, nullptr, 0) != 0 && errno == ESRCH;
  }

  // The process has the segment mapped: a line of /proc/<pid>/maps with its inode and name.
  Status CheckMapped(const ProcessClaim& claim) {
    if (claim.inode == 0 || claim.file.empty()) return Status::Ok();  // nothing to look for
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/maps", claim.pid);
    FILE* maps = std::fopen(path, "re");
    if (maps == nullptr) {
      return Status::NotFound(fmt::format("cannot read {} ({}) to prove it is the rank's process",
                                          path, strerror(errno)));
    }
    char* line = nullptr;
    size_t capacity = 0;
    bool found = false;
    const std::string inode = std::to_string(claim.inode);
    while (!found && getline(&line, &capacity, maps) > 0) {
      // address perms offset dev inode pathname
      std::string_view rest(line);
      for (int field = 0; field < 4 && !rest.empty(); ++field) {
        size_t space = rest.find(' ');
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      }
      size_t end = rest.find(' ');
      if (end == std::string_view::npos || rest.substr(0, end) != inode) continue;
      found = rest.find("/" + claim.file) != std::string_view::npos;
    }
    std::free(line);
    std::fclose(maps);
    if (!found) {
      return Status::NotFound(fmt::format(
          "process {} does not have the segment mapped: the pid is not the rank's here (another "
          "pid namespace), or not the process that made it", claim.pid));
    }
    return Status::Ok();
  }

  // The process's real or effective uid is the segment's owner (/proc/<pid>/status "Uid:").
  Status CheckOwner(const ProcessClaim& claim) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/status", claim.pid);
    std::string text = ReadSmallFile(path);
    size_t at = text.find("\nUid:");
    if (at == std::string::npos) {
      return Status::Corrupt(fmt::format(
          "cannot read the owner of process {} ({}): it cannot be verified", claim.pid, path));
    }
    std::string_view rest = std::string_view(text).substr(at + 5);
    rest = rest.substr(0, rest.find('\n'));
    uint64_t ids[2] = {0, 0};
    for (uint64_t& id : ids) {
      size_t begin = rest.find_first_not_of(" \t");
      if (begin == std::string_view::npos) return Status::Corrupt(fmt::format("bad Uid line in {}", path));
      rest = rest.substr(begin);
      size_t end = rest.find_first_of(" \t");
      if (!ParseU64(rest.substr(0, end), &id)) return Status::Corrupt(fmt::format("bad Uid line in {}", path));
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    }
    if (ids[0] != claim.uid && ids[1] != claim.uid) {
      return Status::Corrupt(fmt::format(
          "process {} belongs to uid {} (effective {}), not to the segment's owner uid {}",
          claim.pid, ids[0], ids[1], claim.uid));
    }
    return Status::Ok();
  }

  std::function<void(int pid)> after_open_;
};

}  // namespace

VerifiedProcess::~VerifiedProcess() {
  if (pidfd_ >= 0) close(pidfd_);
}

VerifiedProcess::VerifiedProcess(VerifiedProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      start_ticks_(std::exchange(other.start_ticks_, 0)) {}

VerifiedProcess& VerifiedProcess::operator=(VerifiedProcess&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = std::exchange(other.pid_, 0);
    pidfd_ = std::exchange(other.pidfd_, -1);
    start_ticks_ = std::exchange(other.start_ticks_, 0);
  }
  return *this;
}

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);  // from field 3 (state)
  ProcStat stat;
  uint64_t utime = 0, stime = 0;
  int field = 3;
  bool have_start = false;
  while (!rest.empty() && field <= 52) {
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
    } else if (field == 52) {
      uint64_t status = 0;
      while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.remove_suffix(1);
      if (ParseU64(token, &status) && status <= 0xffff) stat.wait_status = static_cast<int>(status);
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

std::unique_ptr<ProcessProbe> NewSystemProcessProbeForTest(std::function<void(int pid)> after_open) {
  return std::make_unique<SystemProbe>(std::move(after_open));
}

}  // namespace ft::worker
