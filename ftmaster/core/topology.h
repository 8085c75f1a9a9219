// ft::master::Topology: where each global rank sits in the (tp, dp, pp) grid of a job. Either
// explicit ("dp=2,tp=4,pp=2" plus a rank order) or inferred from communicator membership and
// then said to be inferred, with every assumption spelled out in Describe(). An unknown
// topology carries the reason; the checkpoint decision then stops without saving.
//
// Rank order follows Megatron: the first-named dimension varies fastest over global rank. With
// the default order "tp-dp-pp": rank = tp + T * (dp + D * pp).
//
// A Topology is a plain value; any thread may use a const one.
#ifndef FT_FTMASTER_TOPOLOGY_H_
#define FT_FTMASTER_TOPOLOGY_H_

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/messages.h"

namespace ft::master {

enum class Dim : int { kTp = 0, kDp = 1, kPp = 2 };
inline constexpr int kDims = 3;
const char* DimName(Dim dim);  // "tp", "dp", "pp"

struct Coord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  bool operator==(const Coord&) const = default;
};

class Topology {
 public:
  Topology() = default;  // unknown: "no topology given"

  // sizes: "dp=2,tp=4,pp=2" (any order, any subset; a missing dimension is 1; spaces ignored).
  // order: a permutation of tp, dp, pp joined by '-' ("tp-dp-pp"); empty means "tp-dp-pp".
  // world_size > 0 must equal tp*dp*pp; world_size <= 0 takes the product. Errors are
  // InvalidArgument naming the offending part; *out is untouched then.
  static Status Parse(std::string_view sizes, std::string_view order, int world_size,
                      Topology* out);
  // The same from numbers (the order string as in Parse).
  static Status FromSizes(int tp, int dp, int pp, std::string_view order, Topology* out);
  static Topology Unknown(std::string reason);

  // From the communicators each rank is a member of. Groups of ranks are formed per comm id;
  // the groups whose members form an arithmetic progression and together partition the world
  // ("families") are the candidate dimensions. A clean grid is a chain of families with
  // strides 1, n1, n1*n2 and sizes multiplying to the world size. Naming: a family carrying
  // point-to-point traffic is pp; of the others the inner is tp and the outer dp (Megatron's
  // default order). What cannot be told apart is reported unknown, never guessed silently:
  //   - a communicator spanning all ranks and nothing else: dp = world (said to be assumed: a
  //     pure tensor-parallel job looks the same);
  //   - two non-pp dimensions without p2p traffic: tp inner, dp outer, pp = 1 (assumed);
  //   - pp plus one other dimension: unknown (tp or dp cannot be told apart);
  //   - more than three dimensions, ranks missing, or no grid: unknown.
  static Topology Infer(std::span<const proto::Membership> membership);
  // Infer(membership); but when that fails while ranks have left (exited, dead, stopped: a
  // finished job's destroyed communicators leave no grid), `last` — the last topology
  // inferred while the ranks ran, when known — is kept and said to be kept. Departed ranks
  // never re-shape a job.
  static Topology InferOrKeep(std::span<const proto::Membership> membership, const Topology* last);
  // `t` (known) as an inferred topology kept from earlier, with `why` as its note.
  static Topology Kept(const Topology& t, std::string why);

  bool known() const { return known_; }
  bool inferred() const { return inferred_; }
  bool kept() const { return kept_; }
  int world_size() const { return world_size_; }
  int size(Dim dim) const { return size_[static_cast<int>(dim)]; }
  int tp() const { return size(Dim::kTp); }
  int dp() const { return size(Dim::kDp); }
  int pp() const { return size(Dim::kPp); }
  std::string order() const;  // "tp-dp-pp"
  std::string sizes() const;  // "tp=2,dp=4,pp=2": Parse(sizes(), order()) gives it back

  // Preconditions: known(), 0 <= rank < world_size(), coordinates in range.
  Coord CoordOf(int rank) const;
  int RankOf(Coord coord) const;
  // The data-parallel replicas of model shard (tp, pp), by dp index.
  std::vector<int> ShardRanks(int tp, int pp) const;

  // For `ftmaster status`: "explicit: tp=2 dp=2 pp=2, order tp-dp-pp, 8 ranks",
  // "inferred from communicators: tp=8 dp=128 pp=16, order tp-dp-pp, 16384 ranks (...)" or
  // "unknown: <reason>".
  std::string Describe() const;
  // Why unknown, or the assumptions an inferred topology rests on; empty for explicit ones.
  const std::string& note() const { return note_; }

 private:
  bool known_ = false;
  bool inferred_ = false;
  bool kept_ = false;
  int world_size_ = 0;
  std::array<int, kDims> size_ = {1, 1, 1};
  std::array<int, kDims> stride_ = {1, 1, 1};
  std::array<Dim, kDims> order_ = {Dim::kTp, Dim::kDp, Dim::kPp};
  std::string note_ = "no topology given";
};

}  // namespace ft::master

#endif  // FT_FTMASTER_TOPOLOGY_H_
