// master_bench: a Redis value encoded once and rewritten with new numbers by concatenation.
//
// Encodes once with sentinel numbers where fields change; Render writes the value again with
// other numbers by concatenation. Re-encoding 16k progress tables through nlohmann every
// 200 ms would take most of a core, and this machine must leave one to ftmaster.
// A Template is immutable once made; Render may be called from any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace ft::bench {

class Template {
 public:
  struct Hole {
    std::string sentinel;
    bool integer = true;
  };

  static Status Make(const std::string& text, const std::vector<Hole>& holes, Template* out);

  // `number` where it is a whole JSON number, not digits inside a longer one
  // (29.471880000000002 holds 880000000002).
  static size_t FindNumber(const std::string& text, const std::string& number, size_t from);

  // `values` in the order of the holes given to Make.
  void Render(std::span<const double> values, std::string* out) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<int> order_;
  std::vector<bool> integer_;
  size_t size_ = 0;
};

// Sentinels: 12-digit integers and 6-digit whole doubles (nlohmann writes "900001.0"), found
// only as whole numbers; Make checks that each occurs exactly once.
double IntSentinel(int i);
double NumSentinel(int i);
// The holes for `ints` integer sentinels, then `nums` number ones.
std::vector<Template::Hole> Holes(int ints, int nums);

}  // namespace ft::bench
