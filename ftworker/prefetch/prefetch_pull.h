// One attempt at one rank of a prefetch: nothing to do when the planned copy is on this node
// already ("local") or in the rank's prefetch arena from before ("kept"); otherwise the first
// source that answers rdma::Stat with the planned copy (step, content digest, not torn) gives the
// manifest, and the bytes are pulled (every chunk verified against it, a bad or missing chunk
// fetched from the next source, then read from the remote directory) into the prefetch arena,
// which is then committed ("pulled"). A failed attempt removes the prefetch arena ("failed",
// with why). Retries are the caller's (ftworker/prefetch/prefetch_run.h).
//
// Holds only what the Prefetcher hands it at construction, never written afterwards: the
// prefetcher's threads call Attempt at once, one rank each.
#ifndef FT_FTWORKER_PREFETCH_PULL_H_
#define FT_FTWORKER_PREFETCH_PULL_H_

#include <atomic>
#include <cstdint>

#include "common/status.h"
#include "ftworker/prefetch/prefetch_local.h"
#include "ftworker/prefetch/prefetch_options.h"
#include "ftworker/prefetch/prefetch_sources.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"

namespace ft::worker {

class RankPuller {
 public:
  // `options` and `copies` must outlive the puller (the Prefetcher owns all three).
  RankPuller(const PrefetcherOptions& options, const NodeCopies& copies);

  // The outcome of one attempt at `work` for the plan's `step`. `stopping` (the worker is
  // going away) cuts it short as a failure.
  proto::PrefetchRank Attempt(int64_t step, const RankWork& work, const std::atomic<bool>& stopping) const;

 private:
  // Stat, then pull into the prefetch arena and commit it; fills *out's source fields.
  Status Pull(int64_t step, const RankWork& work, const std::atomic<bool>& stopping, proto::PrefetchRank* out) const;

  const PrefetcherOptions& options_;
  const NodeCopies& copies_;
  const proto::Keys keys_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_PULL_H_
