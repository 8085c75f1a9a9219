#include "ftworker/prefetch/prefetch_node_ranks.h"

#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <set>

namespace ft::worker {

namespace {

bool ParseRank(std::string_view text, int* out) {
  if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return false;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > INT32_MAX) return false;
  *out = static_cast<int>(value);
  return true;
}

}  // namespace

Status ParseNodeRanks(std::string_view text, std::vector<int>* out) {
  std::set<int> ranks;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    std::string_view part = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    at = comma == std::string_view::npos ? text.size() : comma + 1;
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument(fmt::format("node ranks '{}': '{}' {} (e.g. \"4-7\" or \"4,5,6,7\")",
                                                 text.substr(0, 64), part.substr(0, 32), why));
    };
    size_t dash = part.find('-');
    int first = 0, last = 0;
    if (dash == std::string_view::npos) {
      if (!ParseRank(part, &first)) return bad("is not a rank");
      last = first;
    } else if (!ParseRank(part.substr(0, dash), &first) || !ParseRank(part.substr(dash + 1), &last)) {
      return bad("is not a rank or a range of ranks");
    } else if (last < first) {
      return bad("ends before it begins");
    }
    if (static_cast<int64_t>(last) - first + ranks.size() >= 1'000'000) return bad("names too many ranks for a node");
    for (int r = first; r <= last; ++r) ranks.insert(r);
    if (comma != std::string_view::npos && at == text.size()) return bad("ends with a comma");
  }
  *out = std::vector<int>(ranks.begin(), ranks.end());
  return Status::Ok();
}

}  // namespace ft::worker
