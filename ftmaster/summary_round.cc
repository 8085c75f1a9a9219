#include "ftmaster/summary_round.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "common/log.h"
#include "ftmaster/core/text.h"
#include "ftmaster/loop_util.h"
#include "proto/codec.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/published.h"

namespace ft::master {

namespace mh = schema::master_hash;
namespace {

// Twice what the straggler detector takes to name a rank: a job-wide view must leave it
// the time to find a culprit first.
JobSlowdownOptions JobSlowOptions(const Config& config) {
  const StragglerOptions s = StragglerOptions::FromConfig(config);
  JobSlowdownOptions o;
  o.settle_ms = std::max<int64_t>(o.settle_ms, 2 * s.steps * s.interval_ms);
  return o;
}

// "1700000000000-straggler-5" -> 1700000000000 (when the episode was named); 0 if not that form.
int64_t NamedAt(const std::string& incident_id) {
  long long at = 0;
  return std::sscanf(incident_id.c_str(), "%lld-straggler-", &at) == 1 && at > 0 ? at : 0;
}

}  // namespace

SummaryRound::SummaryRound(LoopContext* ctx)
    : ctx_(ctx),
      timeouts_(TimeoutOptions::FromConfig(ctx->options.config)),
      stragglers_(StragglerOptions::FromConfig(ctx->options.config)),
      job_slow_(JobSlowOptions(ctx->options.config)),
      policy_(SlowPolicy::FromConfig(ctx->options.config)) {}

void SummaryRound::NewTerm(Clock::time_point now) {
  cursor_.clear();
  passes_ = 0;
  summaries_.Clear();
  timeouts_ = TimeoutModel(TimeoutOptions::FromConfig(ctx_->options.config));
  unpublished_ = false;
  stragglers_ = StragglerDetector(StragglerOptions::FromConfig(ctx_->options.config));
  named_before_.clear();
  straggler_fields_.clear();
  inherited_seen_.clear();
  summary_ms_.clear();
  link_fields_.clear();
  inherited_links_.clear();
  job_slow_ = JobSlowdown(JobSlowOptions(ctx_->options.config));
  named_at_.clear();
  verdicts_.clear();
  evicted_episodes_.clear();
  slow_evictions_.clear();
  measured_recovery_s_.reset();
  eviction_.reset();
  next_round_ = now;
}

void SummaryRound::LoadTerm(const MasterHash& state) {
  for (const auto& [field, value] : state) {
    uint64_t comm = 0;
    if (mh::ParseSlowLink(field, &comm)) {
      link_fields_[comm] = value;
      inherited_links_[comm] = 0;  // dated at this master's first pass
      continue;
    }
    int rank = -1;
    if (mh::ParseStraggler(field, &rank)) {
      straggler_fields_[rank] = value;
      inherited_seen_[rank] = 0;
      if (const int64_t at = NamedAt(value)) named_at_[rank] = at;  // the episode's age goes on
    }
  }
  if (auto it = state.find(mh::kSlowEvictions); it != state.end()) slow_evictions_ = ParseUnixMsList(it->second);
  if (auto it = state.find(mh::kLastRecoveryMs); it != state.end()) {
    const long long ms = std::atoll(it->second.c_str());
    if (ms > 0) measured_recovery_s_ = static_cast<double>(ms) / 1000.0;
  }
}

void SummaryRound::SetMembership(std::span<const proto::Membership> members) {
  stragglers_.SetMembership(members);
  members_.assign(members.begin(), members.end());
}

std::optional<SlowEviction> SummaryRound::TakeEviction() {
  std::optional<SlowEviction> e = std::move(eviction_);
  eviction_.reset();
  return e;
}

void SummaryRound::SlowEvicted(int rank, int64_t unix_ms) {
  slow_evictions_.push_back(unix_ms);
  evicted_episodes_.insert(rank);
}

std::string SummaryRound::SlowEvictionsField(int64_t unix_ms) const {
  // The last day's: enough for any hourly budget, bounded in size.
  std::vector<int64_t> kept;
  for (int64_t at : slow_evictions_) {
    if (at > unix_ms - 24 * 3600 * 1000) kept.push_back(at);
  }
  kept.push_back(unix_ms);
  return UnixMsList(kept);
}

bool SummaryRound::LoadTimeouts() {
  redis::Reply table, version;
  if (!ctx_->store->Run(schema::GetTimeouts(ctx_->keys), &table).ok()) return false;
  if (!ctx_->store->Run(schema::GetTimeoutsVersion(ctx_->keys), &version).ok()) return false;
  if (table.is_string()) {
    proto::TimeoutTable t;
    Status s = proto::Decode(table.str(), &t);
    if (s.ok()) {
      timeouts_.Restore(t);
    } else {
      ctx_->bad.Report("timeouts table", table.str(), s);
    }
  }
  int64_t published_version = 0;
  if (version.ToInt(&published_version) && published_version > 0 &&
      static_cast<uint64_t>(published_version) > timeouts_.table().version) {
    // The table is unreadable (or behind): continue the numbering so workers see a change.
    proto::TimeoutTable t;
    t.version = static_cast<uint64_t>(published_version);
    timeouts_.Restore(t);
  }
  return true;
}

// ---- every summary_period ------------------------------------------------------------------

void SummaryRound::Run(Clock::time_point now, int64_t unix_ms, bool job_stalled) {
  const auto start = Clock::now();
  stragglers_.SetStalled(job_stalled);
  // The summaries in chunks (HSCAN), one per round, each spaced so that the pass takes about
  // 1/kSteadyShare of the master's time (the term's first pass, before any timeouts are
  // published, 1/3): 131k summaries are ~150 MB, and a single HGETALL of them would hold the
  // loop (and the lease) for seconds.
  const double share = passes_ == 0 ? 3 : kSteadyShare;
  // The summaries are spread over the job's groups (proto/keys.h): a pass scans group 0 to
  // the last; a round goes on into the next group while it has read less than a chunk, so a
  // small job's pass still takes one round.
  if (cursor_.empty()) {
    summaries_.BeginPass();
    group_ = 0;
  }
  std::string cursor = cursor_.empty() ? std::string(1, '0') : cursor_;
  size_t read = 0;
  while (true) {
    const std::string key = ctx_->keys.Summaries(group_);
    redis::Reply reply;
    if (!ctx_->store->Run({"HSCAN", key, cursor, "COUNT", kSummaryChunk}, &reply).ok()) {
      cursor_ = cursor;  // this group's scan goes on at the next round
      return;
    }
    if (!reply.is_array() || reply.size() != 2 || !reply[0].is_string()) {
      ctx_->bad.Report(key, reply.DebugString().substr(0, 64),
                  Status::Corrupt("not an HSCAN reply (wrong key type?)"));
      cursor_.clear();
      next_round_ = now + ctx_->options.summary_period;
      return;
    }
    summaries_.LoadPairs(reply[1], &ctx_->bad);
    read += reply[1].size() / 2;
    // Into the models as they come (they keep each rank's newest): no pass end that walks all.
    for (const proto::RankSummary* s : summaries_.ChangedValues()) {
      timeouts_.Add(*s);
      stragglers_.Add(*s);
    }
    if (reply[0].str() != "0") {
      cursor = reply[0].str();
    } else if (group_ + 1 < proto::Keys::kGroups) {
      ++group_;
      cursor.assign(1, '0');  // (not = "0": GCC 12 misreads it, -Wrestrict)
    } else {
      break;  // the pass is complete
    }
    if (read >= static_cast<size_t>(std::atoi(kSummaryChunk))) {
      cursor_ = cursor;
      next_round_ = now + Spacing(ctx_->options.tick, MsSince(start), share);
      return;
    }
  }
  cursor_.clear();
  summaries_.EndPass();
  ++passes_;
  pace_ = PaceOf(members_, summaries_.values(), unix_ms);
  if (timeouts_.Update(unix_ms)) unpublished_ = true;
  if (unpublished_) {
    const proto::TimeoutTable& table = timeouts_.table();
    if (ctx_->writer.Run(schema::PublishTimeouts(ctx_->keys, table))) {
      unpublished_ = false;
      ++ctx_->stats.timeouts_published;
      FT_LOG(Info, Master, "timeouts version {}: default {:.0f} ms, {} entr{}", table.version,
             table.default_ms, table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
    }
  }
  Stragglers(unix_ms);
  if (ctx_->job_state == proto::JobState::kRunning) {
    WeighEpisodes(unix_ms);
    JobWide(unix_ms);
  } else {
    job_slow_.Reset();
  }
  next_round_ = now + Spacing(ctx_->options.summary_period, MsSince(start), share);
}

void SummaryRound::Stragglers(int64_t unix_ms) {
  std::vector<proto::Incident> incidents = stragglers_.Evaluate(unix_ms);
  const std::unordered_set<int>& named = stragglers_.named();
  std::vector<int> ended;
  for (int rank : named_before_) {
    if (named.count(rank)) continue;
    named_at_.erase(rank);  // the episode ended: a new one starts the confirmation again
    verdicts_.erase(rank);
    evicted_episodes_.erase(rank);
    if (!straggler_fields_.count(rank)) continue;
    ended.push_back(rank);
    FT_LOG(Info, Master, "rank {} no longer straggles", rank);
  }
  // Episodes a previous master wrote: over once this master has seen enough summaries of the
  // rank without naming it again.
  if (!inherited_seen_.empty()) {
    for (const proto::RankSummary& s : summaries_.values()) {
      auto it = inherited_seen_.find(s.rank);
      if (it == inherited_seen_.end()) continue;
      int64_t& last = summary_ms_[s.rank];
      if (s.unix_ms > last) {
        last = s.unix_ms;
        ++it->second;
      }
      if (named.count(s.rank)) continue;
      if (it->second > StragglerOptions::FromConfig(ctx_->options.config).steps + 2) {
        ended.push_back(s.rank);
      }
    }
  }
  std::vector<std::string> ended_fields;
  for (int rank : ended) ended_fields.push_back(mh::Straggler(rank));
  if (!ended.empty() && ctx_->writer.Run({mh::Delete(ctx_->keys, std::move(ended_fields))})) {
    for (int rank : ended) {
      straggler_fields_.erase(rank);
      inherited_seen_.erase(rank);
    }
  }
  for (int rank : named) {
    if (inherited_seen_.count(rank)) inherited_seen_.erase(rank);  // confirmed: ours now
  }
  EndLinkEpisodes(unix_ms);
  named_before_ = named;
  for (proto::Incident& incident : incidents) {
    if (incident.suspects.empty()) continue;
    if (hardware_ != nullptr) AttachHardware(std::span<proto::Incident>(&incident, 1), *hardware_, unix_ms);
    if (proto::Is(incident, proto::IncidentKind::kSlowLink)) {
      // Once per episode by the detector (named_links), and the episode is in the master hash:
      // a master that takes over while the link stays slow names it again and writes nothing.
      if (link_fields_.count(incident.comm_id)) continue;
      auto won = ctx_->writer.WriteIncidents({incident}, unix_ms, {}, {{mh::SlowLink(incident.comm_id), incident.id}}, {}, {});
      if (!won) continue;
      link_fields_[incident.comm_id] = incident.id;
      if ((*won)[0]) ctx_->Print(incident, {});
      continue;
    }
    const int rank = incident.suspects.front().rank;
    if (straggler_fields_.count(rank)) continue;  // this episode was written already
    named_at_.try_emplace(rank, unix_ms);
    if (std::optional<SlowCase> slow = MeasureSlow(rank, summaries_.values(), members_)) {
      slow->named_unix_ms = named_at_[rank];
      const SlowVerdict v = DecideSlow(*slow, Context(unix_ms, false), policy_);
      incident.evidence.push_back(v.arithmetic);
      incident.evidence.push_back("where: " + slow->where_why);
      incident.message += fmt::format("; the time goes to {}; {}",
                                      slow->where.empty() ? "its GPU or its host (not sampled)" : slow->where_why, v.why);
      verdicts_[rank] = v.why;
    }
    auto won = ctx_->writer.WriteIncidents({incident}, unix_ms, {}, {},
                              {{mh::Straggler(rank), incident.id}}, {});
    if (!won) continue;
    straggler_fields_[rank] = incident.id;
    if ((*won)[0]) ctx_->Print(incident, {});
  }
}

void SummaryRound::EndLinkEpisodes(int64_t unix_ms) {
  const std::unordered_set<uint64_t>& named = stragglers_.named_links();
  const StragglerOptions options = StragglerOptions::FromConfig(ctx_->options.config);
  // An inherited episode ends once this master has had the time to name the link again
  // (straggler_steps summaries, and two more) and did not.
  const int64_t grace_ms = (options.steps + 2) * options.interval_ms;
  std::vector<std::string> ended;
  std::vector<uint64_t> comms;
  for (const auto& [comm, id] : link_fields_) {
    auto inherited = inherited_links_.find(comm);
    if (named.count(comm)) {
      if (inherited != inherited_links_.end()) inherited_links_.erase(inherited);  // ours now
      continue;
    }
    if (inherited != inherited_links_.end()) {
      if (inherited->second == 0) inherited->second = unix_ms;
      if (unix_ms - inherited->second <= grace_ms) continue;
    }
    ended.push_back(mh::SlowLink(comm));
    comms.push_back(comm);
  }
  if (ended.empty() || !ctx_->writer.Run({mh::Delete(ctx_->keys, std::move(ended))})) return;
  for (uint64_t comm : comms) {
    link_fields_.erase(comm);
    inherited_links_.erase(comm);
    FT_LOG(Info, Master, "comm {} is no longer a slow link", CommHex(comm));
  }
}

SlowContext SummaryRound::Context(int64_t unix_ms, bool read_evicted) {
  SlowContext c;
  c.now_unix_ms = unix_ms;
  c.measured_recovery_s = measured_recovery_s_;
  c.recent_evictions_unix_ms = slow_evictions_;
  c.job_slow = job_slow_.active();
  std::set<std::string> nodes;
  for (const proto::Membership& m : members_) {
    if (proto::Is(m.state, proto::RankState::kRunning) && !m.node.empty()) nodes.insert(m.node);
  }
  c.job_nodes = static_cast<int>(nodes.size());
  redis::Reply evicted;
  if (read_evicted && ctx_->store->Run(schema::GetEvicted(ctx_->keys), &evicted).ok()) {
    for (const std::string& node : schema::DecodeNodes(evicted)) c.evicted_job_nodes += nodes.count(node);
  }
  return c;
}

void SummaryRound::WeighEpisodes(int64_t unix_ms) {
  for (int rank : stragglers_.named()) {
    if (evicted_episodes_.count(rank)) continue;
    std::optional<SlowCase> slow = MeasureSlow(rank, summaries_.values(), members_);
    if (!slow) continue;
    slow->named_unix_ms = named_at_.try_emplace(rank, unix_ms).first->second;
    const bool in_reach = policy_.action == SlowAction::kEvict &&
                          unix_ms - slow->named_unix_ms >= policy_.confirm_ms;
    const SlowVerdict v = DecideSlow(*slow, Context(unix_ms, in_reach), policy_);
    std::string& logged = verdicts_[rank];
    if (v.why != logged) {
      FT_LOG(Info, Master, "rank {} on {} straggles: {}; {}", rank, slow->node, v.arithmetic, v.why);
      logged = v.why;
    }
    if (!v.evict || eviction_) continue;
    SlowEviction e;
    e.rank = rank;
    e.node = slow->node;
    proto::Incident& incident = e.incident;
    incident.kind = proto::IncidentKindName(proto::IncidentKind::kStraggler);
    incident.id = fmt::format("{}-straggler-{}-evict", unix_ms, rank);
    incident.decision = proto::DecisionKindName(proto::DecisionKind::kStop);
    incident.first_event_unix_ms = slow->named_unix_ms;
    incident.decided_unix_ms = unix_ms;
    incident.decide_ms = static_cast<double>(unix_ms - slow->named_unix_ms);
    incident.confidence = 0.9;
    incident.suspects.push_back(proto::Suspect{
        rank, slow->node,
        fmt::format("straggler for {}: compute {:.2f}x its peers' median", HumanMs(incident.decide_ms),
                    slow->median_compute_ms > 0 ? slow->compute_ms / slow->median_compute_ms : 0.0)});
    incident.evidence.push_back(v.arithmetic);
    incident.evidence.push_back("where: " + slow->where_why);
    if (auto it = straggler_fields_.find(rank); it != straggler_fields_.end()) {
      incident.evidence.push_back("named by incident " + it->second);
    }
    incident.message = fmt::format(
        "rank {} ({}) has slowed the job since it was named {} ago: {}. Every rank saves as it is "
        "stopped (FT_CKPT_ON_SIGNAL); relaunch without {}",
        rank, slow->node, HumanMs(incident.decide_ms), v.why, slow->node);
    eviction_ = std::move(e);
  }
}

void SummaryRound::JobWide(int64_t unix_ms) {
  std::set<std::string> nodes;
  std::map<int, std::string> running_on;  // rank -> its node
  for (const proto::Membership& m : members_) {
    if (!proto::Is(m.state, proto::RankState::kRunning)) continue;
    running_on[m.rank] = m.node;
    nodes.insert(m.node);
  }
  const int running = static_cast<int>(running_on.size());
  const bool explained = !stragglers_.named().empty() || !stragglers_.named_links().empty();
  std::map<int, JobSlowdown::Now> now;  // whether a reported slowdown still stands
  for (const proto::RankSummary& s : summaries_.values()) {
    auto on = running_on.find(s.rank);
    now[s.rank] = {s.step_p50_ms, s.slowdown, on != running_on.end() ? on->second : std::string()};
  }
  std::optional<proto::Incident> incident =
      job_slow_.Evaluate(unix_ms, running, static_cast<int>(nodes.size()), explained, now);
  if (!incident) return;
  auto won = ctx_->writer.WriteIncidents({*incident}, unix_ms, {}, {}, {}, {});
  if (won && (*won)[0]) ctx_->Print(*incident, {});
}

}  // namespace ft::master
