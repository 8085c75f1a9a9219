// ft::worker::CommandRunner: executes the master's commands for this node (docs/redis-schema.md,
// Command) against the local ranks and produces their acknowledgements. A command id is
// executed at most once, also across a worker restart (the daemon persists the stream cursor).
// Mailbox commands complete when the process acknowledges them, in a later Poll(); nothing
// here blocks. Not thread-safe: the daemon loop owns it.
#ifndef FT_FTWORKER_COMMAND_RUNNER_H_
#define FT_FTWORKER_COMMAND_RUNNER_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ftworker/node_monitor.h"
#include "proto/messages.h"

namespace ft::worker {

class CommandRunner {
 public:
  CommandRunner(NodeMonitor* monitor, std::string node);

  // Starts `command`; acknowledgements that are ready now are appended to *acks.
  void Execute(const proto::Command& command, int64_t now_unix_ms,
               std::vector<proto::CommandAck>* acks);
  // Acknowledgements of mailbox commands the processes answered since the last call, and of
  // those that waited longer than `ack_timeout_ms`.
  void Poll(int64_t now_unix_ms, std::vector<proto::CommandAck>* acks);

  size_t in_flight() const { return waiting_.size(); }

 private:
  struct Waiting {
    proto::Command command;
    int rank;
    uint64_t seq;
    int64_t since_unix_ms;
  };

  proto::CommandAck MakeAck(const proto::Command& command, int rank, std::string result,
                            std::string message, int64_t now_unix_ms) const;
  std::vector<int> Targets(const proto::Command& command) const;

  NodeMonitor* monitor_;
  std::string node_;
  std::set<std::string> executed_;
  std::vector<Waiting> waiting_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_COMMAND_RUNNER_H_
