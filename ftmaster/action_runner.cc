#include "ftmaster/action_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/core/save_outcome.h"
#include "proto/codec.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::master {

// ---- a phase's commands, as values ------------------------------------------------------

DecidedFor::DecidedFor(std::span<const proto::Membership> members, int64_t decided_unix_ms, bool at_decision) {
  const uint64_t decided_ns = static_cast<uint64_t>(std::max<int64_t>(decided_unix_ms, 0)) * 1000000;
  for (const proto::Membership& m : members) {
    if (m.rank < 0 || m.incarnation == 0) continue;
    if (!at_decision && decided_ns > 0 && m.incarnation > decided_ns) continue;  // started after the decision
    by_node_[m.node].push_back({m.rank, m.incarnation});
    by_rank_[m.rank] = m.incarnation;
  }
}

std::vector<proto::RankIncarnation> DecidedFor::OfNode(const std::string& node) const {
  auto it = by_node_.find(node);
  return it == by_node_.end() ? std::vector<proto::RankIncarnation>{} : it->second;
}

std::vector<proto::RankIncarnation> DecidedFor::OfRank(int rank) const {
  auto it = by_rank_.find(rank);
  if (it == by_rank_.end()) return {};
  return {proto::RankIncarnation{rank, it->second}};
}

namespace {

// A batch for `a` sent now: the action marked sent, its acks read from `acks_from`, due at
// `deadline_unix_ms`.
CommandBatch SentBatch(const Action& a, const std::string& acks_from, int64_t deadline_unix_ms) {
  CommandBatch b;
  b.next = a;
  b.next.sent = true;
  b.next.acks_from = acks_from;
  b.next.deadline_unix_ms = deadline_unix_ms;
  return b;
}

}  // namespace

CommandBatch SaveBatch(const Action& a, const std::string& acks_from, int64_t unix_ms,
                       const proto::Keys& keys, int64_t save_deadline_ms,
                       std::span<const proto::Membership> members, bool at_decision) {
  CommandBatch b = SentBatch(a, acks_from, unix_ms + save_deadline_ms);
  const DecidedFor decided_for(members, a.decided_unix_ms, at_decision);
  for (const SaveTarget& t : a.save) {
    if (t.node.empty()) {
      b.nodeless.push_back(t.rank);
      continue;
    }
    proto::Command command;
    command.id = fmt::format("{}-save-{}", a.incident, t.rank);
    command.kind = proto::CommandKindName(proto::CommandKind::kSave);
    command.rank = t.rank;
    command.text = a.incident;
    command.unix_ms = unix_ms;
    command.decided_unix_ms = a.decided_unix_ms;
    command.incarnations = decided_for.OfRank(t.rank);
    b.writes.push_back(schema::PostCommand(keys, t.node, command));
    ++b.commands;
  }
  b.writes.push_back(schema::master_hash::SetAction(keys, b.next, proto::JobState::kStopping));
  return b;
}

CommandBatch StopBatch(const Action& a, const std::string& acks_from, std::vector<std::string> nodes,
                       int64_t unix_ms, const proto::Keys& keys, double grace_s,
                       std::span<const proto::Membership> members, bool at_decision) {
  CommandBatch b = SentBatch(a, acks_from, unix_ms + static_cast<int64_t>(grace_s * 1000) + 5000);
  const DecidedFor decided_for(members, a.decided_unix_ms, at_decision);
  // The nodes of the processes it was decided for, whatever `nodes` (the workers set) lacks:
  // a stop that reaches no node leaves a hung job hung (a seeded campaign schedule, Redis
  // restarted empty at a frozen rank: the stop went out before either worker's heartbeat had
  // added it to the set again, and the job hung until its launcher's timeout).
  for (const proto::Membership& m : members) nodes.push_back(m.node);
  std::erase_if(nodes, [](const std::string& node) { return node.empty(); });
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  b.next.nodes = std::move(nodes);
  for (const std::string& node : b.next.nodes) {
    proto::Command command;
    command.id = fmt::format("{}-stop-{}", a.incident, node);
    command.kind = proto::CommandKindName(proto::CommandKind::kStop);
    command.rank = -1;
    command.grace_s = grace_s;
    command.text = fmt::format("ft: stopping the job after incident {}", a.incident);
    command.unix_ms = unix_ms;
    command.decided_unix_ms = a.decided_unix_ms;
    command.incarnations = decided_for.OfNode(node);
    b.writes.push_back(schema::PostCommand(keys, node, command));
  }
  b.writes.push_back(schema::master_hash::SetAction(keys, b.next, proto::JobState::kStopping));
  b.commands = b.next.nodes.size();
  return b;
}

