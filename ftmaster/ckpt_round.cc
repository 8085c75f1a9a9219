#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/core/save_outcome.h"
#include "proto/ckpt_codec.h"
#include "proto/notice.h"

// The master loop's checkpoint round: which steps' copies changed (ft:{J}:ckpt:steps, then
// HLEN per step: O(steps) per round, a step's copies read only when their count moved, and
// the planned step re-read on a spaced refresh for tier changes), their verdicts
// (ckpt_verify.h) into ft:{J}:ckpt:verdicts, an `sdc` incident per odd replica, and the restore
// plan (ft:{J}:restore, ft:{J}:restore:version) whenever its content changes — also when the
// evicted set (ft:{J}:evicted, read every round: a handful of nodes) moves, since the sources'
// order and tiers depend on it.

namespace ft::master {
namespace {

constexpr int kCkptSteps = 16;  // newest steps looked at; workers keep FT_CKPT_KEEP per tier

bool ParseStep(std::string_view text, int64_t* step) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *step);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && *step >= 0;
}

// "saved step=<S> digest=..." (shm/mailbox.h): the step a rank saved, or -1.
int64_t StepOfAck(const std::string& message) {
  const size_t at = message.find("step=");
  if (at == std::string::npos) return -1;
  size_t end = at + 5;
  while (end < message.size() && message[end] >= '0' && message[end] <= '9') ++end;
  int64_t step = -1;
  if (!ParseStep(std::string_view(message).substr(at + 5, end - at - 5), &step)) return -1;
  return step;
}

}  // namespace

void MasterLoop::LoadPlan() {
  redis::Reply plan, version;
  if (!store_->Run({"GET", keys_.Restore()}, &plan).ok()) return;
  if (!store_->Run({"GET", keys_.RestoreVersion()}, &version).ok()) return;
  plan_ = NoPlan();
  if (plan.is_string()) {
    Status s = proto::Decode(plan.str(), &plan_);
    if (!s.ok()) {
      bad_.Report(keys_.Restore(), plan.str(), s.WithContext("unreadable; a new plan replaces it"));
      plan_ = NoPlan();
      plan_.step = -2;  // differs from every plan: the next one is published
    }
  }
  int64_t published = 0;
  if (version.ToInt(&published) && published > plan_.version) plan_.version = published;
  plan_loaded_ = true;
  plan_dirty_ = true;
}

