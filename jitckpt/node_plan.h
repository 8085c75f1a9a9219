// ft::ckpt::NodePlan: the restore plan as ftworker hands it to the training processes of its
// node — a small text file the worker rewrites (temp + rename) whenever the master's plan in
// Redis changes, and ft_restore reads. The training process never talks to Redis.
//
//   path  <arena_dir>/ft-plan.<job>.<node>   (0600; job and node sanitized)
//
//   ft-restore-plan 1      (2 when the plan is settling: the `settling` line)
//   job <job>
//   node <node>
//   version <the master's plan version>
//   step <step>            or   step none      (no verified checkpoint: start from scratch)
//   settling <why>         (format 2; absent: final) not final yet — ft_restore waits
//   arena_dir <path>
//   local_dir <path>       (absent when the worker has no local tier)
//   remote_dir <path>      (absent when the worker has no remote tier)
//   rank <r> <digest hex16> <src_rank>:<src_node>:<tier>[,<tier>...] [<src>...]
//   ...                    one line per rank of the job: the verified copies of its shard
//   end
//
// Tiers: arena, local, remote, and prefetched (a copy this node's worker pulled from another
// node into <arena_dir>/ft-prefetch.<job>.<rank>, listed as <rank>:<this node>:prefetched; the
// master never plans it), and replica (a buddy copy the source node's worker holds of that rank
// in <arena_dir>/ft-replica.<job>.<rank>). A source is a (rank, node) pair, listed once. Paths are absolute and may not contain newlines; node names are
// sanitized ([A-Za-z0-9_.-]). Parsed defensively (fuzzed): unknown keys are an error, a newer
// version is refused by name, a file without `end` is truncated.
#ifndef FT_JITCKPT_NODE_PLAN_H_
#define FT_JITCKPT_NODE_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::ckpt {

// Format 2 adds the `settling` line; a final plan is still written as format 1, which every
// reader since the first reads.
inline constexpr uint32_t kNodePlanVersion = 2;

struct PlanSource {
  int rank = -1;
  std::string node;
  std::vector<std::string> tiers;  // "arena", "local", "remote", "prefetched", "replica"
  bool operator==(const PlanSource&) const = default;
};

struct PlanRank {
  int rank = -1;
  uint64_t digest = 0;             // the verified content digest of the step for its shard
  std::vector<PlanSource> sources; // verified copies, the rank's own first when it has one
  bool operator==(const PlanRank&) const = default;
};

struct NodePlan {
  std::string job;
  std::string node;
  int64_t version = 0;
  int64_t step = -1;               // -1: none
  // Empty: final. Otherwise why the plan is not final yet (the master settles an incident, a
  // teardown, newer copies; a rank of this node ended): ft_restore waits for the final plan.
  std::string settling;
  std::string arena_dir, local_dir, remote_dir;
  std::vector<PlanRank> ranks;     // sorted by rank

  const PlanRank* Find(int rank) const;
  bool operator==(const NodePlan&) const = default;
};

std::string NodePlanPath(std::string_view arena_dir, std::string_view job, std::string_view node);
std::string EncodeNodePlan(const NodePlan& plan);
Status ParseNodePlan(std::string_view text, NodePlan* out);
// Temp file + rename, mode 0600.
Status WriteNodePlan(const std::string& path, const NodePlan& plan);
// NotFound when the file is absent; Corrupt, at once, for anything but a regular file of this
// user (a FIFO, a symlink: OpenTrusted, jitckpt/file_ops.h); ParseNodePlan's errors otherwise.
Status ReadNodePlan(const std::string& path, NodePlan* out);

// Whether a plan file is current: its worker holds `<arena dir>/ft-planlock.<job>.<node>` locked
// (an open-file-description write lock, which the kernel drops when the worker dies, SIGKILL
// included) for as long as it runs. A plan file whose lock file exists and is held by nobody was
// left by a worker that was killed: it says what was planned before the failure a relaunch is
// recovering from (a rank reading it would restore nothing, or an old step, while its peers
// restore the plan of now). No lock file: a worker from before the lock, trusted as it was.
std::string NodePlanLockPath(const std::string& plan_path);

// The worker's side. Claim(): unless another live worker holds the lock, removes the plan file
// left there (a killed worker's) and then takes the lock — in that order, so a reader that
// checks the lock first and reads the plan second never takes a dead worker's plan for a live
// one's. Release(): the lock file removed and the lock dropped (a clean stop, after the plan
// file). The destructor drops the lock (the file stays: the next worker's Claim reuses it).
class PlanWriterLock {
 public:
  PlanWriterLock() = default;
  ~PlanWriterLock();
  PlanWriterLock(const PlanWriterLock&) = delete;
  PlanWriterLock& operator=(const PlanWriterLock&) = delete;

  // `remove_plan`: the plan file there is not the caller's own (none written yet).
  Status Claim(const std::string& plan_path, bool remove_plan = true);
  void Release();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string lock_path_;
};

// The reader's side: ReadNodePlan, unless the plan's worker is gone (NotFound, saying so: the
// caller waits for the next worker's plan as for an absent file).
Status ReadLiveNodePlan(const std::string& path, NodePlan* out);

// Whether a worker holds the plan lock of `path` now: it runs, whether or not it has written
// the plan yet (it writes it once it has read the job's checkpoints from Redis).
bool NodePlanWriterRuns(const std::string& path);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_NODE_PLAN_H_
