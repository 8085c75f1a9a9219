// ft::worker::SweepArenas: removes the host arenas of one job that DecideArenaGc
// (ftworker/ckpt/arena_gc.h) lets go, and says of each what it did and why. The I/O around the pure
// rule: it lists the job's arenas (ft-ckpt.<job>.<rank>), prefetch arenas
// (ft-prefetch.<job>.<rank>) and buddy copies (ft-replica.<job>.<rank>) in the arena directory, reads each one's committed copy
// (Arena::OpenForRead: a regular file of this user, a valid header; then ReadCommitted), looks
// for the same copy (step, rank, content digest) in the tiers (ReadManifest), asks who holds
// the file, and removes with unlink only — never truncate: a reader still mapping it keeps its
// pages — after checking again that the path is still the regular file of this user it read
// and that no live process took it meanwhile.
//
// Used by the daemon's automatic pass (CkptKeeper, on its persist thread) and `ftworker gc`.
// Thread-compatible; it keeps no state between calls.
#ifndef FT_FTWORKER_ARENA_SWEEP_H_
#define FT_FTWORKER_ARENA_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "ftworker/ckpt/arena_gc.h"
#include "proto/keys.h"
#include "redis/store.h"

namespace ft::worker {

// Who holds the arena at `path` (inode `ino`, whose header names `writer_pid`): a sentence
// naming the process, or "" when nobody does.
using ArenaHolderFn = std::function<std::string(const std::string& path, uint64_t ino, int writer_pid)>;

// The real one: the header's writer is a live process other than this one (kill(pid, 0), not a
// zombie), or some other process of this user maps the file writable (/proc/*/maps, read once
// per sweep). A writer that is this process (the worker's own prefetch arena) holds it too.
ArenaHolderFn SystemArenaHolder();

struct ArenaSweepOptions {
  std::string job;
  std::string arena_dir;
  std::string local_dir;   // empty: no local tier
  std::string remote_dir;  // empty: no remote tier
  std::vector<int> ranks;  // only these ranks' arenas; empty: every rank found
  ArenaHolderFn holder;    // empty: SystemArenaHolder()
  bool dry_run = false;    // decide and say, remove nothing
};

struct ArenaSweepEntry {
  ArenaFacts facts;
  ArenaGcDecision decision;
  uint64_t bytes = 0;        // the file's size: the memory its removal frees
  bool removed = false;      // unlinked (never with dry_run)
  std::string remove_error;  // the decision was to remove, but unlink failed or the file changed
};

// Decides every arena of options.job in options.arena_dir against `job` and removes what the
// rule lets go. Sorted: the ranks' arenas by rank, then the prefetch arenas, then the buddy
// copies, each by rank.
std::vector<ArenaSweepEntry> SweepArenas(const ArenaSweepOptions& options, const JobGcFacts& job);

// The line for one entry (ArenaGcLine, or "kept <path>: removing it failed: ..."), and the
// summary: "gc of job J in D: removed N arenas (X MiB), kept M".
std::string ArenaSweepLine(const ArenaSweepEntry& entry);
std::string ArenaSweepSummary(const ArenaSweepOptions& options, const std::vector<ArenaSweepEntry>& entries);

// The job's state from Redis: job_state (HGET ft:{J}:master job_state), the plan's step (GET
// ft:{J}:restore) and the newest complete and verified steps (HGETALL ft:{J}:ckpt:verdicts).
// Any Redis error is returned and *out left unchanged; so is a plan that does not decode (the
// planned step must never be mistaken). A verdict that does not decode is skipped: it can only
// make a step look older than it is, and an arena is removed only when a tier holds its copy.
Status ReadJobGcFacts(redis::Commands& db, const proto::Keys& keys, JobGcFacts* out);

}  // namespace ft::worker

#endif  // FT_FTWORKER_ARENA_SWEEP_H_
