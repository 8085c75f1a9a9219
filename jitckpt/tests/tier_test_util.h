// Helpers of the tier and restore-loader tests: the files under a directory, a log capture, an
// aligned buffer (what an arena's data region looks like to PersistCopy), a flipped bit.
#ifndef FT_JITCKPT_TESTS_TIER_TEST_UTIL_H_
#define FT_JITCKPT_TESTS_TIER_TEST_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"

namespace ft::ckpt::testing {

// Regular files below `dir`, relative paths, sorted.
inline std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file()) out.push_back(std::filesystem::relative(it->path(), dir).native());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class CapturedLog : public LogSink {
 public:
  CapturedLog() { log::SetSink(this); }
  ~CapturedLog() override { log::SetSink(nullptr); }
  void Write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  }
  // Lines containing every one of `parts`.
  size_t Count(std::initializer_list<std::string_view> parts) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const std::string& line : lines_) {
      bool all = true;
      for (std::string_view p : parts) all = all && line.find(p) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeDeleter>;

// A copy of `bytes` at an address aligned to `align`, plus `offset` (to make it unaligned).
inline AlignedBytes AlignedCopy(const std::vector<uint8_t>& bytes, size_t align, size_t offset = 0) {
  size_t size = (bytes.size() + offset + align - 1) / align * align;
  AlignedBytes out(static_cast<uint8_t*>(std::aligned_alloc(align, size == 0 ? align : size)));
  std::memcpy(out.get() + offset, bytes.data(), bytes.size());
  return out;
}

// Flips one bit of the file at `offset`.
inline bool FlipBitInFile(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t byte = 0;
  bool ok = ::pread(fd, &byte, 1, static_cast<off_t>(offset)) == 1;
  byte ^= 0x10;
  ok = ok && ::pwrite(fd, &byte, 1, static_cast<off_t>(offset)) == 1;
  ::close(fd);
  return ok;
}

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_TIER_TEST_UTIL_H_
