// Small formatting helpers shared by ftmaster's messages (internal; not part of the API).
#ifndef FT_FTMASTER_TEXT_H_
#define FT_FTMASTER_TEXT_H_

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "common/hex.h"

namespace ft::master {

// As docs/redis-schema.md writes communicator ids: 16 lowercase hex digits.
inline std::string CommHex(uint64_t id) { return Hex64(id); }

// "850 ms", "2.1 s", "3.5 min".
inline std::string HumanMs(double ms) {
  if (ms < 0) return "?";
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 120000) return fmt::format("{:.1f} s", ms / 1000);
  return fmt::format("{:.1f} min", ms / 60000);
}

// " (2.50x)" after two times that are compared; nothing where `base` is 0 (a time under the
// summaries' resolution: the others' transfer on an idle link), which has no ratio.
inline std::string RatioSuffix(double value, double base) {
  if (!(base > 0) || !(value >= 0)) return "";
  return fmt::format(" ({:.2f}x)", value / base);
}

// "512 B", "4.0 KiB", "1.5 GiB".
inline std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace ft::master

#endif  // FT_FTMASTER_TEXT_H_
