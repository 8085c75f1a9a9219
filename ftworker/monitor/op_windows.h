// ft::worker::OpWindows: what one rank's op records say about its ops. The bytes of each entered
// op until its end (an end record carries its duration, not its bytes), the last 64 collectives
// entered on each communicator (the in-flight table keeps only the last entered: a hung op's
// kind and bytes come from here), and the summary window: per (comm, op kind, size bucket) the
// count, a uniform sample of at most 4096 durations, their max and sum. Bounded whatever the
// records say (foreign bytes). Owned by its RankMonitor; not thread-safe.
#ifndef FT_FTWORKER_OP_WINDOWS_H_
#define FT_FTWORKER_OP_WINDOWS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "proto/messages.h"
#include "shm/layout.h"

namespace ft::worker {

class OpWindows {
 public:
  struct Entered {
    uint32_t op = 0;  // the record's OpKind value
    uint64_t bytes = 0;
  };

  // A kOpEnter not captured into a graph, of kind `op`.
  void OnEnter(const shm::Record& r, uint32_t op);
  // A kOpEnd of kind `op`: true when its duration counts (its enter was seen and the op was
  // timed), and then counted in the window.
  bool OnEnd(const shm::Record& r, uint32_t op);
  // Collective `seq` of `comm_id`, when it is among the last 64 entered there.
  std::optional<Entered> EnteredOp(uint64_t comm_id, uint64_t seq) const;
  // Closes the window: one summary per (comm, op, bucket) since the last call.
  std::vector<proto::OpSummary> TakeSummaries();

 private:
  struct Key {
    uint64_t comm_id;
    uint32_t op;
    int bucket;
    auto operator<=>(const Key&) const = default;
  };
  struct Window {
    std::vector<double> samples_ms;  // a uniform sample of at most kMaxSamples
    uint64_t count = 0;
    double max_ms = 0;
    double sum_ms = 0;
    uint64_t last_seq = 0;
  };
  struct Recent {
    uint64_t seq = 0;
    Entered op;
  };

  std::unordered_map<uint64_t, uint64_t> pending_bytes_;  // (comm, a, seq) hash -> bytes of an entered op
  std::unordered_map<uint64_t, std::array<Recent, 64>> recent_;  // comm -> by seq % 64
  std::map<Key, Window> windows_;
  uint64_t sample_rng_ = 0x853c49e6748fea9bull;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_OP_WINDOWS_H_
