// ft::worker::StackCapture: the native stacks of one process, taken by elfutils' `eu-stack -p
// <pid>` (ptrace: a stopped process is read without being resumed; a running one is stopped
// for the tens of milliseconds the unwind takes). Started without blocking; the worker's loop
// polls it. ParseEuStack and SummarizeStacks are pure.
//
// Not thread-safe: one owner (the command runner).
#ifndef FT_FTWORKER_STACKS_STACK_CAPTURE_H_
#define FT_FTWORKER_STACKS_STACK_CAPTURE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::worker {

struct StackThread {
  int tid = 0;
  std::vector<std::string> frames;  // innermost first; "??" where no symbol was found
};

// eu-stack's text ("TID 123:" then "#0  0x00007f... pause" lines) as threads.
std::vector<StackThread> ParseEuStack(std::string_view text);

// One line per thread, the process's main thread (tid == pid) first: "tid 123: pause <-
// InjectHostFault(...) <- main", at most `max_frames` frames each, at most `max_bytes` in all.
std::string SummarizeStacks(const std::vector<StackThread>& threads, int pid, size_t max_frames = 12,
                            size_t max_bytes = 4000);

class StackCapture {
 public:
  ~StackCapture();  // kills the tool if it still runs
  StackCapture(const StackCapture&) = delete;
  StackCapture& operator=(const StackCapture&) = delete;

  // Runs `tool` (eu-stack) on `pid`. A tool that cannot be started is a non-OK Status.
  static Status Start(const std::string& tool, int pid, uint64_t now_ns, std::unique_ptr<StackCapture>* out);
  // False while the tool runs (and `timeout_ns` has not passed since Start); then true with
  // *status OK and *summary set, or *status saying why not (the tool failed: no ptrace
  // permission, the process gone; the timeout).
  bool Poll(uint64_t now_ns, std::string* summary, Status* status);
  int pid() const { return target_; }

  static constexpr uint64_t kTimeoutNs = 5'000'000'000;

 private:
  StackCapture(pid_t child, int out_fd, int target, uint64_t started_ns)
      : child_(child), out_fd_(out_fd), target_(target), started_ns_(started_ns) {}
  void Drain();

  pid_t child_;
  int out_fd_;
  int target_;
  uint64_t started_ns_;
  std::string output_;
  bool reaped_ = false;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_STACKS_STACK_CAPTURE_H_
