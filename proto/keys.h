// Redis key names of one job (docs/redis-schema.md). The job's keys carry one of kGroups + 1
// hash tags, so that a Redis Cluster spreads a job over its shards (docs/redis-schema.md,
// "Slots"): "ft:{<job>}:" for the job-wide keys, which change together (the lease and every
// write fenced by it, the plan, incidents, commands, checkpoint steps: one slot, so scripts
// and pipelines over them work), and "ft:{<job>:g<k>}:" for group k's per-rank keys (a rank's
// progress and summary: group rank mod kGroups) and per-node keys (a worker's heartbeat: group
// GroupOfNode). A node's command cursor sits beside its command stream, in the job's tag: a
// shard that loses one loses both, never the cursor alone. Nothing that one script touches spans two tags. One
// layout for a single server and a cluster: hash tags mean nothing to a single server.
#ifndef FT_PROTO_KEYS_H_
#define FT_PROTO_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft::proto {

class Keys {
 public:
  // The job as common/job_name.h's JobToken spells it (as segment and checkpoint file names:
  // [A-Za-z0-9_-], at most 48 characters, a digest suffix for any other name). Node names keep
  // [A-Za-z0-9_.-]; any other byte becomes '_' (SanitizeName).
  explicit Keys(std::string_view job);

  // The number of groups: part of the layout (every worker and master of a job must agree),
  // not a setting.
  static constexpr int kGroups = 16;
  static int GroupOfRank(int rank);               // rank mod kGroups (never negative)
  static int GroupOfNode(std::string_view node);  // FNV-1a of the sanitized name mod kGroups

  const std::string& prefix() const { return prefix_; }  // "ft:{<job>}:"
  std::string GroupPrefix(int group) const;               // "ft:{<job>:g<group>}:"
  // An ACL key pattern that matches `suffix` in every group: "ft:{<job>:g*}:<suffix>".
  std::string AllGroups(std::string_view suffix) const;

  std::string Events() const;                        // stream: worker events
  std::string Progress(int group) const;             // hash: rank -> RankProgress, the group's ranks
  std::string Summaries(int group) const;            // hash: rank -> RankSummary, the group's ranks
  std::string ProgressOf(int rank) const { return Progress(GroupOfRank(rank)); }
  std::string SummaryOf(int rank) const { return Summaries(GroupOfRank(rank)); }
  std::vector<std::string> AllProgress() const;      // Progress(0..kGroups-1)
  std::vector<std::string> AllSummaries() const;     // Summaries(0..kGroups-1)
  std::string Ranks() const;                         // hash: rank -> Membership
  std::string RanksVersion() const;                  // string: bumped at every Ranks() change
  std::string Workers() const;                       // set: node ids of workers ever seen
  std::string WorkerHeartbeat(std::string_view node) const;  // string with TTL (node's group)
  std::string Timeouts() const;                      // string: TimeoutTable
  std::string TimeoutsVersion() const;               // string: its version (cheap to poll)
  std::string Commands(std::string_view node) const; // stream: Command for one node
  // string: last stream id executed, ft:{<job>}:cmd:<node>:cursor (the stream's slot).
  std::string CommandCursor(std::string_view node) const;
  // Where workers of the grouped layout kept the cursor (ft:{<job>:g<k>}:cursor:<node>, a
  // slot apart from the stream): read once by an upgraded worker that finds no cursor beside
  // the stream, never written.
  std::string LegacyCommandCursor(std::string_view node) const;
  std::string Acks() const;                          // stream: CommandAck
  std::string Notify() const;                        // stream: Notice (proto/notice.h) for every worker
  std::string Incidents() const;                     // stream: Incident
  std::string Evicted() const;                       // set: node ids
  std::string Leader() const;                        // string with PX: the leading master
  std::string MasterState() const;                   // hash: the master's durable state
  std::string CkptSteps() const;                     // sorted set: steps with copies
  std::string CkptStep(int64_t step) const;          // hash: rank -> CkptCopy
  std::string CkptBuddy(int64_t step) const;         // hash: rank -> CkptCopy (buddy copies)
  std::string CkptVerdicts() const;                  // hash: step -> StepVerdict
  std::string CkptRewinds() const;                   // string: CkptRewinds (where the job went back)
  std::string Restore() const;                       // string: RestorePlan
  std::string RestoreVersion() const;                // string: its version
  std::string TransferSecret() const;                // string: the job's peer-transfer secret (hex)
  std::string Endpoints() const;                     // hash: node -> TransferEndpoint
  std::string Prefetch() const;                      // hash: node -> PrefetchReport

  // Across jobs (proto/node_history.h): keys of no job's slot, so that they outlive every job.
  // A node's history carries the node as its hash tag (one slot per node).
  static std::string NodeHistory(std::string_view node);  // stream: ft:node:{<node>}:history
  static std::string NodesIndex();                         // sorted set ft:nodes: node -> last record
  static std::string Cordons();                            // hash ft:cordon: node -> CordonEntry

 private:
  std::string job_;     // the job's token
  std::string prefix_;
};

std::string SanitizeName(std::string_view name);

}  // namespace ft::proto

#endif  // FT_PROTO_KEYS_H_
