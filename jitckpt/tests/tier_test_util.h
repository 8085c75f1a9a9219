// Helpers of the tier and restore-loader tests: the files under a directory, the log capture, an
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
#include <memory>
#include <string>
#include <vector>

#include "tests/util/log_capture.h"

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

using test_util::LogCapture;

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
