#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace ft {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// Splits "1.5ms" into 1.5 and "ms". The number must be non-negative and finite.
Status SplitNumber(std::string_view text, double* number, std::string* unit) {
  text = Trim(text);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return Status::InvalidArgument("'" + std::string(text) + "' does not start with a number");
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || end != text.data() + i || !std::isfinite(value)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a number");
  }
  *number = value;
  *unit = Lower(Trim(text.substr(i)));
  return Status::Ok();
}

}  // namespace

Status ParseDuration(std::string_view text, Duration* out) {
  double number = 0;
  std::string unit;
  FT_RETURN_IF_ERROR(SplitNumber(text, &number, &unit));
  double scale = 0;
  if (unit == "ns") scale = 1;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "s" || unit.empty()) scale = 1e9;
  else if (unit == "m" || unit == "min") scale = 60e9;
  else if (unit == "h") scale = 3600e9;
  else if (unit == "d") scale = 86400e9;
  else return Status::InvalidArgument("unknown duration unit '" + unit + "' (use ns, us, ms, s, m, h, d)");
  double ns = std::round(number * scale);
  if (ns > static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) {
    return Status::InvalidArgument("duration '" + std::string(text) + "' is too large");
  }
  *out = Duration(static_cast<int64_t>(ns));
  return Status::Ok();
}

Status ParseSize(std::string_view text, uint64_t* out) {
  double number = 0;
  std::string unit;
  FT_RETURN_IF_ERROR(SplitNumber(text, &number, &unit));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else return Status::InvalidArgument("unknown size unit '" + unit + "' (use b, kb, mb, gb, tb)");
  double bytes = number * scale;
  if (bytes != std::floor(bytes)) {
    return Status::InvalidArgument("size '" + std::string(text) + "' is not a whole number of bytes");
  }
  if (bytes > 9.0e18) return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
  *out = static_cast<uint64_t>(bytes);
  return Status::Ok();
}

Status ParseBool(std::string_view text, bool* out) {
  std::string value = Lower(Trim(text));
  if (value == "1" || value == "true" || value == "yes" || value == "on") {
    *out = true;
  } else if (value == "0" || value == "false" || value == "no" || value == "off") {
    *out = false;
  } else {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a boolean (use 1/0, true/false, yes/no, on/off)");
  }
  return Status::Ok();
}

Status ParseInt(std::string_view text, int64_t* out) {
  std::string_view trimmed = Trim(text);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || ec != std::errc() || end != trimmed.data() + trimmed.size()) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not an integer");
  }
  *out = value;
  return Status::Ok();
}

std::string FormatDuration(Duration d) {
  int64_t ns = d.count();
  struct Unit { int64_t scale; const char* name; };
  static constexpr Unit kUnits[] = {{3600'000'000'000, "h"}, {60'000'000'000, "m"},
                                    {1'000'000'000, "s"},    {1'000'000, "ms"},
                                    {1'000, "us"}};
  for (const Unit& unit : kUnits) {
    if (ns != 0 && ns % unit.scale == 0) return std::to_string(ns / unit.scale) + unit.name;
  }
  return std::to_string(ns) + "ns";
}

std::string FormatSize(uint64_t bytes) {
  struct Unit { uint64_t scale; const char* name; };
  static constexpr Unit kUnits[] = {{1ull << 40, "tb"}, {1ull << 30, "gb"}, {1ull << 20, "mb"},
                                    {1ull << 10, "kb"}};
  for (const Unit& unit : kUnits) {
    if (bytes != 0 && bytes % unit.scale == 0) return std::to_string(bytes / unit.scale) + unit.name;
  }
  return std::to_string(bytes) + "b";
}

}  // namespace ft
