// Attribution, phase 1 (attribution.h): the ranks' reports, membership and window events read
// into one view — per rank its newest report, membership entry, exit and frozen events, and
// what they say (dead, cleanly exited, frozen, asked to end, stale); per communicator its
// members and their rows by comm rank. The later phases (attribution_graph.h,
// attribution_classify.h, attribution_evidence.h) read it; none but the graph writes it (each
// rank's waits and blocks). Pure: it points into the AttributionInput, which must outlive it.
#ifndef FT_FTMASTER_CORE_ATTRIBUTION_SNAPSHOT_H_
#define FT_FTMASTER_CORE_ATTRIBUTION_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ftmaster/core/attribution.h"
#include "proto/messages.h"

namespace ft::master::attribution {

struct RankInfo {
  int rank = -1;
  const proto::RankProgress* progress = nullptr;
  const proto::Membership* member = nullptr;
  const proto::Event* exit_event = nullptr;
  const proto::Event* frozen_event = nullptr;  // the newest "frozen" event of the rank
  std::string node;
  bool dead = false;
  // Dead through its normal exit path: its last table is final, and what it shows completed
  // did complete (NCCL's finalize waited for it), unlike the table of a process that died.
  bool clean_exit = false;
  bool frozen = false;            // alive but cannot run: its table no longer moves
  // Gone after a signal told it to terminate (libft.so wrote it: a launcher's or scheduler's
  // SIGTERM), or stopped by its worker: asked to end, never a crash root.
  bool asked_to_end = false;
  bool stale = false;
  double report_age_ms = 0;
  // Written by the wait-for graph (attribution_graph.h):
  bool waits = false;             // has a row on the GPU waiting on others
  // Laggard: its table shows collective lag_seq of comm lag_comm (index) in flight although
  // a live peer has completed it: the collective is over, the rank has stopped observing it.
  int lag_comm = -1;
  uint64_t lag_seq = 0;
  int lag_peer = -1;              // a member that completed it (rank index)
  double waited_ms = 0;           // the longest of those waits
  std::vector<int> blocks;        // targets this rank blocks
};

struct CommInfo {
  uint64_t id = 0;
  std::vector<int> members;                 // comm rank -> rank index, -1 unknown
  std::vector<const proto::CommRow*> coll;  // comm rank -> collective row
  std::vector<const proto::CommRow*> p2p;   // comm rank -> p2p row
  void Grow(int size);
};

class Snapshot {
 public:
  explicit Snapshot(const AttributionInput& in);

  std::vector<RankInfo>& ranks() { return ranks_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  std::vector<CommInfo>& comms() { return comms_; }
  const std::vector<CommInfo>& comms() const { return comms_; }
  const RankInfo& rank(int index) const { return ranks_[static_cast<size_t>(index)]; }
  const CommInfo& comm(int index) const { return comms_[static_cast<size_t>(index)]; }
  // Indexes of a global rank / a communicator id; -1 when not in the view.
  int FindRank(int rank) const;
  int FindComm(uint64_t id) const;

 private:
  int IndexOf(int rank);
  void AddProgress(const proto::RankProgress* p);
  // What the rank's report, membership and events say about it (dead, frozen, ...).
  void Judge(RankInfo& r, const AttributionInput& in);
  void Place(uint64_t id, int comm_rank, int comm_size, int rank_index, const proto::CommRow* row, bool p2p);

  std::vector<RankInfo> ranks_;
  std::unordered_map<int, int> rank_index_;
  std::vector<CommInfo> comms_;
  std::unordered_map<uint64_t, int> comm_index_;
};

}  // namespace ft::master::attribution

#endif  // FT_FTMASTER_CORE_ATTRIBUTION_SNAPSHOT_H_
