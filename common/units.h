// Parsing of the value syntax shared by every setting: durations with units ("500ms", "2s",
// "1.5m"), sizes with units ("64mb", "4KiB", "1g"), booleans, integers. Strict: trailing
// garbage, negative sizes and overflow are errors, never silently truncated.
#ifndef FT_COMMON_UNITS_H_
#define FT_COMMON_UNITS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft {

using Duration = std::chrono::nanoseconds;

// Units: ns, us, ms, s, m (minutes), h. A bare number is seconds. Fractions allowed ("1.5s").
Status ParseDuration(std::string_view text, Duration* out);
// Units (case-insensitive): b, k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib — all binary (1kb = 1024),
// as UCX does. A bare number is bytes.
Status ParseSize(std::string_view text, uint64_t* out);
// 1/0, true/false, yes/no, on/off (case-insensitive).
Status ParseBool(std::string_view text, bool* out);
Status ParseInt(std::string_view text, int64_t* out);

// Shortest exact human form: "1500ms" -> "1500ms", 2s -> "2s", 64 MiB -> "64mb".
std::string FormatDuration(Duration d);
std::string FormatSize(uint64_t bytes);

}  // namespace ft

#endif  // FT_COMMON_UNITS_H_
