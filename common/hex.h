// A 64-bit value as exactly 16 hex digits, and back: how communicator ids, checkpoint digests and
// API symbol ids are written in Redis, manifests, logs and the operator's tables. One spelling
// out (lowercase, zero-padded), so a value compares as text; the reader says which it accepts.
// Pure functions; any thread.
#ifndef FT_COMMON_HEX_H_
#define FT_COMMON_HEX_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace ft {

inline std::string Hex64(uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kDigits[value & 0xf];
  return out;
}

// Whether upper-case digits are read too. A digest has one spelling (kLowerOnly), so a copy
// written by another tool in another case is not mistaken for the same text.
enum class HexCase : uint8_t { kLowerOnly, kEither };

// Exactly 16 hex digits; false (and *value untouched) for anything else.
inline bool ParseHex64(std::string_view text, uint64_t* value, HexCase accept = HexCase::kEither) {
  if (text.size() != 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (accept == HexCase::kEither && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *value = v;
  return true;
}

}  // namespace ft

#endif  // FT_COMMON_HEX_H_
