#include "ftmaster/ckpt_round.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <unordered_map>

#include "common/log.h"
#include "ftmaster/core/ckpt_lineage.h"
#include "ftmaster/core/gone_nodes.h"
#include "ftmaster/core/save_outcome.h"
#include "ftmaster/loop_util.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/verdict_hash.h"

// The checkpoint round (ckpt_round.h says what it reads and writes, and when).

namespace ft::master {
namespace {

constexpr int kCkptSteps = 16;  // newest steps looked at; workers keep FT_CKPT_KEEP per tier
// After a rank was relaunched or seen gone, how long copies may still be on their way: a
// termination save commits, its worker's scan reports it (about a second), a round reads it.
constexpr std::chrono::seconds kSettleAfterMove{3};  // plus the copy wait
// How long a plan naming another step waits while a launch restores from the published one.
constexpr std::chrono::seconds kMaxPlanHold{60};

}  // namespace

void CkptRound::DecidedNow(proto::Incident* i, int64_t unix_ms, proto::DecisionKind decision) {
  i->first_event_unix_ms = unix_ms;
  i->window_closed_unix_ms = unix_ms;
  i->decided_unix_ms = unix_ms;
  i->decision = proto::DecisionKindName(decision);
}

bool ParseStep(std::string_view text, int64_t* step) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *step);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && *step >= 0;
}

std::chrono::milliseconds CkptRound::SettleWindow() const { return kSettleAfterMove + ctx_->options.copy_wait; }

bool CkptRound::Moving(Clock::time_point now) const { return moved_ && now < moved_at_ + SettleWindow(); }

void CkptRound::NewTerm(Clock::time_point now) {
  steps_.clear();
  topology_.clear();
  sdc_reported_.clear();
  plan_loaded_ = false;
  evicted_ = EvictedNodes{};
  next_round_ = now;
}

void CkptRound::LoadPlan() {
  redis::Reply plan, version;
  if (!ctx_->store->Run(schema::GetPlan(ctx_->keys), &plan).ok()) return;
  if (!ctx_->store->Run(schema::GetPlanVersion(ctx_->keys), &version).ok()) return;
  const int64_t newest_here = plan_.version;  // the newest this process published or read
  plan_ = NoPlan();
  if (plan.is_string()) {
    Status s = proto::Decode(plan.str(), &plan_);
    if (!s.ok()) {
      ctx_->bad.Report(ctx_->keys.Restore(), plan.str(), s.WithContext("unreadable; a new plan replaces it"));
      plan_ = NoPlan();
      plan_.step = -2;  // differs from every plan: the next one is published
    }
  }
  int64_t published = 0;
  if (version.ToInt(&published) && published > plan_.version) plan_.version = published;
  // Never a version this process published or read before, though Redis lost it (restarted
  // empty, flushed): a worker takes an unchanged version for an unchanged plan and would hand
  // its ranks the plan from before (a seeded campaign schedule: Redis restarted empty at a
  // preemption, the new plan 1 said step 23, node1's worker kept its plan 1 of step 15, and the
  // relaunch found no copy of step 15).
  plan_.version = std::max(plan_.version, newest_here);
  if (plan_.version > 0) {
    // Another master published before this term: what moved meanwhile is unknown to this one
    // (it saw no end nor relaunch), so it is taken as a move: a newer step waiting for its
    // replicas keeps the plan settling (a campaign seed: a successor made step 3 final while
    // the teardown's copies of step 6 waited for their third replica).
    moved_at_ = now_;
    moved_ = true;
  }
  redis::Reply rewinds;
  if (!ctx_->store->Run(schema::GetRewinds(ctx_->keys), &rewinds).ok()) return;
  proto::CkptRewinds loaded;
  if (rewinds.is_string()) {
    Status s = proto::Decode(rewinds.str(), &loaded);
    if (!s.ok()) {
      // Forgetting them could plan a left run's copy; the next relaunch or finish writes anew.
      ctx_->bad.Report(ctx_->keys.CkptRewinds(), rewinds.str(), s.WithContext("unreadable; taken as none"));
      loaded = proto::CkptRewinds{};
    }
  }
  // The ends the last master echoed stay echoed: the relaunched ranks' memberships no longer
  // show them, and a worker waiting for one would wait its whole bound.
  for (const auto& [node, unix_ms] : plan_.ends_seen) {
    int64_t& at = ends_seen_[node];
    at = std::max(at, unix_ms);
  }
  if (loaded != rewinds_) {
    rewinds_ = std::move(loaded);
    for (auto& [step, s] : steps_) s->fields = -1;  // judged again under these rewinds
  }
  plan_loaded_ = true;
  plan_dirty_ = true;
}

