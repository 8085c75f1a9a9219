// master_bench: the shape of the synthetic job: which rank sits where in tp x dp x pp, on which
// node, in which communicators. Plain values; any thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "proto/messages.h"

namespace ft::bench {

constexpr int kTp = 8;                 // ranks per tp group = ranks per node (one worker each)

// tp x dp x pp in Megatron order tp-dp-pp (tp varies fastest), tp = 8 = one node. pp grows with
// the job (4, 8, 16 for 1k, 4k, 16k), dp takes the rest; one communicator per tp, dp and pp
// group, the pp ones point-to-point.
struct Layout {
  int tp = kTp, dp = 1, pp = 1;

  // pp: the largest power of two up to sqrt(n) / 8 (4, 8, 16 for 1k, 4k, 16k: large jobs
  // deepen their pipelines as well as widen dp), leaving at least two dp replicas.
  static Layout ForRanks(int n) {
    Layout l;
    const int groups = n / kTp;
    int pp = 1;
    while (pp * 2 * kTp <= static_cast<int>(std::sqrt(static_cast<double>(n))) &&
           groups % (pp * 2) == 0 && groups / (pp * 2) >= 2) {
      pp *= 2;
    }
    l.pp = pp;
    l.dp = groups / pp;
    return l;
  }
  int world() const { return tp * dp * pp; }
  int Rank(int t, int d, int s) const { return t + tp * (d + dp * s); }
  int T(int r) const { return r % tp; }
  int D(int r) const { return (r / tp) % dp; }
  int S(int r) const { return r / (tp * dp); }
  // Communicator ids: a kind in the top 12 bits, the group's index below.
  static constexpr uint64_t kTpKind = 0x547, kDpKind = 0x548, kPpKind = 0x549;
  uint64_t TpComm(int d, int s) const { return Comm(kTpKind, d + dp * s); }
  uint64_t DpComm(int t, int s) const { return Comm(kDpKind, t + tp * s); }
  uint64_t PpComm(int t, int d) const { return Comm(kPpKind, t + tp * d); }
  static uint64_t Comm(uint64_t kind, int index) {
    return (kind << 52) + static_cast<uint64_t>(index);
  }
  static bool IsTp(const proto::CommRow& row) { return row.comm_id >> 52 == kTpKind; }
  static bool IsDp(const proto::CommRow& row) { return row.comm_id >> 52 == kDpKind; }
  std::string Node(int r) const { return fmt::format("n{:05d}", r / kTp); }
  int nodes() const { return world() / kTp; }
  std::string Describe() const { return fmt::format("dp={},tp={},pp={}", dp, tp, pp); }
};

}  // namespace ft::bench
