#include "ftworker/transfer/region_name.h"

#include <fmt/format.h>

#include "common/names.h"

namespace ft::worker {

namespace {

constexpr size_t kMaxNameBytes = 64;

// A decimal of at most max_digits digits: no sign, no leading zero (but "0"), nothing else.
bool ParseDecimal(std::string_view text, size_t max_digits, int64_t* out) {
  if (text.empty() || text.size() > max_digits) return false;
  if (text.size() > 1 && text[0] == '0') return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// A name as it may appear in a log line: bounded, control bytes replaced.
std::string Quoted(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, kMaxNameBytes)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (name.size() > kMaxNameBytes) out += "...";
  return out;
}

constexpr Named<CopyPlace> kCopyPlaceNames[] = {
    {CopyPlace::kArena, "arena"}, {CopyPlace::kLocal, "local"}, {CopyPlace::kReplica, "replica"}};
static_assert(NamesAreUnique(kCopyPlaceNames));
}  // namespace

const char* CopyPlaceName(CopyPlace place) { return NameIn(kCopyPlaceNames, place); }

std::string FormatRegionName(CopyPlace place, int64_t step, int rank) {
  return fmt::format("{}/{}/{}", CopyPlaceName(place), step, rank);
}

Status ParseRegionName(std::string_view name, RegionName* out) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument(fmt::format("region name '{}': {} (expected arena/<step>/<rank>, "
                                               "local/<step>/<rank> or replica/<step>/<rank>)", Quoted(name), why));
  };
  if (name.size() > kMaxNameBytes) return bad("too long");
  const size_t first = name.find('/');
  if (first == std::string_view::npos) return bad("no step");
  const size_t second = name.find('/', first + 1);
  if (second == std::string_view::npos) return bad("no rank");
  const std::string_view place = name.substr(0, first);
  RegionName parsed;
  if (place == "arena") {
    parsed.place = CopyPlace::kArena;
  } else if (place == "local") {
    parsed.place = CopyPlace::kLocal;
  } else if (place == "replica") {
    parsed.place = CopyPlace::kReplica;
  } else {
    return bad("unknown place");
  }
  int64_t step = 0, rank = 0;
  // 18 digits stay below INT64_MAX; 9 below INT_MAX.
  if (!ParseDecimal(name.substr(first + 1, second - first - 1), 18, &step)) return bad("bad step");
  if (!ParseDecimal(name.substr(second + 1), 9, &rank)) return bad("bad rank");
  parsed.step = step;
  parsed.rank = static_cast<int>(rank);
  *out = parsed;
  return Status::Ok();
}

}  // namespace ft::worker
