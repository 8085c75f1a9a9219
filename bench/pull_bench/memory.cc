#include "bench/pull_bench/memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace ft::bench {

Buffer::~Buffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

bool Buffer::Allocate(uint64_t bytes, std::string* why) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *why = "mmap of " + std::to_string(bytes) + " bytes: " + std::strerror(errno);
    return false;
  }
  // Advice only: where transparent huge pages are off, the buffer works the same, a little slower.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(p);
  size_ = bytes;
  std::memset(data_, 0, size_);
  return true;
}

void FillPattern(uint8_t* data, uint64_t bytes) {
  const uint64_t words = bytes / 8;
  auto fill = [data](uint64_t begin, uint64_t end) {
    uint64_t* w = reinterpret_cast<uint64_t*>(data);
    for (uint64_t i = begin; i < end; ++i) {
      const uint64_t x = i * 0x9E3779B97F4A7C15ull;
      w[i] = x ^ (x >> 29);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(fill, 0, words / 2);
  fill(words / 2, words);
  for (auto& t : threads) t.join();
  for (uint64_t i = words * 8; i < bytes; ++i) data[i] = static_cast<uint8_t>(i);
}

}  // namespace ft::bench
