#include "preload/ckpt_restore.h"

#include <time.h>

#include <chrono>
#include <thread>

#include "include/ft/ft.h"

namespace ft::preload::agent {

Status WaitForPlan(const std::string& path, Duration wait, ckpt::NodePlan* plan) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  Status last;
  for (;;) {
    Status read = ckpt::ReadNodePlan(path, plan);
    if (read.ok()) return read;
    if (read.code() != StatusCode::kNotFound) last = read;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string message = "no restore plan at " + path + " after " + FormatDuration(wait) +
                        ": is ftworker running on this node (FT_RESTORE_WAIT)?";
  if (!last.ok()) message += " The last read failed: " + last.ToString();
  return Status::Timeout(message);
}

RestoreOutcome RestoreFromPlan(const ckpt::NodePlan&, const RestoreTarget&, AgentCuda*) {
  // Loading and verifying a copy (jitckpt/restore_loader.h) is the next step.
  RestoreOutcome out;
  out.result = FT_NO_CHECKPOINT;
  out.message = "ft_restore: this build of libft.so cannot load checkpoints yet: starting from scratch";
  return out;
}

}  // namespace ft::preload::agent
