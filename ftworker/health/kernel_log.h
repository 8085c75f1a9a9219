// ft::worker::health::KernelLog: the kernel log's hardware lines — NVRM Xid lines, machine
// checks, the OOM killer's victims — as signals. ParseKernelLogRecord is the pure parser of one
// /dev/kmsg record ("<prio>,<seq>,<usec>,<flags>[,...];<message>"); KernelLog follows a file
// of such records from its end: /dev/kmsg (one record per read) or, in tests, a regular file
// of lines.
//
// Poll is called by one thread (the health sampler's).
#ifndef FT_FTWORKER_HEALTH_KERNEL_LOG_H_
#define FT_FTWORKER_HEALTH_KERNEL_LOG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/messages.h"

namespace ft::worker::health {

// The signal one record says, or nullopt (any other line, or a garbled one). unix_ms is
// `boot_unix_ms` plus the record's microseconds since boot; detail is the message, at most 200
// bytes. Pure: reads only `record`, any bytes.
std::optional<proto::HwSignal> ParseKernelLogRecord(std::string_view record, int64_t boot_unix_ms);

class KernelLog {
 public:
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  // Opens `path` non-blocking at its end: only records written from now on are read. A path
  // that cannot be opened (no permission: kernel.dmesg_restrict) is a non-OK Status.
  static Status Open(const std::string& path, std::unique_ptr<KernelLog>* out);
  // The signals of the records written since the last poll, at most kMaxRecords records read
  // (the rest wait for the next poll). An OOM kill is one signal, though the kernel writes two
  // lines for it.
  std::vector<proto::HwSignal> Poll();

  static constexpr size_t kMaxRecords = 1000;
  // The longest record (the kernel's CONSOLE_EXT_LOG_MAX); a longer line in a file is dropped.
  static constexpr size_t kMaxLineBytes = 8192;

 private:
  explicit KernelLog(int fd) : fd_(fd) {}
  int fd_;
  std::string partial_;      // a regular file's last line, not yet ended
  bool skip_line_ = false;   // partial_ overflowed: drop up to the next newline
  int last_oom_pid_ = 0;     // the OOM victim said last, and its record's time
  int64_t last_oom_unix_ms_ = 0;
};

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_KERNEL_LOG_H_
