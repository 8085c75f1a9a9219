// Attribution, phase 3 (attribution.h): what the wait-for graph (attribution_graph.h) comes to
// — the roots and how each is stuck (crash, host frozen, busy, lagging, compute or host hang,
// report missing), the ranks dead or frozen on their own, the deaths set aside as a teardown,
// the transport hangs, and the waiters nothing explains (a cycle). Findings are indexes into
// the Snapshot and the graph with a confidence each, no words: the evidence writer
// (attribution_evidence.h) turns them into incidents. The rules and confidences are
// attribution.h's. Pure.
#ifndef FT_FTMASTER_CORE_ATTRIBUTION_CLASSIFY_H_
#define FT_FTMASTER_CORE_ATTRIBUTION_CLASSIFY_H_

#include <vector>

#include "ftmaster/core/attribution.h"
#include "ftmaster/core/attribution_graph.h"
#include "ftmaster/core/attribution_snapshot.h"
#include "proto/messages.h"

namespace ft::master::attribution {

inline constexpr double kConfCrash = 0.95;
inline constexpr double kConfCrashNoReport = 0.8;  // dead by membership alone
inline constexpr double kConfFrozen = 0.9;
inline constexpr double kConfLaggard = 0.7;
inline constexpr double kConfComputeHang = 0.9;
inline constexpr double kConfHostHang = 0.85;
inline constexpr double kConfMissing = 0.5;
inline constexpr double kStaleFactor = 0.6;
inline constexpr double kConfTransport = 0.7;
inline constexpr double kConfTransportOdd = 0.5;
// A wait-for cycle, and any incident that names nobody: no surer than reports taken apart.
inline constexpr double kConfCycle = 0.3;

// How a root (blocks others, waits on nothing) is stuck, in the order attribution.h tests.
enum class RootKind {
  kCrash,        // dead: report, membership or exit event
  kMissing,      // no progress report
  kFrozen,       // host frozen: its own incident kind
  kBusy,         // busy on the host: not a hang
  kLagging,      // a laggard not known to be frozen
  kComputeHang,  // its host issued work its GPU never reached
  kHostHang,     // nothing queued on its GPU: the host never entered the op
};

struct RootFinding {
  int rank = -1;    // rank index in the Snapshot
  RootKind kind = RootKind::kHostHang;
  double confidence = 0;
  int target = -1;  // the first target it blocks
  int direct = 0;   // ranks waiting on it directly
  int total = 0;    // and in all
  const proto::CommRow* behind = nullptr;  // kComputeHang: the row whose GPU is behind its host
};

// Dead (crash) or frozen on its own: nobody seen waiting on it inside NCCL.
struct AloneFinding {
  int rank = -1;
  bool crash = false;  // else host frozen
  double confidence = 0;
};

// One communicator's transport hang: collectives nobody blocks, or p2p pairs waiting on each
// other.
struct TransportFinding {
  int comm = -1;
  std::vector<int> targets;  // graph order
  std::vector<int> members;  // rank indexes, by rank, once each
  bool pair = false;         // a p2p pair
  double confidence = 1.0;
  int total = 0;             // other ranks waiting on the members
};

struct Findings {
  std::vector<RootFinding> roots;        // by rank
  std::vector<AloneFinding> alone;       // by rank
  std::vector<int> teardown;             // deaths set aside as a teardown, in the order found
  std::vector<TransportFinding> transports;
  // Waiters nothing explains: how many, and those that also block others (a cycle; at most
  // kMaxCycleSuspects); unknown_ops: ops waiting on comm ranks no membership names.
  int unexplained = 0;
  std::vector<int> cycle;
  int unknown_ops = 0;
  static constexpr size_t kMaxCycleSuspects = 16;
};

Findings Classify(Snapshot& snap, WaitForGraph& graph, const AttributionInput& in);

}  // namespace ft::master::attribution

#endif  // FT_FTMASTER_CORE_ATTRIBUTION_CLASSIFY_H_
