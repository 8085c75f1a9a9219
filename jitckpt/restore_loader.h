// ft::ckpt::LoadForRestore: the host half of ft_restore, with no CUDA: finds a verified copy
// of the planned step for this rank on this node and brings it into the rank's own arena,
// verified chunk by chunk. The agent then copies the arena's buffers to the device.
//
// Sources, fastest first: the rank's own arena (already holding the step: verified in place,
// nothing copied), the copy ftworker prefetched for it from another node (a plan source
// <rank>:<this node>:prefetched: the arena file Arena::PrefetchPathFor, opened read-only), a
// same-node peer's arena (plan sources on this node), the local directory,
// the remote directory (plan sources whose copy is in that tier). A source is used only when
// its manifest's step and content digest equal the plan's and it is not torn; a source that
// fails (absent, overwritten while read, a chunk that does not verify, unreadable) is logged
// with why and the next one is tried. All or nothing: a copy is committed into the own arena
// only once every chunk verified; on error the own arena keeps its committed copy when it has
// two slots (with one, a failed copy into it leaves it empty).
#ifndef FT_JITCKPT_RESTORE_LOADER_H_
#define FT_JITCKPT_RESTORE_LOADER_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"

namespace ft::ckpt {

struct RestoreResult {
  int64_t step = -1;
  std::string source;            // e.g. "own arena", "prefetched copy", "arena of rank 4", "local dir"
  Manifest manifest;             // the restored copy's manifest (now committed in `own`)
  double seconds = 0;
  std::vector<std::string> skipped;  // one line per source that was tried and failed, and why
};

// `registered`: this rank's buffers as laid out by PlanLayout. NotFound when the plan has no
// step (or no line for this rank); InvalidArgument (LayoutMatches' words) when the saved
// layout differs; Corrupt when every source failed (RestoreResult::skipped says why).
Status LoadForRestore(const NodePlan& plan, int rank, const std::string& node,
                      const std::vector<BufferEntry>& registered, Arena* own, RestoreResult* result);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_RESTORE_LOADER_H_
