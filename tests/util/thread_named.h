// A thread of this process found by the name it gave itself (pthread_setname_np, as libft.so's
// ft-poller and ft-ckpt threads do): for tests that signal it or read what it ran.
#ifndef FT_TESTS_UTIL_THREAD_NAMED_H_
#define FT_TESTS_UTIL_THREAD_NAMED_H_

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace ft::test_util {

// The thread id of this process's thread named `name` (/proc/self/task/*/comm), or 0.
inline pid_t ThreadNamed(std::string_view name) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) return static_cast<pid_t>(std::stoi(task.path().filename()));
  }
  return 0;
}

}  // namespace ft::test_util

#endif  // FT_TESTS_UTIL_THREAD_NAMED_H_
