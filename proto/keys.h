// Redis key names of one job (docs/redis-schema.md). Every key starts with "ft:{<job>}:": the
// braces make Redis Cluster put a whole job in one hash slot, so multi-key transactions work.
#ifndef FT_PROTO_KEYS_H_
#define FT_PROTO_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace ft::proto {

class Keys {
 public:
  // The job as common/job_name.h's JobToken spells it (as segment and checkpoint file names:
  // [A-Za-z0-9_-], at most 48 characters, a digest suffix for any other name). Node names keep
  // [A-Za-z0-9_.-]; any other byte becomes '_' (SanitizeName).
  explicit Keys(std::string_view job);

  const std::string& prefix() const { return prefix_; }  // "ft:{<job>}:"

  std::string Events() const;                        // stream: worker events
  std::string Progress() const;                      // hash: rank -> RankProgress
  std::string Summaries() const;                     // hash: rank -> RankSummary
  std::string Ranks() const;                         // hash: rank -> Membership
  std::string RanksVersion() const;                  // string: bumped at every Ranks() change
  std::string Workers() const;                       // set: node ids of workers ever seen
  std::string WorkerHeartbeat(std::string_view node) const;  // string with TTL
  std::string Timeouts() const;                      // string: TimeoutTable
  std::string TimeoutsVersion() const;               // string: its version (cheap to poll)
  std::string Commands(std::string_view node) const; // stream: Command for one node
  std::string CommandCursor(std::string_view node) const;  // string: last stream id executed
  std::string Acks() const;                          // stream: CommandAck
  std::string Incidents() const;                     // stream: Incident
  std::string Evicted() const;                       // set: node ids
  std::string Leader() const;                        // string with PX: the leading master
  std::string MasterState() const;                   // hash: the master's durable state
  std::string CkptSteps() const;                     // sorted set: steps with copies
  std::string CkptStep(int64_t step) const;          // hash: rank -> CkptCopy
  std::string CkptBuddy(int64_t step) const;         // hash: rank -> CkptCopy (buddy copies)
  std::string CkptVerdicts() const;                  // hash: step -> StepVerdict
  std::string Restore() const;                       // string: RestorePlan
  std::string RestoreVersion() const;                // string: its version
  std::string TransferSecret() const;                // string: the job's peer-transfer secret (hex)
  std::string Endpoints() const;                     // hash: node -> TransferEndpoint
  std::string Prefetch() const;                      // hash: node -> PrefetchReport

 private:
  std::string prefix_;
};

std::string SanitizeName(std::string_view name);

}  // namespace ft::proto

#endif  // FT_PROTO_KEYS_H_
