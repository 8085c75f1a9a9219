#include "ftworker/command_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/log.h"
#include "shm/save_ack.h"

namespace ft::worker {

namespace {

// A process that does not answer its mailbox within this is reported, not waited on forever:
// it may be the hung rank itself.
constexpr int64_t kMessageAckMs = 10000;
// How long a Python rank's faulthandler is given to write its frames before the native stack
// is taken (the handler runs at once unless the process is stuck in the kernel).
constexpr int64_t kPythonWaitMs = 300;
// A save at the next step boundary waits for that step: as long as the longest step we expect
// (PyTorch's and Megatron's collective timeouts are 10 min; a step cannot take longer).
constexpr int64_t kSaveAtStepAckMs = 10 * 60 * 1000;

}  // namespace

proto::AckResult AckResultOfMailbox(int32_t result) {
  if (result == 0) return proto::AckResult::kDone;
  if (result == static_cast<int32_t>(StatusCode::kUnsupported)) return proto::AckResult::kNotSupported;
  if (result == static_cast<int32_t>(StatusCode::kNotFound)) return proto::AckResult::kNothingRegistered;
  if (result == static_cast<int32_t>(StatusCode::kNotReady)) return proto::AckResult::kScheduled;
  return proto::AckResult::kFailed;
}

std::string CommandStaleness(const proto::Command& command, int rank, uint64_t incarnation) {
  for (const proto::RankIncarnation& named : command.incarnations) {
    if (named.rank != rank) continue;
    if (named.incarnation == incarnation) return "";
    return fmt::format("written for incarnation {} of rank {}; the rank runs incarnation {} now "
                       "(another process{})", named.incarnation, rank, incarnation,
                       incarnation > named.incarnation ? ", started since" : "");
  }
  const int64_t decided = command.decided_unix_ms > 0 ? command.decided_unix_ms : command.unix_ms;
  const uint64_t decided_ns = static_cast<uint64_t>(std::max<int64_t>(decided, 0)) * 1000000;
  if (decided_ns > 0 && incarnation > decided_ns) {
    return fmt::format("decided at {} ms, before rank {}'s process started ({} ms): it was meant "
                       "for a process before it", decided, rank, incarnation / 1000000);
  }
  return "";
}

CommandRunner::CommandRunner(NodeMonitor* monitor, std::string node, int64_t save_deadline_ms,
                             std::string stack_tool, std::string python_stack_dir)
    : monitor_(monitor), node_(std::move(node)), save_deadline_ms_(save_deadline_ms),
      stack_tool_(std::move(stack_tool)), python_stack_dir_(std::move(python_stack_dir)) {}

void CommandRunner::StartStacks(const proto::Command& command, int rank, int64_t now_unix_ms,
                                std::vector<proto::CommandAck>* acks) {
  if (stack_tool_.empty()) {
    acks->push_back(MakeAck(command, rank, proto::AckResult::kNotSupported, "stack collection is off on this node (FT_STACKS=0)",
                            now_unix_ms));
    return;
  }
  int pid = 0;
  for (const proto::Membership& m : monitor_->Memberships()) {
    if (m.rank == rank) pid = m.pid;
  }
  if (pid <= 0) {
    acks->push_back(MakeAck(command, rank, proto::AckResult::kFailed, fmt::format("rank {} has no process on node {}", rank, node_),
                            now_unix_ms));
    return;
  }
  Stacking job{command, rank, pid, std::nullopt, now_unix_ms, {}, nullptr};
  // Python frames first (the handler runs in the process); then the native stack, which
  // ptrace-stops it.
  if (!python_stack_dir_.empty()) job.python = AskPythonDump(python_stack_dir_, pid);
  stacks_.push_back(std::move(job));
}

proto::CommandAck CommandRunner::MakeAck(const proto::Command& command, int rank,
                                         proto::AckResult result, std::string message,
                                         int64_t now_unix_ms) const {
  proto::CommandAck ack;
  ack.id = command.id;
  ack.node = node_;
  ack.rank = rank;
  ack.result = proto::AckResultName(result);
  ack.message = std::move(message);
  ack.unix_ms = now_unix_ms;
  return ack;
}

std::vector<int> CommandRunner::Targets(const proto::Command& command) const {
  std::vector<int> ranks;
  for (int rank : monitor_->Ranks()) {
    if (command.rank < 0 || command.rank == rank) ranks.push_back(rank);
  }
  return ranks;
}

std::vector<int> CommandRunner::CurrentTargets(const proto::Command& command, int64_t now_unix_ms,
                                               std::vector<proto::CommandAck>* acks) const {
  std::vector<int> ranks = Targets(command);
  if (ranks.empty()) return ranks;
  std::map<int, uint64_t> incarnation;
  for (const proto::Membership& m : monitor_->Memberships()) incarnation[m.rank] = m.incarnation;
  std::vector<int> current;
  for (int rank : ranks) {
    auto it = incarnation.find(rank);
    std::string why = it == incarnation.end() ? "" : CommandStaleness(command, rank, it->second);
    if (why.empty()) {
      current.push_back(rank);
      continue;
    }
    FT_LOG(Warn, Worker, "command {} ({}) not executed for rank {}: {}", command.id, command.kind,
           rank, why);
    acks->push_back(MakeAck(command, rank, proto::AckResult::kStale, std::move(why), now_unix_ms));
  }
  return current;
}

void CommandRunner::Execute(const proto::Command& command, int64_t now_unix_ms,
                            std::vector<proto::CommandAck>* acks) {
  if (!executed_.insert(command.id).second) {
    FT_LOG(Debug, Worker, "command {} already executed; ignored", command.id);
    return;
  }
  std::vector<int> ranks = Targets(command);
  const std::optional<proto::CommandKind> kind = proto::ParseCommandKind(command.kind);
  if (ranks.empty() && command.rank < 0 && kind == proto::CommandKind::kStop) {
    // A stop for the whole node after its ranks are gone (a job that finished, or ended on its
    // own before the stop came): done, nothing to do, and said so.
    const size_t gone = monitor_->Memberships().size();
    acks->push_back(MakeAck(command, command.rank, proto::AckResult::kDone,
                            gone > 0 ? fmt::format("nothing to stop: all {} rank{} of node {} "
                                                   "already exited", gone, gone == 1 ? "" : "s", node_)
                                     : fmt::format("nothing to stop: no rank of the job runs on "
                                                   "node {}", node_),
                            now_unix_ms));
    return;
  }
  if (ranks.empty()) {
    acks->push_back(MakeAck(command, command.rank, proto::AckResult::kNoSuchRank,
                            fmt::format("no rank {} on node {}", command.rank, node_), now_unix_ms));
    return;
  }
  ranks = CurrentTargets(command, now_unix_ms, acks);
  if (ranks.empty()) return;  // every target runs another process than the command's: acked stale
  FT_LOG(Info, Worker, "command {} ({}) for {} rank(s)", command.id, command.kind, ranks.size());
  for (int rank : ranks) {
    if (kind == proto::CommandKind::kStop) {
      Status s = monitor_->StopRank(rank, command.grace_s);
      acks->push_back(s.ok() ? MakeAck(command, rank, proto::AckResult::kDone,
                                       fmt::format("SIGTERM sent; SIGKILL after {} s if still alive",
                                                   command.grace_s),
                                       now_unix_ms)
                             : MakeAck(command, rank, proto::AckResult::kFailed, std::string(s.message()),
                                       now_unix_ms));
      continue;
    }
    if (kind == proto::CommandKind::kStacks) {
      StartStacks(command, rank, now_unix_ms, acks);
      continue;
    }
    MailboxCommand type;
    int64_t wait_ms = kMessageAckMs;
    if (kind == proto::CommandKind::kMessage) {
      type = MailboxCommand::kMessage;
    } else if (kind == proto::CommandKind::kSave) {
      type = MailboxCommand::kSave;
      wait_ms = save_deadline_ms_;
    } else if (kind == proto::CommandKind::kSaveAtStep) {
      type = MailboxCommand::kSaveAtStep;
      wait_ms = kSaveAtStepAckMs;
    } else {
      acks->push_back(MakeAck(command, rank, proto::AckResult::kNotSupported,
                              fmt::format("unknown command kind '{}'", command.kind), now_unix_ms));
      continue;
    }
    uint64_t seq = 0;
    const uint64_t incarnation = monitor_->LiveIncarnation(rank);
    Status s = monitor_->PostCommand(rank, type, command.text, &seq);
    if (!s.ok()) {
      acks->push_back(MakeAck(command, rank, proto::AckResult::kFailed, std::string(s.message()), now_unix_ms));
      continue;
    }
    waiting_.push_back(Waiting{command, rank, seq, incarnation, now_unix_ms, wait_ms});
  }
}

void CommandRunner::Poll(int64_t now_unix_ms, std::vector<proto::CommandAck>* acks) {
  for (size_t i = 0; i < stacks_.size();) {
    Stacking& job = stacks_[i];
    const uint64_t now_ns = static_cast<uint64_t>(now_unix_ms) * 1000000;
    std::string summary;
    Status s;
    if (job.capture == nullptr) {
      if (job.python && now_unix_ms - job.python_asked_ms < kPythonWaitMs) {
        ++i;
        continue;
      }
      if (job.python) job.python_frames = SummarizePythonDump(ReadPythonDump(*job.python));
      s = StackCapture::Start(stack_tool_, job.pid, now_ns, &job.capture);
      if (!s.ok()) job.capture.reset();
    }
    if (job.capture != nullptr && !job.capture->Poll(now_ns, &summary, &s)) {
      ++i;
      continue;
    }
    // The Python frames stand even when the native stack could not be taken.
    const bool any = s.ok() || !job.python_frames.empty();
    std::string text = job.python_frames + (s.ok() ? summary : fmt::format("native: {}\n", s.message()));
    acks->push_back(MakeAck(job.command, job.rank, any ? proto::AckResult::kDone : proto::AckResult::kFailed,
                            any ? std::move(text) : std::string(s.message()), now_unix_ms));
    stacks_.erase(stacks_.begin() + static_cast<long>(i));
  }
  for (size_t i = 0; i < waiting_.size();) {
    Waiting& w = waiting_[i];
    auto ack = monitor_->PollAck(w.rank, w.seq);
    if (ack) {
      proto::CommandAck done = MakeAck(w.command, w.rank, AckResultOfMailbox(ack->result), ack->message, now_unix_ms);
      // The master takes the saved step and digest from the typed copy, not from the prose.
      const bool save = proto::Is(w.command, proto::CommandKind::kSave) ||
                        proto::Is(w.command, proto::CommandKind::kSaveAtStep);
      if (ack->result == 0 && save) done.saved = shm::ParseSaveAck(ack->message);
      acks->push_back(std::move(done));
    } else if (monitor_->Ended(w.rank, w.incarnation)) {
      // Its process ended after the command was posted (a teardown, a crash): no answer will
      // come, and the master's action need not wait out the deadline for it.
      acks->push_back(MakeAck(w.command, w.rank, proto::AckResult::kFailed,
                              fmt::format("rank {} ended before it acknowledged the {}", w.rank, w.command.kind),
                              now_unix_ms));
    } else if (now_unix_ms - w.since_unix_ms > w.wait_ms) {
      acks->push_back(MakeAck(w.command, w.rank, proto::AckResult::kFailed,
                              fmt::format("rank {} did not acknowledge the {} within {} s (hung or "
                                          "gone)", w.rank, w.command.kind, w.wait_ms / 1000.0),
                              now_unix_ms));
    } else {
      ++i;
      continue;
    }
    waiting_.erase(waiting_.begin() + static_cast<long>(i));
  }
}

}  // namespace ft::worker
