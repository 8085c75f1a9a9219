// The Python frames of a rank: python/ft registers faulthandler on kPythonStackSignal writing to
// `<arena dir>/ft-pystack.<pid>` (its first line "ft-pystack <pid> <start time>", the process's
// start time from /proc/<pid>/stat, so a file a dead process left behind is never trusted for
// a new process with its pid: the signal's default action would kill it). The worker signals
// the process and reads what the handler appended. A stopped process cannot run the handler:
// its native stack is all there is.
#ifndef FT_FTWORKER_STACKS_PYTHON_STACK_H_
#define FT_FTWORKER_STACKS_PYTHON_STACK_H_

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ft::worker {

// SIGRTMIN + 6: no default use, unlikely to be an app's (python/ft/_stacks.py uses the same).
inline int PythonStackSignal() { return SIGRTMIN + 6; }

// A dump asked for: where the handler writes, and how long the file was before it.
struct PythonDump {
  std::string path;
  uint64_t offset = 0;
};

// Signals `pid` when its dump file names it (pid and start time) and it is not stopped;
// nullopt otherwise (not a Python rank of python/ft, stacks off in it, a stale file).
std::optional<PythonDump> AskPythonDump(const std::string& dir, int pid);
// What the handler wrote since the dump was asked for ("" none yet).
std::string ReadPythonDump(const PythonDump& dump);
// faulthandler's text as one line per thread, innermost first: "python thread 0x7f..:
// wait_for_batch (train.py:88) <- main (train.py:120)", the script's main thread first.
std::string SummarizePythonDump(std::string_view text, size_t max_frames = 12);

}  // namespace ft::worker

#endif  // FT_FTWORKER_STACKS_PYTHON_STACK_H_