void MasterLoop::CkptRound(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  next_ckpt_ = now + options_.ckpt_period;
  const Topology& topology = CurrentTopology();
  if (!topology.known()) {
    if (!ckpt_topology_warned_) {
      FT_LOG(Info, Master, "checkpoints are not judged while the topology is {}", topology.Describe());
      ckpt_topology_warned_ = true;
    }
    return;
  }
  ckpt_topology_warned_ = false;
  const std::string shape =
      fmt::format("{}/{}/{}", topology.sizes(), topology.order(), options_.config.sharded_optimizer);
  const bool reshaped = shape != ckpt_topology_;
  ckpt_topology_ = shape;
  if (!plan_loaded_) {
    LoadPlan();
    if (!plan_loaded_) return;
  }

  redis::Reply reply;
  if (!store_->Run({"ZREVRANGE", keys_.CkptSteps(), "0", std::to_string(kCkptSteps - 1)}, &reply).ok()) return;
  std::vector<int64_t> steps;
  for (const redis::Reply& r : reply.elements()) {
    int64_t step = -1;
    if (r.is_string() && ParseStep(r.str(), &step)) {
      steps.push_back(step);
    } else {
      bad_.Report(keys_.CkptSteps(), r.DebugString().substr(0, 64), Status::Corrupt("not a step number"));
    }
  }
  for (auto it = ckpt_.begin(); it != ckpt_.end();) {
    if (std::find(steps.begin(), steps.end(), it->first) == steps.end()) {
      if (it->first == plan_.step) plan_dirty_ = true;
      // Gone from the set (its last copy removed, FT_CKPT_KEEP): its verdict goes too, so the
      // verdicts hash stays as small as the set. Merely older than the newest kCkptSteps: kept.
      redis::Reply score;
      if (!store_->Run({"ZSCORE", keys_.CkptSteps(), std::to_string(it->first)}, &score).ok()) return;
      if (score.is_nil() &&
          !writer_.Run({{"HDEL", keys_.CkptVerdicts(), std::to_string(it->first)}})) {
        return;
      }
      it = ckpt_.erase(it);
    } else {
      ++it;
    }
  }
  for (int64_t step : steps) {
    redis::Reply own_count, buddy_count;
    if (!store_->Run({"HLEN", keys_.CkptStep(step)}, &own_count).ok()) return;
    if (!store_->Run({"HLEN", keys_.CkptBuddy(step)}, &buddy_count).ok()) return;
    const int64_t fields = own_count.integer() + buddy_count.integer();
    auto it = ckpt_.find(step);
    const bool known = it != ckpt_.end() && it->second->judged;
    // A step waiting for its replicas is read again when another copy came or its deadline
    // passed, not every round (HGETALL of every rank's copy, at 131k ranks megabytes).
    const bool held = it != ckpt_.end() && !it->second->judged && !it->second->settled;
    const bool changed = held ? it->second->fields != fields || now >= it->second->first_seen + options_.copy_wait
                              : !known || it->second->fields != fields;
    // The planned step, and a newer restorable one not planned (held only on gone evicted
    // nodes): a tier change (a copy reaching the remote directory) rewrites a field, not HLEN.
    const bool candidate = step == plan_.step || (step > plan_.step && known && it->second->judged->restorable);
    const bool refresh = known && candidate && now >= it->second->refresh_at;
    if (reshaped || changed || refresh) {
      if (!ReadAndJudgeStep(step, now, unix_ms)) return;
    }
  }
  if (!ReadEvicted()) return;
  if (ranks_.version() != plan_ranks_version_) plan_dirty_ = true;
  if (plan_dirty_) (void)PublishPlan(unix_ms);
  next_ckpt_ = now + Spacing(options_.ckpt_period, MsSince(start), kSteadyShare);
}