void CkptRound::Run(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  now_ = now;
  next_round_ = now + ctx_->options.ckpt_period;
  const Topology& topology = membership_->CurrentTopology();
  if (!topology.known()) {
    if (!topology_warned_) {
      FT_LOG(Info, Master, "checkpoints are not judged while the topology is {}", topology.Describe());
      topology_warned_ = true;
    }
    return;
  }
  topology_warned_ = false;
  const std::string shape =
      fmt::format("{}/{}/{}", topology.sizes(), topology.order(), ctx_->options.config.sharded_optimizer);
  const bool reshaped = shape != topology_;
  topology_ = shape;
  if (!plan_loaded_) {
    LoadPlan();
    if (!plan_loaded_) return;
  }

  NoteEnds();  // before the copies are read (NoteEnds says why)
  redis::Reply reply;
  if (!ctx_->store->Run(schema::NewestSteps(ctx_->keys, kCkptSteps), &reply).ok()) return;
  std::vector<int64_t> steps;
  for (const redis::Reply& r : reply.elements()) {
    int64_t step = -1;
    if (r.is_string() && ParseStep(r.str(), &step)) {
      steps.push_back(step);
    } else {
      ctx_->bad.Report(ctx_->keys.CkptSteps(), r.DebugString().substr(0, 64), Status::Corrupt("not a step number"));
    }
  }
  for (auto it = steps_.begin(); it != steps_.end();) {
    if (std::find(steps.begin(), steps.end(), it->first) == steps.end()) {
      if (it->first == plan_.step) plan_dirty_ = true;
      // Gone from the set (its last copy removed, FT_CKPT_KEEP): its verdict goes too, so the
      // verdicts hash stays as small as the set. Merely older than the newest kCkptSteps: kept.
      redis::Reply score;
      if (!ctx_->store->Run({"ZSCORE", ctx_->keys.CkptSteps(), std::to_string(it->first)}, &score).ok()) return;
      if (score.is_nil() &&
          !ctx_->writer.Run({schema::RemoveVerdict(ctx_->keys, it->first)})) {
        return;
      }
      it = steps_.erase(it);
    } else {
      ++it;
    }
  }
  for (int64_t step : steps) {
    redis::Reply own_count, buddy_count;
    if (!ctx_->store->Run(schema::CountCopies(ctx_->keys, step), &own_count).ok()) return;
    if (!ctx_->store->Run(schema::CountBuddyCopies(ctx_->keys, step), &buddy_count).ok()) return;
    const int64_t fields = own_count.integer() + buddy_count.integer();
    auto it = steps_.find(step);
    const bool known = it != steps_.end() && it->second->judged;
    // A step waiting for its replicas is read again when another copy came or its deadline
    // passed, not every round (HGETALL of every rank's copy, at 131k ranks megabytes).
    const bool held = it != steps_.end() && !it->second->judged && !it->second->settled;
    const bool changed = held ? it->second->fields != fields || now >= it->second->first_seen + ctx_->options.copy_wait
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
  if (membership_->version() != plan_ranks_version_) plan_dirty_ = true;
  // Settling ends by time too (a relaunch's copies had their while to come): looked at every round.
  if (SettlingWhy(now, plan_.step) != plan_.settling) plan_dirty_ = true;
  if (plan_dirty_) (void)PublishPlan(unix_ms);
  RecordRewinds(unix_ms);
  // Spaced by its cost while the plan is final: a running job's steady reads. Every ckpt_period
  // while it settles: relaunched ranks wait on it (FT_RESTORE_WAIT), and what it waits for
  // (copy_wait, the settle window) ends by the clock. A round held up for a second (the master
  // descheduled, a slow Redis reply) once spaced the next 12 s away, and a campaign seed's
  // relaunch gave up waiting half a second before the round that would have judged its step.
  next_round_ = now + (plan_.settling.empty() ? Spacing(ctx_->options.ckpt_period, MsSince(start), kSteadyShare)
                                              : ctx_->options.ckpt_period);
}

bool CkptRound::ReadAndJudgeStep(int64_t step, Clock::time_point now, int64_t unix_ms, bool settled) {
  const auto start = Clock::now();
  redis::Reply reply, buddy_reply;
  if (!ctx_->store->Run(schema::GetCopies(ctx_->keys, step), &reply).ok()) return false;
  if (!ctx_->store->Run(schema::GetBuddyCopies(ctx_->keys, step), &buddy_reply).ok()) return false;
  ++ctx_->stats.ckpt_step_reads;
  std::unique_ptr<Step>& slot = steps_[step];
  const bool first_read = !slot;
  if (first_read) {
    slot = std::make_unique<Step>();
    slot->first_seen = now;
    // The step the published plan names was judged for good by whoever published it: a master
    // that took over does not withdraw the plan while it waits for replicas that never come.
    slot->settled = step == plan_.step;
  }
  Step& s = *slot;
  s.copies.Load(reply, &ctx_->bad);
  s.buddies.Load(buddy_reply, &ctx_->bad);
  if (first_read) {
    // The replicas' deadline runs from the first report, not from this master's first read: a
    // master that took over would otherwise wait a whole copy_wait again while relaunched ranks
    // wait for the plan (a campaign seed: they gave up, FT_RESTORE_WAIT). Report times are the
    // workers' clocks: a skew moves only this deadline.
    int64_t first_report_ms = unix_ms;
    for (const proto::CkptCopy& c : s.copies.values()) {
      if (c.unix_ms > 0) first_report_ms = std::min(first_report_ms, c.unix_ms);
    }
    const int64_t ago_ms = std::min<int64_t>(unix_ms - first_report_ms, ctx_->options.copy_wait.count());
    s.first_seen = now - std::chrono::milliseconds(std::max<int64_t>(ago_ms, 0));
  }
  s.fields = static_cast<int64_t>(reply.size() / 2 + buddy_reply.size() / 2);
  s.judged.reset();  // points into of_step, rebuilt below
  s.of_step.clear();
  int superseded = 0;
  const proto::CkptRewind* superseded_by = nullptr;
  bool all_superseded = false;  // nothing of the run the job continues: no replica to wait for
  for (const bool buddy : {false, true}) {
    for (const proto::CkptCopy& c : (buddy ? s.buddies : s.copies).values()) {
      if (c.step == step && c.buddy == buddy) {
        if (const proto::CkptRewind* by = SupersededBy(c, rewinds_.rewinds)) {
          ++superseded;
          superseded_by = by;
          continue;
        }
        s.of_step.push_back(c);
      } else {
        ctx_->bad.Report(buddy ? ctx_->keys.CkptBuddy(step) : ctx_->keys.CkptStep(step), proto::Encode(c),
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
  s.judged = JudgeStep(step, s.of_step, membership_->CurrentTopology(), ctx_->options.config.sharded_optimizer, unix_ms);
  s.refresh_at = now + Spacing(ctx_->options.ckpt_refresh, MsSince(start), kSteadyShare);
  if (superseded > 0) {
    s.judged->verdict.reasons.push_back(proto::VerdictReason::kSuperseded);
    s.judged->verdict.why += fmt::format("; {} cop{} of a run the job left ignored (saved before {})", superseded,
                                         superseded == 1 ? "y" : "ies", superseded_by->why);
    // Nothing of the run the job continues: no replica of it is on its way to wait for.
    all_superseded = s.of_step.empty();
  }
  // A verdict on the copies that happen to be in (replicas save at the same moment and report
  // a few milliseconds apart) could accept a corrupted copy as a single replica before its
  // twin arrives: until every replica reported or copy_wait passed, the step stays unjudged
  // (re-read every round, never planned).
  const bool deadline_passed = now >= s.first_seen + ctx_->options.copy_wait;
  if (!settled && !s.settled && !all_superseded && !s.judged->every_replica_reported && !deadline_passed) {
    if (!s.held_logged) {
      FT_LOG(Debug, Master, "checkpoint step {}: {} of {} replicas reported; judged when the rest are in or in {} ms",
             step, s.judged->reported, s.judged->expected, ctx_->options.copy_wait.count());
      s.held_logged = true;
    }
    s.judged.reset();
    return true;
  }
  s.settled = true;  // a plan published on it is never withdrawn for want of a replica
  if (!s.judged->every_replica_reported && !all_superseded) {
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
    if (!ctx_->writer.Run({schema::SetVerdict(ctx_->keys, s.judged->verdict)})) {
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

bool CkptRound::ReportSdc(const StepJudgement& judged, int64_t unix_ms) {
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
    DecidedNow(&i, unix_ms, proto::DecisionKind::kNone);
    i.message = fmt::format(
        "silent data corruption suspected on rank {} (node {}): its bytes of step {} differ from "
        "the {} replicas that agree; their copy is used for the restore. Node {} is an eviction "
        "candidate (not evicted automatically: check its GPU, e.g. with DCGM diagnostics)",
        f.rank, f.node, judged.verdict.step, f.agreeing, f.node);
    incidents.push_back(std::move(i));
  }
  if (incidents.empty()) return true;
  if (hardware_ != nullptr) AttachHardware(incidents, *hardware_, unix_ms);
  auto won = ctx_->writer.WriteIncidents(incidents, unix_ms, {}, {}, {}, {});
  if (!won) return false;
  for (size_t k = 0; k < incidents.size(); ++k) {
    sdc_reported_.insert(incidents[k].id);
    if ((*won)[k]) ctx_->Print(incidents[k], {});
  }
  return true;
}

bool CkptRound::ReadEvicted() {
  redis::Reply reply;
  if (!ctx_->store->Run(schema::GetEvicted(ctx_->keys), &reply).ok()) return false;
  EvictedNodes evicted;
  evicted.nodes = schema::DecodeNodes(reply);
  for (const std::string& node : evicted.nodes) {  // a handful: one EXISTS each
    redis::Reply alive;
    if (!ctx_->store->Run(schema::HeartbeatExists(ctx_->keys, node), &alive).ok()) return false;
    if (alive.integer() > 0) evicted.serving.insert(node);
  }
  if (!ReadGone(evicted.nodes)) return false;
  // A node lost without an eviction counts as an evicted one whose worker is gone.
  evicted.nodes.insert(gone_.gone().begin(), gone_.gone().end());
  if (evicted != evicted_) {
    // The sources' order and tiers depend on it: the plan is rebuilt and, when that changed
    // it, republished.
    evicted_ = std::move(evicted);
    plan_dirty_ = true;
  }
  return true;
}

bool CkptRound::ReadGone(const std::set<std::string>& evicted) {
  // The nodes that matter: those the plan names a copy on, and those gone already; one EXISTS
  // each, in one round trip, every kGoneLookMs at most (10,000 nodes: 5,000 EXISTS a second).
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now_.time_since_epoch()).count();
  if (now_ms < next_gone_look_ms_) return true;
  if (membership_->version() != gone_members_version_) {  // a worker registered its ranks: it lived
    for (const proto::Membership& m : membership_->values()) gone_.SawAlive(m.node);
    gone_members_version_ = membership_->version();
  }
  std::map<std::string, bool> beats;
  for (const proto::RestoreRank& r : plan_.ranks) {
    for (const proto::RestoreSource& s : r.sources) {
      if (evicted.count(s.node)) continue;
      beats.emplace(s.node, false);
      // Its worker reported the copy: the node lived, whether or not this master ever saw it
      // beat. A master that took over after the node was lost never did, and its relaunch on
      // a replacement no longer names the node in the membership either (the campaign's seed
      // 1112: the plan named the lost node's copies for good).
      gone_.SawAlive(s.node);
    }
  }
  for (const std::string& node : gone_.gone()) {
    if (!evicted.count(node)) beats.emplace(node, false);
  }
  if (!beats.empty()) {
    std::vector<redis::Argv> exists;
    for (const auto& entry : beats) exists.push_back(schema::HeartbeatExists(ctx_->keys, entry.first));
    std::vector<redis::Reply> replies;
    if (!ctx_->store->PipelinePartial(exists, &replies).ok() || replies.size() != exists.size()) return false;
    size_t k = 0;
    for (auto& entry : beats) entry.second = replies[k++].integer() > 0;
  }
  next_gone_look_ms_ = now_ms + kGoneLookMs;
  if (gone_.Observe(beats, now_ms)) {
    FT_LOG(Warn, Master, "{}: no worker heartbeat for {} s; their copies are counted as lost (only a remote "
           "tier's are read) until they come back",
           gone_.gone().empty() ? std::string("no node is lost any more")
                                : fmt::format("node{} {} lost", gone_.gone().size() == 1 ? "" : "s",
                                              fmt::join(gone_.gone(), ", ")),
           GoneNodes::kGoneAfterMs / 1000);
  }
  return true;
}

bool CkptRound::PublishPlan(int64_t unix_ms) {
  const Topology& topology = membership_->CurrentTopology();
  if (!topology.known() || !plan_loaded_) return false;
  std::unordered_map<int, const proto::Membership*> member;
  for (const proto::Membership& m : membership_->values()) {
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
  const Step* chosen_step = nullptr;
  proto::RestorePlan plan = NoPlan();
  std::vector<int64_t> skipped;
  std::vector<std::string> only_evicted;  // "step S (rank R)": held only on gone evicted nodes
  for (auto it = steps_.rbegin(); it != steps_.rend() && !chosen; ++it) {
    const Step& s = *it->second;
    if (!s.judged) continue;
    if (!s.judged->restorable) {
      if (s.judged->verdict.state == proto::VerdictState::kUntrusted) skipped.push_back(it->first);
      continue;
    }
    plan = BuildPlan(*s.judged, topology, ctx_->options.config.sharded_optimizer, node_of, evicted_);
    const int stranded = FirstRankWithoutSource(plan);
    if (stranded < 0) {
      chosen = true;
      chosen_step = &s;
    } else {
      only_evicted.push_back(fmt::format("step {} (rank {})", it->first, stranded));
      plan = NoPlan();
    }
  }
  plan_ranks_version_ = membership_->version();
  plan_dirty_ = false;
  if (!only_evicted.empty() && only_evicted != unplannable_) {
    FT_LOG(Warn, Master, "verified but not restorable: {} — some shard is held only on evicted node{} {} whose "
           "worker is gone, with no remote copy{}", fmt::join(only_evicted, ", "),
           evicted_.nodes.size() == 1 ? "" : "s", fmt::join(evicted_.nodes, ", "),
           chosen ? fmt::format("; step {} is planned instead", plan.step) : "");
  }
  unplannable_ = std::move(only_evicted);
  plan.settling = SettlingWhy(now_, plan.step);
  plan.ends_seen = ends_seen_;
  // Nothing to restore, and none was said: a first launch's `step none` needs no plan.
  if (!chosen && plan_.step == -1 && plan.settling == plan_.settling && plan.ends_seen == plan_.ends_seen) return true;
  if (SamePlanContent(plan, plan_)) return true;
  // One plan per launch: once a rank of the launch now running restored from the published plan,
  // one naming another step waits until every rank of the launch restored (or the launch ended):
  // ranks reading later would restore another step than their peers (TakeRestoreMismatch
  // stops such a launch; this keeps the master from causing it).
  if (plan.step != plan_.step && plan_.version > 0) {
    const std::string restoring = LaunchRestoringFrom(plan_.version);
    if (restoring.empty()) {
      held_since_.reset();
    } else if (!held_since_) {
      held_since_ = now_;
    }
    // Bounded: ranks that never call ft_restore (or a restore that never ends) must not freeze
    // the plan of a job that trains on.
    if (!restoring.empty() && now_ - *held_since_ >= kMaxPlanHold) {
      FT_LOG(Warn, Master, "restore plan {} was held {} s while its launch restored ({}): publishing step {} now",
             plan_.version, std::chrono::duration_cast<std::chrono::seconds>(kMaxPlanHold).count(), restoring,
             plan.step);
    } else if (!restoring.empty()) {
      if (held_plan_step_ != plan.step) {
        FT_LOG(Info, Master, "restore plan {} (step {}) stays while its launch restores ({}); step {} is planned "
               "once every rank of the launch restored", plan_.version,
               plan_.step < 0 ? std::string("none") : std::to_string(plan_.step), restoring,
               plan.step < 0 ? std::string("none") : std::to_string(plan.step));
        held_plan_step_ = plan.step;
      }
      plan_dirty_ = true;  // looked at again every round (the bound, the launch's progress)
      return true;
    }
  }
  held_plan_step_ = -2;
  held_since_.reset();
  plan.version = plan_.version + 1;
  plan.unix_ms = unix_ms;
  if (!ctx_->writer.Run(schema::PublishPlan(ctx_->keys, plan))) {
    plan_dirty_ = true;
    return false;
  }
  ++ctx_->stats.plans_published;
  const std::string notes =
      skipped.empty() ? ""
                      : fmt::format(" (newer untrusted step{} {} skipped)", skipped.size() == 1 ? "" : "s",
                                    fmt::join(skipped, ", "));
  if (!plan.settling.empty()) {
    FT_LOG(Info, Master, "restore plan {} (step {}) is settling: {}; ranks starting now wait for the final plan",
           plan.version, plan.step < 0 ? std::string("none") : std::to_string(plan.step), plan.settling);
  } else if (chosen) {
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

bool CkptRound::JudgeSavedStep(int64_t step, Clock::time_point now, int64_t unix_ms, const StepJudgement** judged) {
  *judged = nullptr;
  now_ = now;
  if (!ReadAndJudgeStep(step, now, unix_ms, /*settled=*/true)) return false;
  if (!ReadEvicted()) return false;  // the incident's evictions shape the plan published here
  (void)PublishPlan(unix_ms);
  auto it = steps_.find(step);
  if (it != steps_.end() && it->second->judged) *judged = &*it->second->judged;
  return true;
}

bool CkptRound::NewestStep(int64_t* step) {
  *step = -1;
  redis::Reply newest;
  if (!ctx_->store->Run(schema::NewestSteps(ctx_->keys, 1), &newest).ok()) return false;
  if (newest.size() == 1 && newest[0].is_string()) (void)ParseStep(newest[0].str(), step);
  return true;
}

}  // namespace ft::master
