#include "ftworker/prefetch/prefetch_local.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier.h"

namespace ft::worker {

namespace {

// The planned copy: `step`, not torn, content digest `digest`.
bool IsPlanned(const ckpt::Manifest& m, int64_t step, uint64_t digest) {
  return m.step == step && !m.torn && ckpt::ContentDigest(m) == digest;
}

// Whether the arena file at `path` holds the planned copy of `job` in either slot (the restore
// takes the other slot's too); its manifest to *m.
bool ArenaHoldsPlanned(const std::string& path, std::string_view job, int64_t step, uint64_t digest,
                       ckpt::Manifest* m) {
  ckpt::Arena arena;
  uint64_t generation = 0;
  return ckpt::Arena::OpenForRead(path, &arena).ok() && arena.ReadStep(step, m, &generation).ok() && m->job == job &&
         IsPlanned(*m, step, digest);
}

}  // namespace

NodeCopies::NodeCopies(std::string job, std::string arena_dir, std::string local_dir)
    : job_(std::move(job)), arena_dir_(std::move(arena_dir)), local_dir_(std::move(local_dir)) {}

bool NodeCopies::OwnArenaHolds(int rank, int64_t step, uint64_t digest) const {
  ckpt::Manifest m;
  return ArenaHoldsPlanned(ckpt::Arena::PathFor(arena_dir_, job_, rank), job_, step, digest, &m);
}

std::string NodeCopies::Find(int64_t step, const RankWork& work) const {
  auto in_local_dir = [&](int rank) {
    ckpt::Manifest m;
    return !local_dir_.empty() && ckpt::ReadManifest(local_dir_, job_, {step, rank}, &m).ok() &&
           IsPlanned(m, step, work.digest);
  };
  // A buddy copy this node's worker holds of `rank` (ft_restore reads it through the plan's
  // "replica" tier).
  auto in_replica = [&](int rank) {
    ckpt::Manifest m;
    return ArenaHoldsPlanned(ckpt::Arena::ReplicaPathFor(arena_dir_, job_, rank), job_, step, work.digest, &m);
  };
  if (OwnArenaHolds(work.rank, step, work.digest)) return "own arena";
  if (in_local_dir(work.rank)) return "local dir";
  for (int rank : work.same_node_replicas) {
    if (in_replica(rank)) return fmt::format("buddy copy of rank {}", rank);
  }
  for (int rank : work.same_node_ranks) {
    if (rank == work.rank) continue;
    if (OwnArenaHolds(rank, step, work.digest)) return fmt::format("arena of rank {}", rank);
    if (in_local_dir(rank)) return fmt::format("local dir (copy of rank {})", rank);
  }
  return "";
}

bool NodeCopies::PrefetchArenaHolds(int rank, int64_t step, uint64_t digest, int* source_rank) const {
  ckpt::Manifest m;
  if (!ArenaHoldsPlanned(PrefetchPath(rank), job_, step, digest, &m)) return false;
  *source_rank = m.rank;
  return true;
}

std::string NodeCopies::PrefetchPath(int rank) const {
  return ckpt::Arena::PrefetchPathFor(arena_dir_, job_, rank);
}

void NodeCopies::RemovePrefetchArena(int rank) const {
  const std::string path = PrefetchPath(rank);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    FT_LOG(Warn, Worker, "could not remove the prefetch arena {}: {}; remove it by hand to free its memory",
           path, std::strerror(errno));
  }
}

}  // namespace ft::worker
