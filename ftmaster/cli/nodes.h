// `ftmaster nodes`: the nodes across jobs (docs/nodes.md). Needs no job: it reads the keys
// outside every job's slot (proto/node_history.h) through `client`.
//   nodes                  every node of the index ft:nodes (and every cordoned one), worst
//                          first by its lemon score (core/lemon_score.h): score, counts by kind,
//                          distinct jobs, its last record, its cordon. --json: one object with a
//                          `nodes` list, each with its records newest first.
//   nodes --lemons         only the lemons (score >= kLemonThreshold), worst first
//   nodes --cordon N --reason TEXT [--for 24h]
//                          cordons N for every job: ft:cordon (each job's master adds it to its
//                          eviction list within CordonRound::kPeriod), a `cordon` record in its
//                          history; then runs FT_CORDON_COMMAND when one is configured
//   nodes --uncordon N     lifts it (each job's master takes it back out of its eviction list)
//   nodes --cordon-commands slurm|k8s
//                          for each cordon in force the exact line that drains the node in the
//                          scheduler: `scontrol update NodeName=N State=DRAIN Reason='R'` or
//                          `kubectl taint nodes N ft.io/lemon=V:NoSchedule --overwrite`
// Garbled history entries and cordons are skipped and counted (stderr through the log, and
// `garbled` in --json); they never stop the command.
#ifndef FT_FTMASTER_CLI_NODES_H_
#define FT_FTMASTER_CLI_NODES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "redis/store.h"

namespace ft::master {

struct NodesOptions {
  bool json = false;
  bool lemons = false;
  std::string cordon;           // the node to cordon
  std::string uncordon;         // the node whose cordon to lift
  std::string reason;           // --reason
  int64_t for_ms = 0;           // --for: how long the cordon lasts (0: until lifted)
  std::string cordon_commands;  // --cordon-commands: "slurm" or "k8s"
  size_t limit = 10000;         // nodes listed at most (the index's newest)
  int64_t now_unix_ms = 0;
  int64_t half_life_ms = int64_t{7} * 86'400'000;    // FT_LEMON_HALF_LIFE
  int64_t history_len = 1000;                         // FT_NODE_HISTORY_LEN
  int64_t history_ttl_ms = int64_t{30} * 86'400'000;  // FT_NODE_HISTORY_TTL
  int64_t index_nodes = 100000;                       // FT_NODE_HISTORY_NODES
  std::string cordon_command;   // FT_CORDON_COMMAND ("": none)
  std::string by;               // who cordons (user@host)
};

// The most cordons ft:cordon holds: a cordon past it is refused (lift some first).
inline constexpr size_t kMaxCordons = 10000;
// The longest reason a cordon takes.
inline constexpr size_t kMaxCordonReasonBytes = 256;
// How long FT_CORDON_COMMAND may run before it is killed.
inline constexpr int64_t kCordonCommandTimeoutMs = 60'000;

// The flags' combination: InvalidArgument saying what is wrong.
Status CheckNodesOptions(const NodesOptions& o);
// The options from the settings (FT_LEMON_HALF_LIFE, FT_NODE_HISTORY_*, FT_CORDON_COMMAND),
// the flags' text (--for a duration with units, --limit a count; empty: not given) and who runs
// the command (user@host); InvalidArgument naming a bad flag.
Status NodesOptionsFromFlags(const Config& config, bool lemons, const std::string& cordon, const std::string& uncordon,
                             const std::string& reason, const std::string& for_text,
                             const std::string& cordon_commands, const std::string& limit, NodesOptions* out);
Status NodesCommand(redis::Commands& client, const NodesOptions& o, std::string* out);

// A node name as ft writes it in keys: 1-253 bytes of [A-Za-z0-9_.-].
bool ValidNodeName(std::string_view node);
// The reason as stored: control characters (newlines included) become spaces, outer spaces go.
std::string CleanReason(std::string_view reason);
// `text` as one word for a POSIX shell: in single quotes, a ' as '\''.
std::string ShellQuote(std::string_view text);
// The lines --cordon-commands prints for one node.
std::string SlurmDrainLine(std::string_view node, std::string_view reason);
std::string KubectlTaintLine(std::string_view node, std::string_view reason);
// A Kubernetes taint value from a reason: [A-Za-z0-9] at both ends, [-A-Za-z0-9_.] between, at
// most 63 characters ("cordoned" when nothing is left).
std::string TaintValue(std::string_view reason);

// Runs FT_CORDON_COMMAND: `command` split into words at spaces (no shell, no quotes), then
// `action` (cordon or uncordon), `node` and `reason` as arguments; FT_CORDON_ACTION,
// FT_CORDON_NODE, FT_CORDON_REASON and FT_CORDON_UNTIL_UNIX_MS added to the environment. Waits
// up to `timeout_ms` (then kills it). OK when it exited 0; otherwise an error saying how it
// ended.
Status RunCordonCommand(const std::string& command, std::string_view action, std::string_view node,
                        std::string_view reason, int64_t until_unix_ms, int64_t timeout_ms);

}  // namespace ft::master

#endif  // FT_FTMASTER_CLI_NODES_H_
