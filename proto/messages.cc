#include "proto/messages.h"

namespace ft::proto {

int SizeBucket(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;
  if (bytes < 64 * kKiB) return 0;
  if (bytes < kMiB) return 1;
  if (bytes < 16 * kMiB) return 2;
  if (bytes < 256 * kMiB) return 3;
  return 4;
}

}  // namespace ft::proto
