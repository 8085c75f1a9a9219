// ft::proto::RankRanges: a set of global ranks written as ascending ranges, "0-7,64-71,130", so
// that the ranks of a few communicators fit a short string whatever the job's size (a node's
// tp group is one range, a dp group one entry per replica). Used where the master names ranks
// to every worker at once (a window notice, proto/notice.h). Parsing takes foreign bytes: it
// refuses anything but ascending, non-overlapping ranges of ranks 0..kMaxRank, with a clear
// error, and never expands the ranges (a membership test is a binary search).
#ifndef FT_PROTO_RANK_RANGES_H_
#define FT_PROTO_RANK_RANGES_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ft::proto {

class RankRanges {
 public:
  static constexpr int kMaxRank = (1 << 30) - 1;

  RankRanges() = default;
  // From any ranks (any order, repeats allowed; negative ones are left out).
  static RankRanges Of(std::span<const int> ranks);
  static Status Parse(std::string_view text, RankRanges* out);

  std::string Format() const;
  bool Contains(int rank) const;
  bool empty() const { return spans_.empty(); }
  size_t spans() const { return spans_.size(); }
  size_t count() const;  // ranks in the set
  // Every rank, ascending (check count() first on a parsed set: "0-1073741823" is one span).
  std::vector<int> Ranks() const;

  bool operator==(const RankRanges&) const = default;

 private:
  std::vector<std::pair<int, int>> spans_;  // [first, last], ascending, apart by more than 1
};

}  // namespace ft::proto

#endif  // FT_PROTO_RANK_RANGES_H_
