// Attribution, phase 2 (attribution.h): the wait-for graph over a Snapshot
// (attribution_snapshot.h). Its targets are what ranks wait on — a collective (comm, seq), or
// one p2p op of one waiter — each with its waiters and the members blocking it; it marks each
// rank that waits on the GPU (RankInfo::waits, waited_ms), each laggard (lag_*), and the
// targets each rank blocks (RankInfo::blocks). The rules are attribution.h's. Pure.
#ifndef FT_FTMASTER_CORE_ATTRIBUTION_GRAPH_H_
#define FT_FTMASTER_CORE_ATTRIBUTION_GRAPH_H_

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ftmaster/core/attribution.h"
#include "ftmaster/core/attribution_snapshot.h"
#include "proto/messages.h"

namespace ft::master::attribution {

// Something ranks wait on: a collective (comm, seq), or one p2p op of one waiter.
struct Target {
  int comm = -1;
  bool p2p = false;
  uint64_t seq = 0;                 // collective: the op waited on
  proto::OpKind op = proto::OpKind::kNone;  // its kind when known
  std::vector<int> waiters;
  std::vector<int> blockers;
  int unknown_members = 0;          // comm ranks no membership names
  int completed = 0;                // members that completed seq (transport oddity)
  int pair_peer = -1;               // p2p transport: the peer waiting toward the waiter
  const proto::CommRow* example_row = nullptr;  // a waiter's row (ages, op)
  int example_waiter = -1;
  double longest_wait_ms = 0;       // the longest any waiter's GPU has been in it
  // How long the op could have completed: since the last of its members (a pair: the later
  // of the two) arrived. Those all in flight for less than the least timeout only just met.
  double met_ms = std::numeric_limits<double>::infinity();
};

// How long, at decision time, the rank's GPU has been in the op its row waits in. Unknown
// ages count as forever: the filter this feeds must never hide a hang.
double WaitedMs(const RankInfo& r, const proto::CommRow& row, int64_t now_unix_ms);

class WaitForGraph {
 public:
  // Builds the graph, writing the ranks' waits, lags and blocks into `snap`.
  WaitForGraph(Snapshot& snap, const AttributionInput& in);

  std::vector<Target>& targets() { return targets_; }
  const std::vector<Target>& targets() const { return targets_; }
  const Target& target(int index) const { return targets_[static_cast<size_t>(index)]; }

  // Ranks reached from `sources` by following "blocks" edges backwards (who waits on them),
  // sources excluded. direct: those one step away. Marks them in *mark when given.
  void Reach(const std::vector<int>& sources, int* direct, int* total, std::vector<char>* mark);

 private:
  struct PairHash {
    size_t operator()(const std::pair<int, uint64_t>& k) const {
      return std::hash<uint64_t>()(k.second * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(k.first));
    }
  };

  // The waits of one row of rank `a` on the GPU (started > completed).
  void AddRow(int a, const proto::CommRow& row, int64_t now_unix_ms);
  void NewCollective(int ci, uint64_t seq);
  void AddP2p(int a, int ci, const proto::CommRow& row, int64_t now_unix_ms);
  // A peer that exited cleanly with no p2p op in flight, seen waiting on by a table taken
  // before it exited (a second of slack for the two workers' clocks): the exchange ended and
  // the waiter's next report will say so. A table taken after the exit that still waits is a
  // rank left waiting on a peer that is gone.
  bool PeerExitedAfterTheExchange(const RankInfo& waiter, int ci, const proto::CommRow& row) const;
  // Per communicator, the highest collective any live or cleanly exited member has completed,
  // and that member.
  void FindMostCompleted();

  Snapshot& snap_;
  std::vector<std::pair<uint64_t, int>> most_completed_;  // by comm index
  std::vector<Target> targets_;
  std::unordered_map<std::pair<int, uint64_t>, int, PairHash> collective_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> rank_seen_;
  std::vector<uint32_t> target_seen_;
  std::vector<std::pair<int, int>> queue_;
};

}  // namespace ft::master::attribution

#endif  // FT_FTMASTER_CORE_ATTRIBUTION_GRAPH_H_
