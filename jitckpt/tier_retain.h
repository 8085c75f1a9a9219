// ft::ckpt tier retention: which copies of a job a tier's directory keeps and which go. Called
// by the worker's persist thread after each persist (ftworker/ckpt_keeper). Thread-compatible:
// one caller per (dir, job) on a node; other nodes' workers run the same rule on the same
// remote directory, each removing only its own ranks' copies.
#ifndef FT_JITCKPT_TIER_RETAIN_H_
#define FT_JITCKPT_TIER_RETAIN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "jitckpt/tier_paths.h"

namespace ft::ckpt {

class FileOps;

// What retention keeps in one tier, and whose copies it may remove. A step is *complete* in the
// tier when every expected rank has a committed copy of it there. Kept, whatever keep_steps
// says: the newest keep_steps complete steps, every step newer than the oldest of those (a step
// still being persisted, by this node or another), and the steps in keep_also (the planned
// step, the newest verified one). With fewer than keep_steps complete steps nothing goes: a
// step that is not complete may still be the only good copy of some rank's shard.
struct RetentionRule {
  int keep_steps = 2;               // FT_CKPT_KEEP, >= 1
  std::vector<int> expected_ranks;  // the remote tier: every rank of the job; the local: the node's
  std::vector<int> own_ranks;       // whose copies this caller may remove: its node's ranks only
  std::vector<int64_t> keep_also;   // kept whatever keep_steps says
};

struct RetentionResult {
  std::vector<CopyId> removed;          // copies removed, sorted
  std::vector<std::string> left;        // copies due to go but left: why, naming the file
  std::vector<int64_t> complete_steps;  // the tier's complete steps before retention, ascending
  size_t steps_held = 0;                 // steps with a copy of any rank there, before retention

  // The tier grows with nothing retention may remove: more steps than keep_steps, fewer of them
  // complete (a node's persists fail or lag). Fewer steps than keep_steps in all is a tier
  // still filling (a new job, a just-in-time save that the stuck rank could not join), which is
  // as it should be.
  bool Stuck(int keep_steps) const {
    return steps_held > static_cast<size_t>(keep_steps) && complete_steps.size() < static_cast<size_t>(keep_steps);
  }
};

// Removes what `rule` lets go of `job`'s copies in `dir`: per step older than the newest
// keep_steps complete steps and not in keep_also, the copies of own_ranks — each only after
// its manifest was read and names this job (a copy of another job is left, said in
// result->left), its manifest first so that it stops being a copy before its data goes. A
// step directory left empty is removed. Another node's ranks' copies are never touched: their
// worker removes them by the same rule. InvalidArgument for keep_steps < 1, with nothing
// removed; Corrupt when the job's directory is not trusted.
Status Retain(std::string_view dir, std::string_view job, const RetentionRule& rule, RetentionResult* result);
Status Retain(FileOps& ops, std::string_view dir, std::string_view job, const RetentionRule& rule,
              RetentionResult* result);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_RETAIN_H_
