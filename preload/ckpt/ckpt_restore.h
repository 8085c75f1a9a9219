// libft.so internal: ft_restore's two halves — waiting for the node's restore plan (app
// thread) and bringing the planned copy into the arena and onto the device (agent thread).
#ifndef FT_PRELOAD_CKPT_RESTORE_H_
#define FT_PRELOAD_CKPT_RESTORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"
#include "preload/ckpt/ckpt_cuda.h"
#include "preload/ckpt/ckpt_save.h"

namespace ft::preload::agent {

// App thread: reads the plan file at `path`, polling every 50 ms for up to `wait`, until it is
// there and final (a settling plan is waited through, its reason logged once) and names a copy
// for `rank` on `node` (its own, a same-node peer's, the one the worker pulled here) — a final
// plan without one is waited through too, for the worker's pull, and taken as it is at the end.
// Timeout (naming the file, and why the last read failed or what the plan still waited for)
// when no final plan came.
Status WaitForPlan(const std::string& path, Duration wait, int rank, std::string_view node, ckpt::NodePlan* plan);
// Whether the plan names a copy of `rank`'s shard on `node`, or nothing to restore for it.
bool SourceOnNode(const ckpt::NodePlan& plan, int rank, std::string_view node);

struct RestoreTarget {
  int rank = -1;
  std::string node;
  const std::vector<Registered>* buffers = nullptr;  // in offset order
  std::vector<ckpt::BufferEntry> layout;             // as laid out by PlanLayout
  ckpt::Arena* arena = nullptr;                      // the rank's own
  int device = -1;                                   // of the device buffers; -1: none
  int verify_threads = 1;                            // the saves' checksum helpers, sized alike
};

struct RestoreOutcome {
  int result = 0;  // an ft_result
  std::string message;
  int64_t step = -1;
};

// Agent thread: LoadForRestore (every chunk verified, into the own arena), each chunk copied
// to the buffers it belongs to as soon as it verified (device: on the agent's stream, all
// landed before this returns). Only verified bytes reach the buffers; when every source fails
// after some chunks verified, the buffers hold those chunks and the message says so.
RestoreOutcome RestoreFromPlan(const ckpt::NodePlan& plan, const RestoreTarget& target,
                               AgentCuda* cuda);

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_RESTORE_H_
