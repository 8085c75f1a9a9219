// `ftworker gc --job J [--arena-dir D] [--dry-run] [--release] [--redis URL]`: removes the job's host arenas
// on this node that are no longer needed, by the rule the worker's automatic pass follows
// (ftworker/ckpt/arena_gc.h), and says of each arena what it did and why — for a job's epilogue
// (docs/checkpoints.md, "Removing arenas"). The job's state comes from Redis (FT_REDIS or
// --redis); without it every arena holding a copy is kept, saying why. Prints one line per
// arena ("removed <path>: ..." / "kept <path>: ...") and a summary line on stdout.
#ifndef FT_FTWORKER_GC_COMMAND_H_
#define FT_FTWORKER_GC_COMMAND_H_

#include <string>

#include "ftworker/ckpt/arena_sweep.h"
#include "redis/url.h"

namespace ft::worker {

struct GcCommand {
  // Which arenas, with which tiers, and whether to remove or only say: job, arena_dir
  // (FT_CKPT_ARENA_DIR or --arena-dir), local_dir (FT_CKPT_DIR), remote_dir (FT_CKPT_REMOTE_DIR),
  // dry_run (--dry-run). `ranks` and `holder` stay empty: every rank's arena is looked at, and
  // whether a live process holds it is asked of the system (SystemArenaHolder).
  ArenaSweepOptions sweep;
  bool release = false;  // --release: the finished job's planned and newest steps may go too
  bool have_redis = false;  // an endpoint is configured
  redis::Endpoint redis;
  std::string no_redis_why;  // when !have_redis
};

// The exit status: 0 once it could decide (whatever it kept), 2 when it could not look (no job).
int RunGc(const GcCommand& command);

}  // namespace ft::worker

#endif  // FT_FTWORKER_GC_COMMAND_H_
