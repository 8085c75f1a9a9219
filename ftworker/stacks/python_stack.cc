#include "ftworker/stacks/python_stack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace ft::worker {
namespace {

// Field 22 of /proc/<pid>/stat (the start time in clock ticks since boot), "" when unreadable.
std::string StartTime(int pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = data.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(data.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && (field == "T" || field == "t")) return {};  // stopped: cannot run the handler
    if (i == 22) return field;
  }
  return {};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<PythonDump> AskPythonDump(const std::string& dir, int pid) {
  const std::string path = fmt::format("{}/ft-pystack.{}", dir, pid);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st;
  char header[128] = {};
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                  pread(fd, header, sizeof(header) - 1, 0) > 0;
  close(fd);
  if (!ok) return std::nullopt;
  std::string_view first(header, strnlen(header, sizeof(header)));
  first = first.substr(0, first.find('\n'));
  const std::string start = StartTime(pid);
  if (start.empty() || first != fmt::format("ft-pystack {} {}", pid, start)) return std::nullopt;
  if (kill(pid, PythonStackSignal()) != 0) return std::nullopt;
  return PythonDump{path, static_cast<uint64_t>(st.st_size)};
}

std::string ReadPythonDump(const PythonDump& dump) {
  std::ifstream f(dump.path, std::ios::binary);
  if (!f) return {};
  f.seekg(static_cast<std::streamoff>(dump.offset));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.size() > 64 * 1024) text.resize(64 * 1024);
  return text;
}

std::string SummarizePythonDump(std::string_view text, size_t max_frames) {
  // "Thread 0x00007f... (most recent call first):" / "Current thread 0x...", then
  // '  File "/x/train.py", line 88 in wait_for_batch' lines.
  struct Thread {
    std::string id;
    bool current = false;
    std::vector<std::string> frames;
  };
  std::vector<Thread> threads;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    std::string_view t = Trim(line);
    const bool current = t.rfind("Current thread ", 0) == 0;
    if (current || t.rfind("Thread ", 0) == 0) {
      std::string_view id = t.substr(current ? 15 : 7);
      threads.push_back({std::string(id.substr(0, id.find(' '))), current, {}});
      continue;
    }
    if (threads.empty() || t.rfind("File \"", 0) != 0) continue;
    const size_t q = t.find('"', 6);
    const size_t line_at = t.find(", line ");
    const size_t in_at = t.find(" in ");
    if (q == std::string_view::npos || line_at == std::string_view::npos || in_at == std::string_view::npos) continue;
    std::string_view file = t.substr(6, q - 6);
    file = file.substr(file.rfind('/') == std::string_view::npos ? 0 : file.rfind('/') + 1);
    std::string_view number = t.substr(line_at + 7, in_at - line_at - 7);
    threads.back().frames.push_back(fmt::format("{} ({}:{})", t.substr(in_at + 4), file, number));
  }
  // The script's main thread first: the one whose outermost frame is the module's code.
  std::stable_partition(threads.begin(), threads.end(), [](const Thread& th) {
    return !th.frames.empty() && th.frames.back().rfind("<module> ", 0) == 0;
  });
  std::string out;
  for (const Thread& th : threads) {
    if (th.frames.empty()) continue;
    std::string line = fmt::format("python thread {}:", th.id);
    for (size_t i = 0; i < th.frames.size() && i < max_frames; ++i) line += (i == 0 ? " " : " <- ") + th.frames[i];
    out += line + "\n";
    if (out.size() > 3000) break;
  }
  return out;
}

}  // namespace ft::worker