bool MasterLoop::ReadAndJudgeStep(int64_t step, Clock::time_point now, int64_t unix_ms, bool settled) {
  const auto start = Clock::now();
  redis::Reply reply, buddy_reply;
  if (!store_->Run({"HGETALL", keys_.CkptStep(step)}, &reply).ok()) return false;
  if (!store_->Run({"HGETALL", keys_.CkptBuddy(step)}, &buddy_reply).ok()) return false;
  ++stats_.ckpt_step_reads;
  std::unique_ptr<CkptStep>& slot = ckpt_[step];
  if (!slot) {
    slot = std::make_unique<CkptStep>();
    slot->first_seen = now;
  }
  CkptStep& s = *slot;
  s.copies.Load(reply, &bad_);
  s.buddies.Load(buddy_reply, &bad_);
  s.fields = static_cast<int64_t>(reply.size() / 2 + buddy_reply.size() / 2);
  s.judged.reset();  // points into of_step, rebuilt below
  s.of_step.clear();
  for (const bool buddy : {false, true}) {
    for (const proto::CkptCopy& c : (buddy ? s.buddies : s.copies).values()) {
      if (c.step == step && c.buddy == buddy) {
        s.of_step.push_back(c);
      } else {
        bad_.Report(buddy ? keys_.CkptBuddy(step) : keys_.CkptStep(step), proto::Encode(c),
                    Status::Corrupt(c.step != step
                                        ? fmt::format("a copy of step {} in the hash of step {}", c.step, step)
                                        : std::string(buddy ? "an own copy in the buddy copies' hash"
                                                            : "a buddy copy in the own copies' hash")));
      }
    }
  }
  // By rank, a rank's own copy before its buddy copy.
  std::sort(s.of_step.begin(), s.of_step.end(),
            [](const auto& a, const auto& b) { return std::tie(a.rank, a.buddy) < std::tie(b.rank, b.buddy); });
  s.judged = JudgeStep(step, s.of_step, CurrentTopology(), options_.config.sharded_optimizer, unix_ms);
  s.refresh_at = now + Spacing(options_.ckpt_refresh, MsSince(start), kSteadyShare);
  // A verdict on the copies that happen to be in (replicas save at the same moment and report
  // a few milliseconds apart) could accept a corrupted copy as a single replica before its
  // twin arrives: until every replica reported or copy_wait passed, the step stays unjudged
  // (re-read every round, never planned).
  const bool deadline_passed = now >= s.first_seen + options_.copy_wait;
  if (!settled && !s.settled && !s.judged->every_replica_reported && !deadline_passed) {
    if (!s.held_logged) {
      FT_LOG(Debug, Master, "checkpoint step {}: {} of {} replicas reported; judged when the rest are in or in {} ms",
             step, s.judged->reported, s.judged->expected, options_.copy_wait.count());
      s.held_logged = true;
    }
    s.judged.reset();
    return true;
  }
  s.settled = true;  // a plan published on it is never withdrawn for want of a replica
  if (!s.judged->every_replica_reported) {
    s.judged->verdict.reasons.push_back(proto::VerdictReason::kPartialReport);
    s.judged->verdict.why += fmt::format("; judged with {} of {} replicas reported ({})", s.judged->reported,
                                         s.judged->expected,
                                         settled ? "the save's acknowledged copies are in" : "the deadline passed");
  }
  plan_dirty_ = true;

  proto::StepVerdict timeless = s.judged->verdict;
  timeless.unix_ms = 0;
  std::string verdict = proto::Encode(timeless);
  if (verdict != s.verdict) {
    if (!writer_.Run({{"HSET", keys_.CkptVerdicts(), std::to_string(step), proto::Encode(s.judged->verdict)}})) {
      return false;
    }
    s.verdict = std::move(verdict);
    const proto::StepVerdict& v = s.judged->verdict;
    if (v.state == proto::VerdictState::kVerified) {
      FT_LOG(Info, Master, "checkpoint step {}: {} ({} copies): {}", step, proto::VerdictStateName(v.state), v.copies, v.why);
    } else {
      FT_LOG(Warn, Master, "checkpoint step {}: {} ({} copies): {}", step, proto::VerdictStateName(v.state), v.copies, v.why);
    }
  }
  return ReportSdc(*s.judged, unix_ms);
}

bool MasterLoop::ReportSdc(const StepJudgement& judged, int64_t unix_ms) {
  std::vector<proto::Incident> incidents;
  for (const SdcFinding& f : judged.sdc) {
    const std::string id = fmt::format("sdc-step{}-rank{}", judged.verdict.step, f.rank);
    if (sdc_reported_.count(id)) continue;
    proto::Incident i;
    i.id = id;
    i.kind = proto::IncidentKindName(proto::IncidentKind::kSdc);
    i.suspects.push_back(proto::Suspect{
        f.rank, f.node,
        fmt::format("its checkpoint of step {} differs from its {} DP replicas'", judged.verdict.step, f.agreeing)});
    std::vector<int> agreeing;
    const ShardCheck& shard = judged.shards.at(f.shard);
    for (const proto::CkptCopy* c : shard.holders) agreeing.push_back(c->rank);
    i.evidence.push_back(fmt::format("step {}: rank {} on {} holds digest {:016x}", judged.verdict.step, f.rank,
                                     f.node, f.digest));
    i.evidence.push_back(fmt::format("step {}: ranks {} (same shard) hold digest {:016x}", judged.verdict.step,
                                     fmt::join(agreeing, ", "), f.majority));
    i.confidence = static_cast<double>(f.agreeing) / static_cast<double>(shard.copies);
    i.first_event_unix_ms = unix_ms;
    i.window_closed_unix_ms = unix_ms;
    i.decided_unix_ms = unix_ms;
    i.decision = "none";
    i.message = fmt::format(
        "silent data corruption suspected on rank {} (node {}): its bytes of step {} differ from "
        "the {} replicas that agree; their copy is used for the restore. Node {} is an eviction "
        "candidate (not evicted automatically: check its GPU, e.g. with DCGM diagnostics)",
        f.rank, f.node, judged.verdict.step, f.agreeing, f.node);
    incidents.push_back(std::move(i));
  }
  if (incidents.empty()) return true;
  auto won = writer_.WriteIncidents(incidents, unix_ms, {}, {}, {}, {});
  if (!won) return false;
  for (size_t k = 0; k < incidents.size(); ++k) {
    sdc_reported_.insert(incidents[k].id);
    if ((*won)[k]) Print(incidents[k], {});
  }
  return true;
}

