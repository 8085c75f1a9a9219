// The read-only subcommands of ftmaster: what a person (text tables) or a script (--json)
// asks about a job. Each reads Redis through `client` and appends its output to *out; the
// caller prints it. Garbled values are shown as such (status) or reported on stderr through
// the log and skipped; they never stop the command.
//   status     one row per rank: rank, node, state, step, step time, last event; the job's
//              state, leader and topology (given, or inferred and said so). --json: one object.
//   incidents  the incident stream, oldest first. --json: one Incident per line.
//   timeouts   the published timeout table. --json: the TimeoutTable.
//   evicted    the eviction set. --json: an array of node names.
#ifndef FT_FTMASTER_CLI_H_
#define FT_FTMASTER_CLI_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "redis/client.h"

namespace ft::master {

struct CliOptions {
  std::string job;
  bool json = false;
  std::string topology;  // "dp=2,tp=4,pp=2"; empty: inferred from membership
  std::string order;
  int64_t now_unix_ms = 0;
};

Status StatusCommand(redis::Client& client, const CliOptions& options, std::string* out);
Status IncidentsCommand(redis::Client& client, const CliOptions& options, std::string* out);
Status TimeoutsCommand(redis::Client& client, const CliOptions& options, std::string* out);
Status EvictedCommand(redis::Client& client, const CliOptions& options, std::string* out);

}  // namespace ft::master

#endif  // FT_FTMASTER_CLI_H_