// ---- the runner -----------------------------------------------------------------------------

void ActionRunner::NewTerm(Clock::time_point now) {
  action_.reset();
  decided_members_.reset();
  pending_acks_.clear();
  copies_deadline_.reset();
  pending_loaded_ = false;
  next_acks_ = now;
}

void ActionRunner::LoadTerm(const MasterHash& state) {
  auto it = state.find(schema::master_hash::kAction);
  if (it == state.end()) return;
  Action a;
  Status s = proto::Decode(it->second, &a);
  if (!s.ok()) {
    ctx_->bad.Report("master action", it->second, s);
    return;
  }
  if (a.phase != proto::ActionPhase::kDone) {
    FT_LOG(Info, Master, "resuming the {} of incident {} (phase {}{})", proto::DecisionKindName(a.decision),
           a.incident, proto::ActionPhaseName(a.phase), a.sent ? ", commands sent" : "");
  }
  action_ = std::move(a);
}

void ActionRunner::Start(Action action, std::vector<proto::Membership> decided_for) {
  action_ = std::move(action);
  // With the ranks the membership holds now and did not when the window opened (Redis had
  // lost them; their workers wrote them again while it waited, window_round.h): by the clocks
  // below, the processes of the run that failed.
  std::set<int> known;
  for (const proto::Membership& m : decided_for) known.insert(m.rank);
  for (const proto::Membership& m : SlimMembers(membership_->values())) {
    if (!known.contains(m.rank)) decided_for.push_back(m);
  }
  // Never a process that started after the action's time (its window's first event): a
  // relaunch of the run that failed, however late the master read the event (Redis restored
  // from a snapshot, a takeover's backlog: campaign seed 1197). None left: the action reaches
  // no process (its commands name none, and the workers refuse the newer ones).
  std::erase_if(decided_for, [&](const proto::Membership& m) {
    return m.incarnation > 0 && static_cast<int64_t>(m.incarnation / 1000000) > action_->decided_unix_ms;
  });
  decided_members_ = std::move(decided_for);
  pending_loaded_ = false;
}



bool ActionRunner::StartedAfterDecision(const proto::Membership& m) const {
  if (!action_) return true;
  // As the workers judge the commands (CommandStaleness): a rank the action named is another
  // process when its incarnation differs; a rank it did not name (the master's view lacked it:
  // Redis had just lost the membership and that node's worker had not written it again) by
  // the clocks. Not "unknown, so new": a seeded campaign schedule took a frozen rank's peer on
  // the other node for a relaunch and watched the job again while it was being stopped.
  if (decided_members_) {
    for (const proto::Membership& d : *decided_members_) {
      if (d.rank == m.rank) return d.incarnation != m.incarnation;
    }
  }
  return static_cast<int64_t>(m.incarnation / 1000000) > action_->decided_unix_ms;
}

void ActionRunner::LoadStored() {
  redis::Reply stored;
  if (ctx_->store->Run(schema::master_hash::Get(ctx_->keys, schema::master_hash::kAction), &stored).ok() &&
      stored.is_string()) {
    Action a;
    if (proto::Decode(stored.str(), &a).ok()) action_ = std::move(a);
    decided_members_.reset();
    pending_loaded_ = false;
  }
}

void ActionRunner::Drop() {
  action_.reset();
  decided_members_.reset();
  pending_acks_.clear();
  pending_loaded_ = false;
}