bool MasterLoop::ReadEvicted() {
  redis::Reply reply;
  if (!store_->Run({"SMEMBERS", keys_.Evicted()}, &reply).ok()) return false;
  EvictedNodes evicted;
  for (const redis::Reply& r : reply.elements()) {
    if (r.is_string()) evicted.nodes.insert(r.str());
  }
  for (const std::string& node : evicted.nodes) {  // a handful: one EXISTS each
    redis::Reply alive;
    if (!store_->Run({"EXISTS", keys_.WorkerHeartbeat(node)}, &alive).ok()) return false;
    if (alive.integer() > 0) evicted.serving.insert(node);
  }
  if (evicted != evicted_) {
    // The sources' order and tiers depend on it: the plan is rebuilt and, when that changed
    // it, republished.
    evicted_ = std::move(evicted);
    plan_dirty_ = true;
  }
  return true;
}

bool MasterLoop::PublishPlan(int64_t unix_ms) {
  const Topology& topology = CurrentTopology();
  if (!topology.known() || !plan_loaded_) return false;
  std::unordered_map<int, const proto::Membership*> member;
  for (const proto::Membership& m : ranks_.values()) {
    auto [at, inserted] = member.emplace(m.rank, &m);
    if (!inserted && m.incarnation > at->second->incarnation) at->second = &m;
  }
  auto node_of = [&](int rank) -> std::string {
    auto it = member.find(rank);
    return it == member.end() ? std::string() : it->second->node;
  };
  // The newest restorable step whose every rank keeps a source once the evicted nodes'
  // arenas and local files are discounted.
  bool chosen = false;
  const CkptStep* chosen_step = nullptr;
  proto::RestorePlan plan = NoPlan();
  std::vector<int64_t> skipped;
  std::vector<std::string> only_evicted;  // "step S (rank R)": held only on gone evicted nodes
  for (auto it = ckpt_.rbegin(); it != ckpt_.rend() && !chosen; ++it) {
    const CkptStep& s = *it->second;
    if (!s.judged) continue;
    if (!s.judged->restorable) {
      if (s.judged->verdict.state == proto::VerdictState::kUntrusted) skipped.push_back(it->first);
      continue;
    }
    plan = BuildPlan(*s.judged, topology, options_.config.sharded_optimizer, node_of, evicted_);
    const int stranded = FirstRankWithoutSource(plan);
    if (stranded < 0) {
      chosen = true;
      chosen_step = &s;
    } else {
      only_evicted.push_back(fmt::format("step {} (rank {})", it->first, stranded));
      plan = NoPlan();
    }
  }
  plan_ranks_version_ = ranks_.version();
  plan_dirty_ = false;
  if (!only_evicted.empty() && only_evicted != unplannable_) {
    FT_LOG(Warn, Master, "verified but not restorable: {} — some shard is held only on evicted node{} {} whose "
           "worker is gone, with no remote copy{}", fmt::join(only_evicted, ", "),
           evicted_.nodes.size() == 1 ? "" : "s", fmt::join(evicted_.nodes, ", "),
           chosen ? fmt::format("; step {} is planned instead", plan.step) : "");
  }
  unplannable_ = std::move(only_evicted);
  if (!chosen && plan_.step == -1) return true;  // nothing to restore, and none was said
  if (SamePlanContent(plan, plan_)) return true;
  plan.version = plan_.version + 1;
  plan.unix_ms = unix_ms;
  if (!writer_.Run({{"SET", keys_.Restore(), proto::Encode(plan)},
                    {"SET", keys_.RestoreVersion(), std::to_string(plan.version)},
                    proto::NoticeXadd(keys_.Notify(), proto::NoticeOf(proto::NoticeKind::kRestore))})) {
    plan_dirty_ = true;
    return false;
  }
  ++stats_.plans_published;
  const std::string notes =
      skipped.empty() ? ""
                      : fmt::format(" (newer untrusted step{} {} skipped)", skipped.size() == 1 ? "" : "s",
                                    fmt::join(skipped, ", "));
  if (chosen) {
    // Which saves took the copies: after a teardown or a preemption, termination saves. A
    // buddy copy is its rank's save again: one per rank (of_step is by rank, own copy first).
    std::vector<proto::CkptCopy> saved;
    for (const proto::CkptCopy& c : chosen_step->of_step) {
      if (saved.empty() || saved.back().rank != c.rank) saved.push_back(c);
    }
    FT_LOG(Info, Master, "restore plan {}: step {} for {} ranks, copies saved by {}{}{}", plan.version, plan.step,
           plan.ranks.size(), FormatOrigins(CountOrigins(saved)),
           evicted_.nodes.empty() ? "" : fmt::format(", copies on evicted {} last", fmt::join(evicted_.nodes, ", ")),
           notes);
  } else {
    FT_LOG(Warn, Master, "restore plan {}: no restorable checkpoint any more{}", plan.version, notes);
  }
  plan_ = std::move(plan);
  return true;
}

