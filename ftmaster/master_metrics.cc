#include "ftmaster/master_metrics.h"

#include <chrono>

#include <fmt/format.h>

#include "common/log.h"
#include "ftmaster/core/goodput.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "proto/codec.h"
#include "redis/client.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/streams.h"
#include "schema/verdict_hash.h"

namespace ft::master {

namespace {

using metrics::Kind;

constexpr const char* kLeader = "ft_master_leader";
constexpr const char* kRedisUp = "ft_master_redis_up";
constexpr const char* kRedisRtt = "ft_master_redis_rtt_seconds";
constexpr const char* kIncidents = "ft_master_incidents_total";
constexpr const char* kDetect = "ft_master_incident_detect_seconds";
constexpr const char* kDecide = "ft_master_incident_decide_seconds";
constexpr const char* kJobState = "ft_master_job_state";
constexpr const char* kTimeoutsVersion = "ft_master_timeouts_version";
constexpr const char* kVerdicts = "ft_master_ckpt_verdicts_total";
constexpr const char* kSteps = "ft_master_ckpt_steps";
constexpr const char* kVerifiedStep = "ft_master_ckpt_verified_step";
constexpr const char* kEvicted = "ft_master_evicted_nodes";
constexpr const char* kGoodputRatio = "ft_master_goodput_ratio";
constexpr const char* kGoodputSeconds = "ft_master_goodput_rank_seconds";

const std::vector<double> kSecondsBuckets = {0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300};

void Must(Status s) {
  if (!s.ok()) FT_LOG(Error, Master, "metrics: {} (a bug in ft)", s.ToString());
}

}  // namespace

MasterMetrics::MasterMetrics(MasterMetricsOptions options, metrics::Registry* registry)
    : options_(std::move(options)),
      keys_(options_.job),
      registry_(registry),
      poller_(options_.endpoint, options_.interval, [this](redis::Commands* redis) { Poll(redis); }) {
  Must(registry_->Declare(kLeader, Kind::kGauge, "1 while this master holds the job's leader lease.", {"job", "node"}));
  Must(registry_->Declare(kRedisUp, Kind::kGauge, "1 while this master's metrics connection reaches Redis.", {"job", "node"}));
  Must(registry_->Declare(kRedisRtt, Kind::kGauge, "Round trip of a PING to the job's Redis, seconds.", {"job", "node"}));
  Must(registry_->Declare(kIncidents, Kind::kCounter, "Incidents decided for the job (ft:{J}:incidents), by kind and decision.",
                          {"job", "kind", "decision"}));
  Must(registry_->Declare(kDetect, Kind::kHistogram, "First event of an incident to its window closing (evidence gathered), seconds.",
                          {"job", "kind"}, kSecondsBuckets));
  Must(registry_->Declare(kDecide, Kind::kHistogram, "First event of an incident to its decision, seconds.", {"job", "kind"},
                          kSecondsBuckets));
  Must(registry_->Declare(kJobState, Kind::kGauge, "1 for the job's state (running, stopping, stopped, finished).",
                          {"job", "state"}));
  Must(registry_->Declare(kTimeoutsVersion, Kind::kGauge, "Version of the adaptive timeout table published to the workers.",
                          {"job"}));
  Must(registry_->Declare(kVerdicts, Kind::kCounter, "Checkpoint steps judged, by verdict (verified, untrusted, incomplete).",
                          {"job", "state"}));
  Must(registry_->Declare(kSteps, Kind::kGauge, "Checkpoint steps whose current verdict is this state.", {"job", "state"}));
  Must(registry_->Declare(kVerifiedStep, Kind::kGauge, "The newest verified checkpoint step (-1: none).", {"job"}));
  Must(registry_->Declare(kEvicted, Kind::kGauge, "Nodes in the job's eviction set.", {"job"}));
  Must(registry_->Declare(kGoodputRatio, Kind::kGauge,
                          "Effective training time ratio (ETTR): productive rank-seconds over all the job held.", {"job"}));
  // A gauge, not a counter: a fault seen late moves time already counted productive to detection.
  Must(registry_->Declare(kGoodputSeconds, Kind::kGauge,
                          "The job's rank-seconds by cause: productive, or lost (startup, detection, save-stop, relaunch, "
                          "redone, slowed, idle).",
                          {"job", "cause"}));
}

MasterMetrics::~MasterMetrics() { Stop(); }

void MasterMetrics::Poll(redis::Commands* redis) {
  bool up = redis != nullptr;
  double rtt_s = -1;
  if (up) {
    redis::Reply pong;
    const auto t0 = std::chrono::steady_clock::now();
    up = redis->Run({"PING"}, &pong).ok();
    rtt_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (up) up = Round(*redis, rtt_s);
  (void)registry_->Set(kRedisUp, {options_.job, options_.node}, up ? 1 : 0);
}

bool MasterMetrics::Round(redis::Commands& redis, double rtt_s) {
  const metrics::LabelValues own = {options_.job, options_.node};
  if (rtt_s >= 0) (void)registry_->Set(kRedisRtt, own, rtt_s);
  std::vector<redis::Reply> replies;
  Status s = redis.PipelinePartial({schema::GetLeader(keys_),
                                    schema::master_hash::Get(keys_, schema::master_hash::kJobState),
                                    schema::GetTimeoutsVersion(keys_),
                                    schema::GetEvicted(keys_),
                                    schema::master_hash::Get(keys_, schema::master_hash::kGoodput)},
                                   &replies);
  if (!s.ok() || replies.size() != 5) return false;
  (void)registry_->Set(kLeader, own,
                       replies[0].is_string() && replies[0].str() == options_.master_id ? 1 : 0);
  // Absent or garbled (reported once): no state's gauge is 1.
  const std::optional<proto::JobState> state = ReadJobState(replies[1].is_string() ? replies[1].str() : "", &bad_);
  if (state != job_state_) {
    if (job_state_) (void)registry_->Set(kJobState, {options_.job, proto::JobStateName(*job_state_)}, 0);
    if (state) (void)registry_->Set(kJobState, {options_.job, proto::JobStateName(*state)}, 1);
    job_state_ = state;
  }
  int64_t version = 0;
  if (replies[2].is_string() && ParseInt(replies[2].str(), &version).ok()) {
    (void)registry_->Set(kTimeoutsVersion, {options_.job}, static_cast<double>(version));
  }
  if (replies[3].is_array()) {
    (void)registry_->Set(kEvicted, {options_.job}, static_cast<double>(replies[3].size()));
  }
  if (replies[4].is_string()) SetGoodput(replies[4].str());
  return ReadIncidents(redis) && ReadVerdicts(redis);
}

void MasterMetrics::SetGoodput(const std::string& raw) {
  proto::Goodput g;
  Status s = proto::Decode(raw, &g);
  if (!s.ok()) {
    bad_.Report("master goodput", raw, s);
    return;
  }
  const GoodputLedger ledger(g);
  (void)registry_->Set(kGoodputRatio, {options_.job}, ledger.Ettr());
  for (proto::GoodputCause c : proto::kGoodputCauses) {
    (void)registry_->Set(kGoodputSeconds, {options_.job, proto::GoodputCauseName(c)}, g.rank_s[static_cast<size_t>(c)]);
  }
}

bool MasterMetrics::ReadIncidents(redis::Commands& redis) {
  for (;;) {
    schema::StreamRead<proto::Incident> read;
    if (!schema::ReadStream(redis, schema::After(keys_.Incidents(), incident_cursor_, 1000), &read).ok()) {
      return false;
    }
    for (const schema::Entry<proto::Incident>& e : read.entries) {
      incident_cursor_ = e.id;
      if (!e.ok()) {
        bad_.Report(fmt::format("incident {}", e.id), e.RawJson(), e.why);
        continue;
      }
      const proto::Incident& incident = e.value;
      (void)registry_->Add(kIncidents, {options_.job, incident.kind, incident.decision}, 1);
      if (incident.first_event_unix_ms > 0 && incident.window_closed_unix_ms >= incident.first_event_unix_ms) {
        (void)registry_->Observe(kDetect, {options_.job, incident.kind},
                                 static_cast<double>(incident.window_closed_unix_ms - incident.first_event_unix_ms) / 1e3);
      }
      if (incident.decide_ms >= 0) {
        (void)registry_->Observe(kDecide, {options_.job, incident.kind}, incident.decide_ms / 1e3);
      }
    }
    if (read.entries.size() + read.malformed < 1000) return true;
  }
}

bool MasterMetrics::ReadVerdicts(redis::Commands& redis) {
  redis::Reply reply;
  if (!redis.Run(schema::GetVerdicts(keys_), &reply).ok()) return false;
  std::vector<schema::HashValue<proto::StepVerdict>> verdicts;
  if (Status s = schema::DecodeVerdicts(reply, &verdicts); !s.ok()) bad_.Report(keys_.CkptVerdicts(), "", s);
  std::map<int64_t, std::string> now;
  for (const auto& v : verdicts) {
    if (!v.ok()) {
      bad_.Report("verdict " + v.field, v.raw, v.why);
      continue;
    }
    now[v.value.step] = proto::VerdictStateName(v.value.state);
  }
  std::map<std::string, int> steps;
  for (proto::VerdictState state : proto::kVerdictStates) steps[proto::VerdictStateName(state)] = 0;
  int64_t newest_verified = -1;
  for (const auto& [step, state] : now) {
    ++steps[state];
    if (state == proto::VerdictStateName(proto::VerdictState::kVerified)) newest_verified = std::max(newest_verified, step);
    auto it = verdicts_.find(step);
    // A new verdict, or a step judged again into another state, counts once more.
    if (it == verdicts_.end() || it->second != state) (void)registry_->Add(kVerdicts, {options_.job, state}, 1);
  }
  verdicts_ = std::move(now);
  for (const auto& [state, count] : steps) (void)registry_->Set(kSteps, {options_.job, state}, count);
  (void)registry_->Set(kVerifiedStep, {options_.job}, static_cast<double>(newest_verified));
  return true;
}

}  // namespace ft::master