void ActionRunner::Run(Clock::time_point now, int64_t unix_ms) {
  Action& a = *action_;
  if (a.phase == proto::ActionPhase::kSave && !a.sent) {
    const std::string from = LastAckId();
    if (from.empty()) return;
    CommandBatch b = SaveBatch(a, from, unix_ms, ctx_->keys, ToMs(ctx_->options.config.save_deadline),
                               decided_members_ ? *decided_members_ : membership_->values(),
                               decided_members_.has_value());
    for (int rank : b.nodeless) {
      FT_LOG(Warn, Master, "rank {} should save but no node is known for it (no membership); "
             "its shard will be missing from the checkpoint", rank);
    }
    if (!ctx_->writer.Run(b.writes)) return;
    save_results_.clear();
    save_copies_.clear();
    copies_deadline_.reset();
    ctx_->stats.commands += b.commands;
    a = std::move(b.next);
    LoadPending();
    FT_LOG(Info, Master, "incident {}: asked {} rank{} to save; waiting up to {} ms for their "
           "acknowledgements", a.incident, b.commands, b.commands == 1 ? "" : "s",
           ToMs(ctx_->options.config.save_deadline));
  }
  if (a.phase == proto::ActionPhase::kSave) {
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
    a.phase = proto::ActionPhase::kStop;
    a.sent = false;
    pending_loaded_ = false;
  }
  if (a.phase == proto::ActionPhase::kStop && !a.sent) {
    redis::Reply members;
    if (!ctx_->store->Run(schema::GetWorkers(ctx_->keys), &members).ok()) return;
    const std::string from = LastAckId();
    if (from.empty()) return;
    const std::set<std::string> workers = schema::DecodeNodes(members);
    std::vector<std::string> nodes(workers.begin(), workers.end());
    CommandBatch b = StopBatch(a, from, std::move(nodes), unix_ms, ctx_->keys, ctx_->options.stop_grace_s,
                               decided_members_ ? *decided_members_ : membership_->values(),
                               decided_members_.has_value());
    if (!ctx_->writer.Run(b.writes)) return;
    ctx_->stats.commands += b.commands;
    a = std::move(b.next);
    LoadPending();
    FT_LOG(Info, Master, "incident {}: stop sent to {} node{}", a.incident, a.nodes.size(),
           a.nodes.size() == 1 ? "" : "s");
  }
  if (a.phase == proto::ActionPhase::kStop) {
    if (!AcksSettled(now, unix_ms, a.deadline_unix_ms)) return;
    if (!pending_acks_.empty()) {
      FT_LOG(Warn, Master, "incident {}: {} node{} did not acknowledge the stop (worker gone?); "
             "check them by hand", a.incident, pending_acks_.size(),
             pending_acks_.size() == 1 ? "" : "s");
    }
    Action done = a;
    done.phase = proto::ActionPhase::kDone;
    if (!ctx_->writer.Run({schema::master_hash::SetAction(ctx_->keys, done, proto::JobState::kStopped)})) {
      return;
    }
    a = std::move(done);
    ctx_->job_state = proto::JobState::kStopped;
    FT_LOG(Info, Master, "job {} stopped (incident {})", ctx_->options.job, a.incident);
  }
}

std::string ActionRunner::LastAckId() {
  schema::StreamRead<proto::CommandAck> newest;
  if (!schema::ReadStream(*ctx_->store, schema::Newest(ctx_->keys.Acks(), 1), &newest).ok()) return "";
  return newest.entries.empty() ? "0-0" : newest.entries.front().id;
}

void ActionRunner::LoadPending() {
  pending_acks_.clear();
  const Action& a = *action_;
  if (a.phase == proto::ActionPhase::kSave) {
    for (const SaveTarget& t : a.save) {
      if (!t.node.empty()) pending_acks_.insert(fmt::format("{}-save-{}", a.incident, t.rank));
    }
  } else if (a.phase == proto::ActionPhase::kStop) {
    for (const std::string& node : a.nodes) pending_acks_.insert(fmt::format("{}-stop-{}", a.incident, node));
  }
  ack_cursor_ = a.acks_from;
  pending_loaded_ = true;
}

bool ActionRunner::SaveCopiesSettled(Clock::time_point now, int64_t unix_ms, const StepJudgement** judged) {
  *judged = nullptr;
  std::vector<int> done;
  std::map<int64_t, int> steps;  // step -> ranks that said they saved it
  for (const auto& [rank, result] : save_results_) {
    if (!proto::Is(result, proto::AckResult::kDone)) continue;
    auto m = save_copies_.find(rank);
    const proto::SavedCopy* copy = m != save_copies_.end() && m->second ? &*m->second : nullptr;
    // A torn copy is never reported as the rank's copy (its arena keeps the whole one): none to wait for.
    if (copy != nullptr && copy->torn) continue;
    done.push_back(rank);
    if (copy != nullptr && copy->step >= 0) ++steps[copy->step];
  }
  if (done.empty()) return true;  // nothing saved: nothing to verify
  if (!copies_deadline_) copies_deadline_ = now + ctx_->options.copy_wait;
  int64_t step = -1;
  int votes = 0;
  for (const auto& [s, n] : steps) {
    if (n > votes || (n == votes && s > step)) {
      step = s;
      votes = n;
    }
  }
  if (step < 0) {
    // The acks did not say (an older worker): the newest step reported.
    if (!ckpt_->NewestStep(&step)) return false;
  }
  bool all = false;
  if (step >= 0 && now < *copies_deadline_) {
    if (now < next_acks_) return false;
    next_acks_ = now + kAckPoll;
    // HLEN until the count is there (cheap at 16k ranks), then one HMGET to be sure they are
    // the right ranks.
    redis::Reply count;
    if (!ctx_->store->Run(schema::CountCopies(ctx_->keys, step), &count).ok()) return false;
    if (count.integer() >= static_cast<int64_t>(done.size())) {
      redis::Reply reply;
      if (!ctx_->store->Run(schema::GetRanks(ctx_->keys.CkptStep(step), done), &reply).ok()) return false;
      all = true;
      for (size_t i = 0; i < reply.size(); ++i) all = all && reply[i].is_string();
    }
  }
  if (!all && now < *copies_deadline_) return false;
  if (step < 0) {
    FT_LOG(Warn, Master, "{} rank{} answered done but no checkpoint step is reported: not verified",
           done.size(), done.size() == 1 ? "" : "s");
    return true;
  }
  if (!all) {
    FT_LOG(Warn, Master, "step {}: not every saved copy was reported within {} ms; judging what is there",
           step, ctx_->options.copy_wait.count());
  }
  if (!membership_->CurrentTopology().known()) return true;
  return ckpt_->JudgeSavedStep(step, now, unix_ms, judged);
}