bool MasterLoop::SaveCopiesSettled(Clock::time_point now, int64_t unix_ms, const StepJudgement** judged) {
  *judged = nullptr;
  std::vector<std::string> done;
  std::map<int64_t, int> steps;  // step -> ranks that said they saved it
  for (const auto& [rank, result] : save_results_) {
    if (result != "done") continue;
    done.push_back(std::to_string(rank));
    auto m = save_messages_.find(rank);
    const int64_t step = m == save_messages_.end() ? -1 : StepOfAck(m->second);
    if (step >= 0) ++steps[step];
  }
  if (done.empty()) return true;  // nothing saved: nothing to verify
  if (!copies_deadline_) copies_deadline_ = now + options_.copy_wait;
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
    redis::Reply newest;
    if (!store_->Run({"ZREVRANGE", keys_.CkptSteps(), "0", "0"}, &newest).ok()) return false;
    if (newest.size() == 1 && newest[0].is_string()) (void)ParseStep(newest[0].str(), &step);
  }
  bool all = false;
  if (step >= 0 && now < *copies_deadline_) {
    if (now < next_acks_) return false;
    next_acks_ = now + kAckPoll;
    // HLEN until the count is there (cheap at 16k ranks), then one HMGET to be sure they are
    // the right ranks.
    redis::Reply count;
    if (!store_->Run({"HLEN", keys_.CkptStep(step)}, &count).ok()) return false;
    if (count.integer() >= static_cast<int64_t>(done.size())) {
      redis::Argv argv = {"HMGET", keys_.CkptStep(step)};
      argv.insert(argv.end(), done.begin(), done.end());
      redis::Reply reply;
      if (!store_->Run(argv, &reply).ok()) return false;
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
           step, options_.copy_wait.count());
  }
  if (!CurrentTopology().known()) return true;
  if (!ReadAndJudgeStep(step, now, unix_ms, /*settled=*/true)) return false;
  if (!ReadEvicted()) return false;  // the incident's evictions shape the plan published here
  (void)PublishPlan(unix_ms);
  auto it = ckpt_.find(step);
  if (it != ckpt_.end() && it->second->judged) *judged = &*it->second->judged;
  return true;
}

}  // namespace ft::master
