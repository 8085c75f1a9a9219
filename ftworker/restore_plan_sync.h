// ft::worker::RestorePlanSync: hands the master's restore plan to the training processes of
// this node. About once a second it reads ft:{J}:restore:version; when that changed it reads
// ft:{J}:restore, converts the plan to this node's ckpt::NodePlan (the tier directories are
// this worker's) and rewrites the plan file ft_restore reads (jitckpt/node_plan.h). With no
// plan in Redis it writes a `step none` plan, so ft_restore of a fresh job starts at once
// instead of waiting FT_RESTORE_WAIT. A plan that does not decode is logged once and the
// previous file is kept. The first poll runs as soon as Redis answers. A worker that stops
// removes the file: ranks started before the next worker has read Redis then wait for its
// plan instead of reading a stale one (e.g. `step none` from before a save).
// Not thread-safe: the daemon loop owns it.
#ifndef FT_FTWORKER_RESTORE_PLAN_SYNC_H_
#define FT_FTWORKER_RESTORE_PLAN_SYNC_H_

#include <cstdint>
#include <string>

#include "jitckpt/node_plan.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "redis/store.h"

namespace ft::worker {

struct RestorePlanSyncOptions {
  std::string job;
  std::string node;
  std::string arena_dir;   // where the plan file goes (FT_CKPT_ARENA_DIR)
  std::string local_dir;   // FT_CKPT_DIR
  std::string remote_dir;  // FT_CKPT_REMOTE_DIR
  uint64_t poll_interval_ns = 1'000'000'000;
};

// The node's view of the master's plan (version, step, every rank's digest and sources).
ckpt::NodePlan ToNodePlan(const proto::RestorePlan& plan, const RestorePlanSyncOptions& options);

class RestorePlanSync {
 public:
  explicit RestorePlanSync(RestorePlanSyncOptions options);

  // Reads Redis when a poll is due; writes the file when the plan changed.
  void Poll(uint64_t mono_ns, redis::Commands& redis);

  // Removes the plan file this worker wrote (at a clean stop).
  void RemoveFile();

  const std::string& path() const { return path_; }
  int64_t files_written() const { return files_written_; }

 private:
  void Write(const ckpt::NodePlan& plan, const std::string& version);

  RestorePlanSyncOptions options_;
  proto::Keys keys_;
  std::string path_;
  uint64_t next_poll_ns_ = 0;
  bool have_version_ = false;
  std::string version_;  // restore:version of the plan last handled ("" when absent)
  int64_t files_written_ = 0;
  bool write_failing_ = false;  // the last write failed (logged once until one succeeds)
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_RESTORE_PLAN_SYNC_H_
