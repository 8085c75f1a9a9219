// Capturing ft's log in tests: every line written while a LogCapture lives (it installs itself
// as the log sink and removes itself at the end). Thread-safe: the code under test may log from
// its own threads.
#ifndef FT_TESTS_UTIL_LOG_CAPTURE_H_
#define FT_TESTS_UTIL_LOG_CAPTURE_H_

#include <cstddef>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/mutex.h"

namespace ft::test_util {

class LogCapture : public LogSink {
 public:
  LogCapture() { log::SetSink(this); }
  ~LogCapture() override { log::SetSink(nullptr); }
  void Write(std::string_view line) override {
    MutexLock lock(&mu_);
    lines_.emplace_back(line);
  }
  // Lines containing every one of `parts`.
  size_t Count(std::initializer_list<std::string_view> parts) const {
    MutexLock lock(&mu_);
    size_t n = 0;
    for (const std::string& line : lines_) {
      bool all = true;
      for (std::string_view p : parts) all = all && line.find(p) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
  std::string All() const {
    MutexLock lock(&mu_);
    std::string out;
    for (const auto& l : lines_) out += l;
    return out;
  }

 private:
  mutable Mutex mu_;
  std::vector<std::string> lines_ GUARDED_BY(mu_);
};

}  // namespace ft::test_util

#endif  // FT_TESTS_UTIL_LOG_CAPTURE_H_
