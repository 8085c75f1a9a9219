#include "jitckpt/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

namespace ft::ckpt {

uint64_t Checksum(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string DigestHex(uint64_t digest) { return fmt::format("{:016x}", digest); }

bool ParseDigest(std::string_view hex, uint64_t* digest) {
  if (hex.size() != 16) return false;
  uint64_t value = 0;
  for (char c : hex) {
    int nibble;
    if (c >= '0' && c <= '9') {
      nibble = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      nibble = c - 'a' + 10;
    } else {
      return false;  // upper case too: a digest has exactly one spelling
    }
    value = (value << 4) | static_cast<uint64_t>(nibble);
  }
  *digest = value;
  return true;
}

}  // namespace ft::ckpt
