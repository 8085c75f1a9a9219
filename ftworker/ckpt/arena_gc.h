// ft::worker::DecideArenaGc: whether one host arena (a rank's ft-ckpt.<job>.<rank>, a
// prefetch arena ft-prefetch.<job>.<rank>, or a buddy copy ft-replica.<job>.<rank>) may be removed, and why (not). Pure: the facts are
// gathered by the caller (ftworker/ckpt/arena_sweep.h reads the file, the tiers, /proc and Redis),
// so the rule is tested without files, processes or Redis. Both the daemon's automatic pass
// (CkptKeeper) and `ftworker gc` decide with it.
//
// The rule (docs/checkpoints.md, "Host arena", "Removing arenas"), in order:
//   1. a file that is not a trusted arena (not a regular file of this user, a bad header) is
//      left alone;
//   2. an arena a live process holds (the rank writing it, a restarted rank about to restore
//      from it) is kept;
//   3. an arena with a copy of another job is left alone;
//   4. an arena with no committed copy holds nothing: removed; a torn committed copy is not a
//      checkpoint: removed;
//   5. without the job's state (no Redis) the copy's step cannot be ruled out: kept;
//   6. unless the job finished or its plan names a newer step, the job may still need it: kept;
//   7. the planned step, the newest complete step and the newest verified step are kept;
//   8. a copy no tier holds (same step, rank and content digest) is kept;
//   9. otherwise it is removed.
#ifndef FT_FTWORKER_ARENA_GC_H_
#define FT_FTWORKER_ARENA_GC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ft::worker {

// What one arena file is, as read by the caller.
struct ArenaFacts {
  std::string path;
  bool prefetch = false;       // ft-prefetch.<job>.<rank>
  bool replica = false;        // ft-replica.<job>.<rank>: a buddy copy of another node's rank
  bool trusted = true;         // a regular file of this user with a valid arena header
  std::string untrusted_why;   // when !trusted: OpenForRead's words
  std::string held_by;         // a live process holding it ("rank 3 (pid 412) runs on this
                               // node"); empty: none
  bool has_copy = false;       // a committed copy (ReadCommitted)
  bool other_job = false;      // its manifest names another job
  std::string copy_job;        // that job
  int64_t step = -1;
  int rank = -1;
  bool torn = false;
  std::vector<std::string> persisted_in;  // tiers ("local", "remote") holding the same copy
};

// What the job's master says (Redis), as read by the caller.
struct JobGcFacts {
  bool known = false;            // false: no Redis (the CLI without FT_REDIS, or it is away)
  std::string unknown_why;       // when !known
  bool finished = false;         // ft:{J}:master job_state is `finished`
  int64_t planned_step = -1;     // ft:{J}:restore's step; -1: none
  int64_t newest_complete = -1;  // the newest step whose verdict is not `incomplete`
  int64_t newest_verified = -1;  // the newest step whose verdict is `verified`
  // `ftworker gc --release`: the job will not be relaunched, so once it finished its planned
  // and newest steps need not stay in memory either (a persisted copy still must exist).
  bool release = false;
};

// Why an arena is kept or removed: tests compare these, people read `why`.
enum class ArenaGcReason {
  kRemovePersisted,  // its copy is persisted and no longer needed in memory
  kRemoveEmpty,      // no committed copy, no live holder
  kRemoveTorn,       // only a torn copy, no live holder
  kKeepUntrusted,
  kKeepHeld,
  kKeepOtherJob,
  kKeepJobUnknown,
  kKeepJobRunning,
  kKeepPlanned,
  kKeepNewestComplete,
  kKeepNewestVerified,
  kKeepNotPersisted,
};
const char* ArenaGcReasonName(ArenaGcReason reason);  // "persisted", "held", ...

struct ArenaGcDecision {
  bool remove = false;
  ArenaGcReason reason = ArenaGcReason::kKeepJobUnknown;
  std::string why;  // "step 12 persisted in local,remote, not planned/newest" or why it stays
};

ArenaGcDecision DecideArenaGc(const ArenaFacts& arena, const JobGcFacts& job);

// The line `ftworker gc` prints and the worker logs: "removed <path>: <why>" or
// "kept <path>: <why>".
std::string ArenaGcLine(const ArenaFacts& arena, const ArenaGcDecision& decision);

}  // namespace ft::worker

#endif  // FT_FTWORKER_ARENA_GC_H_
