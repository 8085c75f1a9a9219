// What the prefetcher (ftworker/prefetch/prefetcher.h) is given: the transfer engine it pulls through and
// its options. Immutable once the Prefetcher is built; every part of it reads them.
#ifndef FT_FTWORKER_PREFETCH_OPTIONS_H_
#define FT_FTWORKER_PREFETCH_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

// The transfer engine as the prefetcher uses it (transfer_engine/transfer.h); tests put in a fake.
// Called from the prefetcher's threads, several at once.
class PullEngine {
 public:
  virtual ~PullEngine() = default;
  virtual Status Stat(const rdma::PullOptions& options, const rdma::Peer& peer, const std::string& region,
                      rdma::RegionInfo* out) = 0;
  virtual Status Pull(const rdma::PullOptions& options, const rdma::PullRequest& request,
                      rdma::PullResult* result) = 0;
};

// rdma::Stat and rdma::Pull (ftworker/prefetch/prefetch_engine.cc).
std::shared_ptr<PullEngine> MakeTransferEngine();

struct PrefetcherOptions {
  std::string job;
  std::string node;
  std::vector<int> ranks;      // FT_NODE_RANKS, sorted
  std::string arena_dir;       // FT_CKPT_ARENA_DIR: own arenas, prefetch arenas
  std::string local_dir;       // FT_CKPT_DIR ("" none)
  std::string remote_dir;      // FT_CKPT_REMOTE_DIR ("" none): the last resort of a pull
  rdma::PullOptions pull;      // the secret is read from Redis; fast_path: verbs or null
  std::shared_ptr<PullEngine> engine;
  // Told of each prefetch arena's data region once it is mapped, before its pull, and before
  // it is unmapped. The verbs client registers the destination with the NIC there and must
  // forget it: a registration outliving the mapping pins the old pages, and a later arena
  // mapped at the same address would receive RDMA READs into memory nobody reads
  // (rdma::VerbsClient::Register, Forget). Empty: nothing to do.
  std::function<void(uint8_t*, uint64_t)> destination_mapped;
  std::function<void(const uint8_t*, uint64_t)> destination_unmapped;
  std::chrono::nanoseconds cleanup_interval = std::chrono::seconds(1);
  // A rank whose pull failed is tried again (0.5, 1, 2, 2... s apart, with the endpoints and
  // secret then in Redis) while this long has not passed since the prefetch started; the
  // node's plan file waits meanwhile. The daemon: half of FT_RESTORE_WAIT. 0: one attempt.
  std::chrono::milliseconds retry_for{0};
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_OPTIONS_H_
