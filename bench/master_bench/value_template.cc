// master_bench: encode once, render by concatenation; see value_template.h.
#include "bench/master_bench/value_template.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace ft::bench {

Status Template::Make(const std::string& text, const std::vector<Hole>& holes, Template* out) {
  std::vector<std::pair<size_t, int>> at;
  for (size_t i = 0; i < holes.size(); ++i) {
    const std::string& s = holes[i].sentinel;
    const size_t p = FindNumber(text, s, 0);
    if (p == std::string::npos || FindNumber(text, s, p + 1) != std::string::npos) {
      return Status::Internal(fmt::format("sentinel {} is not in the encoded value exactly "
                                          "once: {}", s, text.substr(0, 200)));
    }
    at.emplace_back(p, static_cast<int>(i));
  }
  std::sort(at.begin(), at.end());
  Template t;
  size_t from = 0;
  for (const auto& [p, i] : at) {
    if (p < from) return Status::Internal("overlapping sentinels");
    t.pieces_.push_back(text.substr(from, p - from));
    t.order_.push_back(i);
    t.integer_.push_back(holes[static_cast<size_t>(i)].integer);
    from = p + holes[static_cast<size_t>(i)].sentinel.size();
  }
  t.pieces_.push_back(text.substr(from));
  t.size_ = text.size();
  *out = std::move(t);
  return Status::Ok();
}

size_t Template::FindNumber(const std::string& text, const std::string& number, size_t from) {
  auto part_of_number = [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
  };
  for (size_t p = text.find(number, from); p != std::string::npos;
       p = text.find(number, p + 1)) {
    const size_t end = p + number.size();
    if ((p == 0 || !part_of_number(text[p - 1])) &&
        (end == text.size() || !part_of_number(text[end]))) {
      return p;
    }
  }
  return std::string::npos;
}

void Template::Render(std::span<const double> values, std::string* out) const {
  out->clear();
  out->reserve(size_ + 16);
  for (size_t i = 0; i < order_.size(); ++i) {
    out->append(pieces_[i]);
    const double v = values[static_cast<size_t>(order_[i])];
    if (integer_[i]) {
      fmt::format_to(std::back_inserter(*out), "{}", static_cast<int64_t>(v));
    } else {
      fmt::format_to(std::back_inserter(*out), "{:.1f}", v);
    }
  }
  out->append(pieces_.back());
}

double IntSentinel(int i) { return 880000000000.0 + i; }
double NumSentinel(int i) { return 900000.0 + i; }
std::vector<Template::Hole> Holes(int ints, int nums) {
  std::vector<Template::Hole> h;
  for (int i = 0; i < ints; ++i) {
    h.push_back({fmt::format("{}", static_cast<int64_t>(IntSentinel(i))), true});
  }
  for (int i = 0; i < nums; ++i) h.push_back({fmt::format("{:.1f}", NumSentinel(i)), false});
  return h;
}

}  // namespace ft::bench
