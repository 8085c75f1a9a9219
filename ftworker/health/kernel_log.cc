#include "ftworker/health/kernel_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "ftworker/health/pci_bus_id.h"
#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {
namespace {

constexpr size_t kDetailBytes = 200;

// The decimal number at the start of `s` (advanced past it), or nullopt.
std::optional<int64_t> TakeNumber(std::string_view* s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || ptr == s->data()) return std::nullopt;
  s->remove_prefix(static_cast<size_t>(ptr - s->data()));
  return v;
}

// The number after `key` in `message` ("pid=1234"), or 0.
int NumberAfter(std::string_view message, std::string_view key) {
  size_t at = message.find(key);
  if (at == std::string_view::npos) return 0;
  std::string_view rest = message.substr(at + key.size());
  std::optional<int64_t> v = TakeNumber(&rest);
  return v && *v > 0 && *v < (int64_t{1} << 31) ? static_cast<int>(*v) : 0;
}

int64_t ClockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

std::optional<proto::HwSignal> ParseKernelLogRecord(std::string_view record, int64_t boot_unix_ms) {
  const size_t semi = record.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  std::string_view prefix = record.substr(0, semi);
  std::string_view message = record.substr(semi + 1);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.remove_suffix(1);
  // "<prio>,<seq>,<usec>,<flags>": the third field is the time.
  std::optional<int64_t> prio = TakeNumber(&prefix);
  if (!prio || prefix.empty() || prefix[0] != ',') return std::nullopt;
  prefix.remove_prefix(1);
  if (!TakeNumber(&prefix) || prefix.empty() || prefix[0] != ',') return std::nullopt;
  prefix.remove_prefix(1);
  std::optional<int64_t> usec = TakeNumber(&prefix);
  if (!usec || *usec < 0) return std::nullopt;

  proto::HwSignal s;
  s.source = "kmsg";
  s.unix_ms = boot_unix_ms + *usec / 1000;
  s.detail = std::string(message.substr(0, kDetailBytes));
  constexpr std::string_view kXidTag = "NVRM: Xid (";
  if (size_t at = message.find(kXidTag); at != std::string_view::npos) {
    std::string_view rest = message.substr(at + kXidTag.size());
    if (rest.substr(0, 4) == "PCI:") rest.remove_prefix(4);  // older drivers leave it out
    const size_t close = rest.find(')');
    if (close == std::string_view::npos) return std::nullopt;
    // "0000:3b:00": domain:bus:device, the function left out.
    std::optional<std::string> bus = NormalizePciBusId(std::string(rest.substr(0, close)) + ".0");
    if (!bus) return std::nullopt;
    rest.remove_prefix(close + 1);
    if (rest.size() < 2 || rest[0] != ':' || rest[1] != ' ') return std::nullopt;
    rest.remove_prefix(2);
    std::optional<int64_t> xid = TakeNumber(&rest);
    if (!xid || *xid <= 0) return std::nullopt;
    s.device = *bus;
    s.kind = std::string(kXid);
    s.value = *xid;
    s.pid = NumberAfter(rest, "pid=");
  } else if (message.find("mce: [Hardware Error]") != std::string_view::npos ||
             message.find("Machine check events logged") != std::string_view::npos) {
    s.device = "host";
    s.kind = std::string(kMce);
  } else if (message.find("Killed process ") != std::string_view::npos) {
    // "Out of memory: Killed process 1234 (python3) ...", "Memory cgroup out of memory: ...".
    s.device = "host";
    s.kind = std::string(kOomKill);
    s.pid = NumberAfter(message, "Killed process ");
    if (s.pid == 0) return std::nullopt;
  } else if (message.substr(0, 9) == "oom-kill:") {
    // The summary the kernel (4.19+) writes just before "Killed process" for the same victim:
    // "oom-kill:constraint=...,task_memcg=/...,task=python3,pid=1234,uid=0". KernelLog says
    // one of the two.
    s.device = "host";
    s.kind = std::string(kOomKill);
    s.pid = NumberAfter(message, ",pid=");
    if (s.pid == 0) return std::nullopt;
  } else {
    return std::nullopt;
  }
  s.critical = IsCritical(s.kind, s.value);
  return s;
}

KernelLog::~KernelLog() { close(fd_); }

Status KernelLog::Open(const std::string& path, std::unique_ptr<KernelLog>* out) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const bool denied = err == EACCES || err == EPERM;
    return Status::FromErrno(err, fmt::format("open {}{}", path,
                                              denied ? " (kernel.dmesg_restrict: run ftworker as root, or set "
                                                       "FT_KMSG_PATH=\"\" to stop reading the kernel log)"
                                                     : ""));
  }
  lseek(fd, 0, SEEK_END);  // /dev/kmsg: only new records; a file: what is appended
  out->reset(new KernelLog(fd));
  return Status::Ok();
}

std::vector<proto::HwSignal> KernelLog::Poll() {
  std::vector<proto::HwSignal> out;
  // A record's time counts microseconds since boot on the kernel's log clock (local_clock),
  // which stops during suspend as CLOCK_MONOTONIC does; CLOCK_BOOTTIME does not stop, so
  // realtime - boottime would misdate every record after a suspend. Realtime - monotonic is
  // when the machine booted as the log clock sees it (to within the clocks' drift).
  const int64_t boot_unix_ms = ClockMs(CLOCK_REALTIME) - ClockMs(CLOCK_MONOTONIC);
  char buf[kMaxLineBytes];  // /dev/kmsg refuses a read shorter than its record (at most 8 KiB)
  size_t records = 0;
  for (size_t reads = 0; records < kMaxRecords && reads < 2 * kMaxRecords; ++reads) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n < 0 && (errno == EPIPE || errno == EINTR)) continue;  // EPIPE: records overwritten before they were read
    if (n <= 0) break;
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(partial_.data() + start, nl - start);
      if (std::exchange(skip_line_, false)) continue;  // the end of a line too long to be a record
      if (line.empty() || line[0] == ' ') continue;      // a record's continuation (SUBSYSTEM=...)
      ++records;
      std::optional<proto::HwSignal> s = ParseKernelLogRecord(line, boot_unix_ms);
      if (!s) continue;
      if (s->kind == kOomKill) {
        // One kill writes two lines naming the victim ("oom-kill:..." then "Killed process").
        // Each poll dates records from its own reading of the two clocks, a millisecond either
        // way: the two lines of one kill can read a millisecond apart in either order.
        if (s->pid == last_oom_pid_ && std::abs(s->unix_ms - last_oom_unix_ms_) < 5000) continue;
        last_oom_pid_ = s->pid;
        last_oom_unix_ms_ = s->unix_ms;
      }
      out.push_back(std::move(*s));
    }
    partial_.erase(0, start);
    if (partial_.size() >= kMaxLineBytes) {  // a line with no end in sight: not a record
      partial_.clear();
      skip_line_ = true;
    }
  }
  return out;
}

}  // namespace ft::worker::health
