// ft::worker::CommandRunner: executes the master's commands for this node (docs/redis-schema.md,
// Command) against the local ranks and produces their acknowledgements. A command id is
// executed at most once, also across a worker restart (the daemon persists the stream cursor).
// Mailbox commands complete when the process acknowledges them, in a later Poll(); nothing
// here blocks. Not thread-safe: the daemon loop owns it.
//
// Kinds and the mailbox command each becomes: "message" -> kMessage, "save" -> kSave (a
// just-in-time checkpoint now), "save-at-step" -> kSaveAtStep (a checkpoint at the rank's next
// ft_step_done); "stop" signals the rank; "stacks" takes the rank's native stacks
// (ftworker/stacks/stack_capture.h, eu-stack), acked "done" with one line per thread, unless
// FT_STACKS is 0 ("not_supported"). How long the process's acknowledgement is waited for
// depends on the kind: a message 10 s, a save FT_SAVE_DEADLINE (a save copies the whole state),
// a save at the next step 10 min (the next step may be a long one away). The process's result
// becomes the ack's result (AckResultOfMailbox); its message passes through unchanged (a save's
// carries the step and the digest).
//
// Incarnations: a command acts only on the processes it was written for (Command::incarnations,
// else those started before it was written: CommandStaleness). Any other process of a target
// rank — a relaunch, which a worker replaying its stream after losing the cursor would otherwise
// stop or make save — gets the ack "stale", and the command is logged, not executed.
#ifndef FT_FTWORKER_COMMAND_RUNNER_H_
#define FT_FTWORKER_COMMAND_RUNNER_H_

#include <cstdint>
#include <set>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ftworker/monitor/node_monitor.h"
#include "ftworker/stacks/python_stack.h"
#include "ftworker/stacks/stack_capture.h"
#include "proto/messages.h"

namespace ft::worker {

// Why `command` is not for the process of `rank` that started at `incarnation` (its segment's
// CLOCK_REALTIME ns), or "" when it is: a rank the command names must run the incarnation named;
// a rank it does not name (a writer that did not know its membership, or one before the field)
// must have started before the command was decided (decided_unix_ms, else unix_ms; 0: no
// time, not refused). That comparison is across two hosts' clocks: a process started within
// their skew of the decision may be refused; the master names every rank it knows.
std::string CommandStaleness(const proto::Command& command, int rank, uint64_t incarnation);

// The ack result a mailbox result code becomes: 0 done, kUnsupported not_supported, kNotFound
// nothing_registered (a save with no state registered), kNotReady scheduled (a save-at-step
// accepted for the next step), anything else failed.
proto::AckResult AckResultOfMailbox(int32_t result);

class CommandRunner {
 public:
  // `save_deadline_ms`: how long a "save" waits for the process's acknowledgement.
  // `stack_tool`: what "stacks" runs (FT_STACK_TOOL); "": stacks are off (FT_STACKS=0).
  // `python_stack_dir`: where python/ft's ranks keep their faulthandler file (the node's arena
  // directory, ftworker/stacks/python_stack.h); "": Python frames not asked for.
  CommandRunner(NodeMonitor* monitor, std::string node, int64_t save_deadline_ms = 30000,
                std::string stack_tool = "eu-stack", std::string python_stack_dir = "");

  // Starts `command`; acknowledgements that are ready now are appended to *acks.
  void Execute(const proto::Command& command, int64_t now_unix_ms,
               std::vector<proto::CommandAck>* acks);
  // Acknowledgements of mailbox commands the processes answered since the last call, and of
  // those that waited longer than their kind allows (see above).
  void Poll(int64_t now_unix_ms, std::vector<proto::CommandAck>* acks);

  size_t in_flight() const { return waiting_.size() + stacks_.size(); }

 private:
  struct Waiting {
    proto::Command command;
    int rank;
    uint64_t seq;
    uint64_t incarnation;  // the process the command was posted to
    int64_t since_unix_ms;
    int64_t wait_ms;  // failed when not acknowledged within this
  };

  proto::CommandAck MakeAck(const proto::Command& command, int rank, proto::AckResult result,
                            std::string message, int64_t now_unix_ms) const;
  std::vector<int> Targets(const proto::Command& command) const;
  // Targets() less the ranks whose process the command was not written for (each acked
  // "stale" into *acks).
  std::vector<int> CurrentTargets(const proto::Command& command, int64_t now_unix_ms,
                                  std::vector<proto::CommandAck>* acks) const;

  NodeMonitor* monitor_;
  std::string node_;
  int64_t save_deadline_ms_;
  struct Stacking {
    proto::Command command;
    int rank;
    int pid;
    std::optional<PythonDump> python;  // asked for: the native stack waits for it (kPythonWaitMs)
    int64_t python_asked_ms = 0;
    std::string python_frames;
    std::unique_ptr<StackCapture> capture;  // null while the Python dump is awaited
  };
  void StartStacks(const proto::Command& command, int rank, int64_t now_unix_ms,
                   std::vector<proto::CommandAck>* acks);

  std::string stack_tool_;
  std::string python_stack_dir_;
  std::set<std::string> executed_;
  std::vector<Waiting> waiting_;
  std::vector<Stacking> stacks_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_COMMAND_RUNNER_H_
