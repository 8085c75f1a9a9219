// The read-only subcommands of ftmaster: what a person (text tables) or a script (--json)
// asks about a job. Each reads Redis through `client` and appends its output to *out; the
// caller prints it. Garbled values are shown as such (status) or reported on stderr through
// the log and skipped; they never stop the command.
//   status     one row per rank: rank, node, state, step, step time, last event; the job's
//              state, leader and topology (given, or inferred and said so). --json: one object.
//   incidents  the incident stream, oldest first. --json: one Incident per line.
//   timeouts   the published timeout table. --json: the TimeoutTable.
//   evicted    the eviction set. --json: an array of node names.
//   checkpoints the checkpoint steps, newest first: state, shards verified/total, copies, tiers
//              holding copies (counts), sdc ranks, and the step the restore plan names.
//              With reports in ft:{J}:prefetch: what each replacement node's worker
//              prefetched (state, ranks ready, bytes, sources, failures; a report of another
//              step than the plan's is stale). --json: one object {job, plan: {version, step},
//              steps: [...], prefetch: [PrefetchReport...]}.
//   save       asks every worker of the job (ft:{J}:workers) for a periodic save at the next
//              step boundary (a "save-at-step" command, rank -1) and prints the request's id.
//              --json: {"id": ..., "nodes": [...]}. The one command here that writes.
// An incident whose save ran shows its outcome (incidents: "checkpoint: saved S of N shards,
// verified V, step T"; --json: a "checkpoint" object in the incident's line), read from
// `checkpoint:<incident id>` in the master hash.
#ifndef FT_FTMASTER_CLI_CLI_H_
#define FT_FTMASTER_CLI_CLI_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "redis/store.h"

namespace ft::master {

struct CliOptions {
  std::string job;
  bool json = false;
  std::string topology;  // "dp=2,tp=4,pp=2"; empty: inferred from membership
  std::string order;
  int64_t now_unix_ms = 0;
};

Status StatusCommand(redis::Commands& client, const CliOptions& options, std::string* out);
Status IncidentsCommand(redis::Commands& client, const CliOptions& options, std::string* out);
Status TimeoutsCommand(redis::Commands& client, const CliOptions& options, std::string* out);
Status EvictedCommand(redis::Commands& client, const CliOptions& options, std::string* out);
Status CheckpointsCommand(redis::Commands& client, const CliOptions& options, std::string* out);
Status SaveCommand(redis::Commands& client, const CliOptions& options, std::string* out);
// `ftmaster stacks --rank R`: asks the rank's worker for its stacks (a `stacks` command) and
// waits up to 10 s for the answer.
Status StacksCommand(redis::Commands& client, const CliOptions& options, int rank, std::string* out);
// A --rank value: a decimal rank >= 0.
bool ParseRankFlag(const std::string& text, int* rank);

}  // namespace ft::master

#endif  // FT_FTMASTER_CLI_CLI_H_
