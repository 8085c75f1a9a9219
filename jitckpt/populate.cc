#include "jitckpt/populate.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack the name
#endif

namespace ft::ckpt {

namespace {

constexpr uint64_t kPage = 4096;
// Ranges split at huge-page boundaries, so a range never shares a huge page with another.
constexpr uint64_t kSplitAlign = 2ull << 20;

void PopulateRange(uint8_t* begin, uint64_t bytes) {
  if (bytes == 0) return;
  if (madvise(begin, bytes, MADV_POPULATE_WRITE) == 0) return;
  // EINVAL: a kernel without it. Anything else (ENOMEM, EFAULT) would fail the same way at a
  // touch; the pages then fault in at first use.
  if (errno != EINVAL) return;
  for (uint64_t at = 0; at < bytes; at += kPage) {
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(begin + at), uint64_t{0}, __ATOMIC_RELAXED);
  }
}

}  // namespace

void TouchPages(const uint8_t* base, uint64_t bytes) {
  if (base == nullptr) return;
  for (uint64_t at = 0; at < bytes; at += kPage) {
    (void)__atomic_load_n(reinterpret_cast<const uint64_t*>(base + at), __ATOMIC_RELAXED);
  }
}

void PopulateForWrite(uint8_t* base, uint64_t bytes, int threads) {
  if (base == nullptr || bytes == 0) return;
  if (threads <= 0) threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  const uint64_t pieces = std::max<uint64_t>(1, std::min<uint64_t>(threads, bytes / kSplitAlign));
  auto bound = [&](uint64_t i) {
    if (i >= pieces) return bytes;
    return std::min(bytes, (bytes * i / pieces) / kSplitAlign * kSplitAlign);
  };
  std::vector<std::thread> helpers;
  for (uint64_t i = 1; i < pieces; ++i) {
    try {
      helpers.emplace_back([=] { PopulateRange(base + bound(i), bound(i + 1) - bound(i)); });
    } catch (const std::system_error&) {
      PopulateRange(base + bound(i), bound(i + 1) - bound(i));  // this thread does it instead
    }
  }
  PopulateRange(base, bound(1));
  for (std::thread& t : helpers) t.join();
}

}  // namespace ft::ckpt
