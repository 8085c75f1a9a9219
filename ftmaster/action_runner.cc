#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/core/save_outcome.h"
#include "proto/codec.h"

namespace ft::master {
namespace {

constexpr const char* kCommandsCap = "1000";

}  // namespace

// ---- the master loop: carrying out a decision -----------------------------------------------

std::string MasterLoop::LastAckId() {
  redis::Reply reply;
  if (!store_->Run({"XREVRANGE", keys_.Acks(), "+", "-", "COUNT", "1"}, &reply).ok()) {
    return "";
  }
  std::vector<StreamEntry> entries;
  ParseStream(reply, &entries);
  return entries.empty() ? "0-0" : entries.front().id;
}

void MasterLoop::LoadPending() {
  pending_acks_.clear();
  const Action& a = *action_;
  if (a.phase == "save") {
    for (const SaveTarget& t : a.save) {
      if (!t.node.empty()) pending_acks_.insert(fmt::format("{}-save-{}", a.incident, t.rank));
    }
  } else if (a.phase == "stop") {
    for (const std::string& node : a.nodes) pending_acks_.insert(fmt::format("{}-stop-{}", a.incident, node));
  }
  ack_cursor_ = a.acks_from;
  pending_loaded_ = true;
}

void MasterLoop::RunAction(Clock::time_point now, int64_t unix_ms) {
  Action& a = *action_;
  if (a.phase == "save" && !a.sent) {
    const std::string from = LastAckId();
    if (from.empty()) return;
    Action next = a;
    next.sent = true;
    next.acks_from = from;
    next.deadline_unix_ms = unix_ms + ToMs(options_.config.save_deadline);
    std::vector<redis::Argv> writes;
    int asked = 0;
    for (const SaveTarget& t : a.save) {
      if (t.node.empty()) {
        FT_LOG(Warn, Master, "rank {} should save but no node is known for it (no membership); "
               "its shard will be missing from the checkpoint", t.rank);
        continue;
      }
      proto::Command command;
      command.id = fmt::format("{}-save-{}", a.incident, t.rank);
      command.kind = "save";
      command.rank = t.rank;
      command.text = a.incident;
      command.unix_ms = unix_ms;
      writes.push_back({"XADD", keys_.Commands(t.node), "MAXLEN", "~", kCommandsCap, "*", "kind",
                        "save", "rank", std::to_string(t.rank), "json", proto::Encode(command)});
      ++asked;
    }
    writes.push_back({"HSET", keys_.MasterState(), "action", proto::Encode(next), "job_state",
                      "stopping"});
    if (!writer_.Run(writes)) return;
    save_results_.clear();
    save_messages_.clear();
    copies_deadline_.reset();
    stats_.commands += static_cast<uint64_t>(asked);
    a = std::move(next);
    LoadPending();
    FT_LOG(Info, Master, "incident {}: asked {} rank{} to save; waiting up to {} ms for their "
           "acknowledgements", a.incident, asked, asked == 1 ? "" : "s",
           ToMs(options_.config.save_deadline));
  }
  if (a.phase == "save") {
    if (!copies_deadline_) {
      if (!AcksSettled(now, unix_ms, a.deadline_unix_ms)) return;
      if (!pending_acks_.empty()) {
        FT_LOG(Warn, Master, "incident {}: {} save acknowledgement{} missing at the deadline "
               "(FT_SAVE_DEADLINE); the checkpoint may be incomplete",
               a.incident, pending_acks_.size(), pending_acks_.size() == 1 ? "" : "s");
      } else {
        FT_LOG(Info, Master, "incident {}: every save target answered; verifying the copies, then "
               "stopping the job", a.incident);
      }
    }
    // The copies of the ranks that answered done, compared across replicas (bounded by
    // copy_wait), and the restore plan published before the job is stopped.
    const StepJudgement* judged = nullptr;
    if (!SaveCopiesSettled(now, unix_ms, &judged)) return;
    if (!RecordSaveOutcome(a, judged)) return;
    copies_deadline_.reset();
    a.phase = "stop";
    a.sent = false;
    pending_loaded_ = false;
  }
  if (a.phase == "stop" && !a.sent) {
    redis::Reply members;
    if (!store_->Run({"SMEMBERS", keys_.Workers()}, &members).ok()) return;
    const std::string from = LastAckId();
    if (from.empty()) return;
    Action next = a;
    next.sent = true;
    next.acks_from = from;
    next.deadline_unix_ms =
        unix_ms + static_cast<int64_t>(options_.stop_grace_s * 1000) + 5000;
    next.nodes.clear();
    for (const redis::Reply& m : members.elements()) {
      if (m.is_string() && !m.str().empty()) next.nodes.push_back(m.str());
    }
    std::sort(next.nodes.begin(), next.nodes.end());
    std::vector<redis::Argv> writes;
    for (const std::string& node : next.nodes) {
      proto::Command command;
      command.id = fmt::format("{}-stop-{}", a.incident, node);
      command.kind = "stop";
      command.rank = -1;
      command.grace_s = options_.stop_grace_s;
      command.text = fmt::format("ft: stopping the job after incident {}", a.incident);
      command.unix_ms = unix_ms;
      writes.push_back({"XADD", keys_.Commands(node), "MAXLEN", "~", kCommandsCap, "*", "kind",
                        "stop", "rank", "-1", "json", proto::Encode(command)});
    }
    writes.push_back({"HSET", keys_.MasterState(), "action", proto::Encode(next), "job_state",
                      "stopping"});
    if (!writer_.Run(writes)) return;
    stats_.commands += next.nodes.size();
    a = std::move(next);
    LoadPending();
    FT_LOG(Info, Master, "incident {}: stop sent to {} node{}", a.incident, a.nodes.size(),
           a.nodes.size() == 1 ? "" : "s");
  }
  if (a.phase == "stop") {
    if (!AcksSettled(now, unix_ms, a.deadline_unix_ms)) return;
    if (!pending_acks_.empty()) {
      FT_LOG(Warn, Master, "incident {}: {} node{} did not acknowledge the stop (worker gone?); "
             "check them by hand", a.incident, pending_acks_.size(),
             pending_acks_.size() == 1 ? "" : "s");
    }
    Action done = a;
    done.phase = "done";
    if (!writer_.Run({{"HSET", keys_.MasterState(), "action", proto::Encode(done), "job_state",
                     "stopped"}})) {
      return;
    }
    a = std::move(done);
    job_state_ = "stopped";
    FT_LOG(Info, Master, "job {} stopped (incident {})", options_.job, a.incident);
  }
}

bool MasterLoop::RecordSaveOutcome(const Action& a, const StepJudgement* judged) {
  const Topology& topology = CurrentTopology();
  std::function<ShardId(int)> shard_of;
  if (topology.known()) {
    const bool sharded = options_.config.sharded_optimizer;
    shard_of = [&topology, sharded](int rank) {
      return rank >= 0 && rank < topology.world_size() ? ShardOfRank(rank, topology, sharded) : ShardId{rank, -1, -1};
    };
  }
  SaveOutcome outcome = CountSaveOutcome(a.save, save_results_, shard_of);
  if (judged != nullptr) AddVerification(*judged, &outcome);
  // `checkpoint`: the last save; `checkpoint:<incident>`: each incident's, for `ftmaster incidents`.
  const std::string value = EncodeSaveOutcome(a.incident, outcome);
  if (!writer_.Run({{"HSET", keys_.MasterState(), "checkpoint", value, "checkpoint:" + a.incident, value}})) {
    return false;
  }
  std::string text = fmt::format("incident {}: {}", a.incident, DescribeSaveOutcome(outcome));
  if (outcome.saved < outcome.shards) {
    FT_LOG(Warn, Master, "{}", text);
  } else {
    FT_LOG(Info, Master, "{}", text);
  }
  if (options_.out != nullptr) {
    std::fprintf(options_.out, "%s\n", text.c_str());
    std::fflush(options_.out);
  }
  return true;
}

bool MasterLoop::AcksSettled(Clock::time_point now, int64_t unix_ms, int64_t deadline_unix_ms) {
  if (!pending_loaded_) LoadPending();
  if (now >= next_acks_) {
    ReadAcks();
    next_acks_ = now + kAckPoll;
  }
  return pending_acks_.empty() || unix_ms >= deadline_unix_ms;
}

void MasterLoop::ReadAcks() {
  for (int batch = 0; batch < kMaxEventBatchesPerTick && !pending_acks_.empty(); ++batch) {
    redis::Reply reply;
    const std::string start = ack_cursor_.empty() ? "-" : "(" + ack_cursor_;
    if (!store_->Run({"XRANGE", keys_.Acks(), start, "+", "COUNT", "1000"}, &reply).ok()) {
      return;
    }
    std::vector<StreamEntry> entries;
    ParseStream(reply, &entries);
    for (const StreamEntry& e : entries) {
      ack_cursor_ = e.id;
      const std::string* id = e.Get("id");
      if (id == nullptr || pending_acks_.count(*id) == 0) continue;
      proto::CommandAck ack;
      const std::string* json = e.Get("json");
      Status s = json ? proto::Decode(*json, &ack) : Status::Corrupt("no json field");
      if (!s.ok()) {
        bad_.Report(fmt::format("ack {}", e.id), json ? *json : std::string_view(), s);
        const std::string* result = e.Get("result");
        ack.id = *id;
        ack.result = result ? *result : "?";
      }
      pending_acks_.erase(*id);
      if (action_ && *id == fmt::format("{}-save-{}", action_->incident, ack.rank)) {
        save_results_[ack.rank] = ack.result;
        save_messages_[ack.rank] = ack.message;
      }
      if (ack.result == "not_supported") {
        FT_LOG(Info, Master, "{}: node {} rank {} answered not_supported ({}); counted as an "
               "answer", *id, ack.node, ack.rank, ack.message);
      } else {
        FT_LOG(Info, Master, "{}: node {} rank {} answered {}{}{}", *id, ack.node, ack.rank,
               ack.result, ack.message.empty() ? "" : ": ", ack.message);
      }
    }
    if (entries.size() < 1000) return;
  }
}

}  // namespace ft::master