bool ActionRunner::RecordSaveOutcome(const Action& a, const StepJudgement* judged) {
  const Topology& topology = membership_->CurrentTopology();
  std::function<ShardId(int)> shard_of;
  if (topology.known()) {
    const bool sharded = ctx_->options.config.sharded_optimizer;
    shard_of = [&topology, sharded](int rank) {
      return rank >= 0 && rank < topology.world_size() ? ShardOfRank(rank, topology, sharded) : ShardId{rank, -1, -1};
    };
  }
  SaveOutcome outcome = CountSaveOutcome(a.save, save_results_, shard_of);
  if (judged != nullptr) AddVerification(*judged, &outcome);
  // `checkpoint`: the last save; `checkpoint:<incident>`: each incident's, for `ftmaster incidents`.
  const std::string value = EncodeSaveOutcome(a.incident, outcome);
  if (!ctx_->writer.Run({schema::master_hash::Set(
          ctx_->keys, {{schema::master_hash::kCheckpoint, value}, {schema::master_hash::CheckpointOf(a.incident), value}})})) {
    return false;
  }
  std::string text = fmt::format("incident {}: {}", a.incident, DescribeSaveOutcome(outcome));
  if (outcome.saved < outcome.shards) {
    FT_LOG(Warn, Master, "{}", text);
  } else {
    FT_LOG(Info, Master, "{}", text);
  }
  if (ctx_->options.out != nullptr) {
    std::fprintf(ctx_->options.out, "%s\n", text.c_str());
    std::fflush(ctx_->options.out);
  }
  return true;
}

bool ActionRunner::AcksSettled(Clock::time_point now, int64_t unix_ms, int64_t deadline_unix_ms) {
  if (!pending_loaded_) LoadPending();
  if (now >= next_acks_) {
    ReadAcks();
    next_acks_ = now + kAckPoll;
  }
  return pending_acks_.empty() || unix_ms >= deadline_unix_ms;
}

void ActionRunner::ReadAcks() {
  for (int batch = 0; batch < kMaxEventBatchesPerTick && !pending_acks_.empty(); ++batch) {
    schema::StreamRead<proto::CommandAck> read;
    if (!schema::ReadStream(*ctx_->store, schema::After(ctx_->keys.Acks(), ack_cursor_, 1000), &read).ok()) return;
    for (schema::Entry<proto::CommandAck>& e : read.entries) {
      ack_cursor_ = e.id;
      proto::CommandAck& ack = e.value;
      if (!e.ok()) {
        // Its side fields still say which command it answers and how.
        const std::string* id = e.raw.Get("id");
        if (id == nullptr || pending_acks_.count(*id) == 0) continue;
        ctx_->bad.Report(fmt::format("ack {}", e.id), e.RawJson(), e.why);
        const std::string* result = e.raw.Get("result");
        ack.id = *id;
        ack.result = result ? *result : "?";
      }
      const std::string id = ack.id;
      if (pending_acks_.erase(id) == 0) continue;
      if (action_ && id == fmt::format("{}-save-{}", action_->incident, ack.rank)) {
        save_results_[ack.rank] = ack.result;
        save_copies_[ack.rank] = ack.saved;
      }
      if (proto::Is(ack, proto::AckResult::kNotSupported)) {
        FT_LOG(Info, Master, "{}: node {} rank {} answered not_supported ({}); counted as an "
               "answer", id, ack.node, ack.rank, ack.message);
      } else {
        FT_LOG(Info, Master, "{}: node {} rank {} answered {}{}{}", id, ack.node, ack.rank,
               ack.result, ack.message.empty() ? "" : ": ", ack.message);
      }
    }
    if (read.entries.size() + read.malformed < 1000) return;
  }
}

}  // namespace ft::master
