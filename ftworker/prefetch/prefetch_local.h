// The prefetcher's view of this node's own copies: whether the planned copy of a rank is here
// already (its own arena, its local-tier copy, a buddy copy the replicator keeps, another
// same-node rank's arena or local copy), and the prefetch arena
// <arena_dir>/ft-prefetch.<job>.<rank> a pull writes. Reads files (and removes a prefetch
// arena); holds no state after construction: any thread may call it, several at once.
#ifndef FT_FTWORKER_PREFETCH_LOCAL_H_
#define FT_FTWORKER_PREFETCH_LOCAL_H_

#include <cstdint>
#include <string>

#include "ftworker/prefetch/prefetch_sources.h"

namespace ft::worker {

class NodeCopies {
 public:
  NodeCopies(std::string job, std::string arena_dir, std::string local_dir);

  // Whether `rank`'s own arena holds the planned copy: this job's (the manifest names the job:
  // an arena another job left under the same file name is not this rank's copy), `step`, not
  // torn, content digest `digest`.
  bool OwnArenaHolds(int rank, int64_t step, uint64_t digest) const;
  // Where the planned copy of work.rank already is on this node ("" none), for the log: "own
  // arena", "local dir", "buddy copy of rank 3", "arena of rank 3", "local dir (copy of rank 3)".
  std::string Find(int64_t step, const RankWork& work) const;
  // Whether `rank`'s prefetch arena holds the planned copy already (a worker restarted after
  // its prefetch); *source_rank: the rank whose copy it is.
  bool PrefetchArenaHolds(int rank, int64_t step, uint64_t digest, int* source_rank) const;

  std::string PrefetchPath(int rank) const;
  // Removes `rank`'s prefetch arena when it holds nothing a plan needs (an older step, a failed
  // pull); absent is fine, a failure is logged with what to do.
  void RemovePrefetchArena(int rank) const;

 private:
  const std::string job_;
  const std::string arena_dir_;
  const std::string local_dir_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_LOCAL_H_
