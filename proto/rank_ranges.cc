#include "proto/rank_ranges.h"

#include <algorithm>
#include <charconv>

namespace ft::proto {
namespace {

// A rank at the front of `text` (digits only, within kMaxRank); advances past it.
bool TakeRank(std::string_view* text, int* out) {
  const char* begin = text->data();
  const char* end = begin + text->size();
  if (begin == end || *begin < '0' || *begin > '9') return false;
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  if (ec != std::errc() || *out > RankRanges::kMaxRank) return false;
  text->remove_prefix(static_cast<size_t>(ptr - begin));
  return true;
}

}  // namespace

RankRanges RankRanges::Of(std::span<const int> ranks) {
  std::vector<int> sorted;
  sorted.reserve(ranks.size());
  for (int r : ranks) {
    if (r >= 0 && r <= kMaxRank) sorted.push_back(r);
  }
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  RankRanges set;
  for (int r : sorted) {
    if (!set.spans_.empty() && set.spans_.back().second + 1 == r) {
      set.spans_.back().second = r;
    } else {
      set.spans_.emplace_back(r, r);
    }
  }
  return set;
}

std::string RankRanges::Format() const {
  std::string text;
  for (const auto& [first, last] : spans_) {
    if (!text.empty()) text += ',';
    text += std::to_string(first);
    if (last != first) text += '-' + std::to_string(last);
  }
  return text;
}

Status RankRanges::Parse(std::string_view text, RankRanges* out) {
  RankRanges set;
  const std::string_view whole = text;
  auto bad = [&](const char* why) {
    return Status::Corrupt("rank ranges \"" + std::string(whole.substr(0, 32)) +
                           (whole.size() > 32 ? "...\"" : "\"") + ": " + why);
  };
  while (!text.empty()) {
    int first = 0, last = 0;
    if (!TakeRank(&text, &first)) return bad("expected a rank (0 to 2^30-1)");
    last = first;
    if (!text.empty() && text.front() == '-') {
      text.remove_prefix(1);
      if (!TakeRank(&text, &last)) return bad("expected a rank after '-'");
      if (last < first) return bad("a range ends before it starts");
    }
    // Ascending and apart: one spelling per set, so a repeat or an overlap is an error.
    if (!set.spans_.empty() && first <= set.spans_.back().second + 1) {
      return bad("ranges out of order, overlapping or adjacent");
    }
    set.spans_.emplace_back(first, last);
    if (text.empty()) break;
    if (text.front() != ',') return bad("expected ',' between ranges");
    text.remove_prefix(1);
    if (text.empty()) return bad("a trailing ','");
  }
  *out = std::move(set);
  return Status::Ok();
}

size_t RankRanges::count() const {
  size_t n = 0;
  for (const auto& [first, last] : spans_) n += static_cast<size_t>(last - first) + 1;
  return n;
}

std::vector<int> RankRanges::Ranks() const {
  std::vector<int> ranks;
  ranks.reserve(count());
  for (const auto& [first, last] : spans_) {
    for (int r = first; r <= last; ++r) ranks.push_back(r);
  }
  return ranks;
}

bool RankRanges::Contains(int rank) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), rank,
                             [](int r, const std::pair<int, int>& s) { return r < s.first; });
  return it != spans_.begin() && rank <= std::prev(it)->second;
}

}  // namespace ft::proto
