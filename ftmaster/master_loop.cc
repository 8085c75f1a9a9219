#include "ftmaster/master_loop.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/report.h"
#include "ftmaster/transfer_secret.h"
#include "proto/codec.h"
#include "proto/notice.h"
#include "proto/master_codec.h"
#include "redis/redis_store.h"
#include "schema/master_hash.h"
#include "schema/published.h"

// The loop's term and tick, and what a membership read means for the jobs (master_loop.h says
// which class does which job).

namespace ft::master {

namespace mh = schema::master_hash;
namespace {

int64_t UnixMsNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

// ---- the loop -------------------------------------------------------------------------------

MasterLoop::MasterLoop(MasterOptions options, redis::Endpoint endpoint)
    : MasterLoop(std::move(options),
                 std::make_unique<redis::RedisStore>(
                     std::move(endpoint),
                     redis::ReconnectPolicy{.connect_timeout = Ms(500),
                                            .io_timeout = Ms(2000),
                                            .log_subsystem = Subsystem::kMaster})) {}

MasterLoop::MasterLoop(MasterOptions options, std::unique_ptr<redis::Store> store)
    : ctx_(std::move(options), std::move(store)),
      membership_(&ctx_),
      ckpt_(&ctx_, &membership_),
      actions_(&ctx_, &membership_, &ckpt_),
      window_(&ctx_, &membership_),
      summary_(&ctx_),
      history_(&ctx_),
      cordons_(&ctx_),
      goodput_(&ctx_, &membership_, &window_, &summary_, &actions_) {
  membership_.OnRead([this] { OnRanksRead(); });
  window_.OnSlowdown([this](const proto::Event& e, int64_t unix_ms) { summary_.AddSlowdown(e, unix_ms); });
  summary_.SetHardware(&window_.hardware());
  ckpt_.SetHardware(&window_.hardware());
}

Status MasterLoop::Init() { return membership_.Init(); }

void MasterLoop::Tick() { Tick(Clock::now(), UnixMsNow()); }

void MasterLoop::Tick(Clock::time_point now, int64_t unix_ms) {
  tick_unix_ms_ = unix_ms;
  redis::Store& store = *ctx_.store;
  ++ctx_.stats.ticks;
  ctx_.tick_started = Clock::now();
  if (!store.Ensure(now)) {
    if (leading_ && !ctx_.lease.leading(now)) {
      FT_LOG(Warn, Master, "Redis unreachable past the lease: not acting until it is back");
      leading_ = false;
    }
    return;
  }
  const bool lead = ctx_.lease.Tick(store, now);
  if (!lead) {
    if (leading_) FT_LOG(Warn, Master, "not leading any more: every action stops here");
    leading_ = false;
    if (now >= next_state_poll_ && store.connected()) {
      redis::Reply reply;
      if (store.Run(mh::Get(ctx_.keys, mh::kJobState), &reply).ok() &&
          reply.is_string()) {
        ctx_.job_state = ReadJobState(reply.str(), &ctx_.bad);
      }
      next_state_poll_ = now + kStatePoll;
    }
    return;
  }
  if (!leading_ || ctx_.lease.term() != term_) {
    StartTerm(now, unix_ms);
    if (!term_loaded_) return;  // Redis failed while loading: again next tick
    term_ = ctx_.lease.term();
  }
  leading_ = true;
  if (ctx_.job_state && proto::JobEnded(*ctx_.job_state) && store.connected()) {
    // An ended job is checked for a relaunch at every tick, before its events: the new run's
    // first crash (seconds in) must find it running again, not be ignored as the old run's.
    // While the membership does not move this is one GET of ranks:version.
    membership_.ReadSoon(now);
    (void)membership_.Read(now, false);
  }
  if (!membership_.loaded()) {
    // A new master's first events may be a backlog that the workers flushed after an outage,
    // ends of processes that a relaunch has already replaced: judged before the membership that
    // shows the relaunch, such an end is a crash of the running job and its stop hits the
    // relaunch. So the events wait until the membership was read once (HSCAN chunks: a tick or
    // a few).
    membership_.ReadSoon(now);
    (void)membership_.Read(now, false);
    if (!membership_.loaded()) return;
  }
  const uint64_t ends_before = ctx_.rank_ends_version;
  window_.ReadEvents(now, unix_ms);
  if (!store.connected()) return;
  // A rank ended: whether its peers are still being stopped shapes the plan (ckpt_round.h).
  if (ctx_.rank_ends_version != ends_before) membership_.ReadSoon(now);
  window_.Notice(now);
  if (window_.open()) {
    if (std::optional<WindowAction> decided = window_.Step(now, unix_ms)) {
      TakeAction(std::move(*decided), window_.members_at_open());
    }
  }
  window_.Notice(now);
  if (actions_.active() && store.connected()) actions_.Run(now, unix_ms);
  if (summary_.Due(now) && store.connected()) summary_.Run(now, unix_ms, window_.open());
  if (std::optional<SlowEviction> slow = summary_.TakeEviction()) {
    // Only a running job with nothing else under way; otherwise the next pass weighs it again.
    if (ctx_.job_state == proto::JobState::kRunning && !actions_.active() && !window_.open() && store.connected()) {
      StopForSlowness(std::move(*slow), unix_ms);
    }
  }
  if (ckpt_.Due(now) && store.connected()) ckpt_.Run(now, unix_ms);
  if (ctx_.job_state == proto::JobState::kRunning && !actions_.active() && store.connected()) {
    if (std::optional<proto::Incident> mismatch = ckpt_.TakeRestoreMismatch(unix_ms)) StopForRestoreMismatch(*mismatch);
  }
  if (!window_.open() && membership_.Due(now) && store.connected()) (void)membership_.Read(now, false);
  if (now >= next_secret_check_ && store.connected()) EnsureTransferSecret(now);
  if (history_.Due(now) && store.connected()) history_.Run(now, unix_ms);
  if (cordons_.Due(now) && store.connected()) cordons_.Run(now, unix_ms);
  if (store.connected()) goodput_.Tick(unix_ms);
}

void MasterLoop::Run(const std::atomic<bool>& stop, bool exit_when_stopped) {
  FT_LOG(Info, Master, "ftmaster '{}' for job {} (Redis {}), lease {} ms", ctx_.lease.id(),
         ctx_.options.job, ctx_.store->Where(), ctx_.lease.lease().count());
  auto next = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    Tick();
    if (exit_when_stopped && ctx_.job_state && proto::JobEnded(*ctx_.job_state)) {
      FT_LOG(Info, Master, "job {} is {}; exiting (--exit-when-stopped)", ctx_.options.job,
             JobStateText(ctx_.job_state));
      break;
    }
    next += ctx_.options.tick;
    auto now = Clock::now();
    if (next < now) next = now;
    std::this_thread::sleep_until(next);
  }
  Release();
}

void MasterLoop::Release() {
  if (ctx_.store->connected()) ctx_.lease.Release(*ctx_.store);
  leading_ = false;
}

void MasterLoop::StartTerm(Clock::time_point now, int64_t unix_ms) {
  term_loaded_ = false;
  window_.NewTerm(now);
  membership_.NewTerm(now);
  summary_.NewTerm(now);
  actions_.NewTerm(now);
  ckpt_.NewTerm(now);
  history_.NewTerm(now);
  cordons_.NewTerm(now);
  ranks_version_seen_ = 0;

  redis::Reply hash;
  if (!ctx_.store->Run(mh::GetAll(ctx_.keys), &hash).ok()) return;
  MasterHash state;
  if (Status s = mh::DecodeAll(hash, &state); !s.ok()) ctx_.bad.Report(ctx_.keys.MasterState(), "", s);
  // None or an unknown one (reported): the job is watched from here.
  ctx_.job_state = ReadJobState(state.count(mh::kJobState) ? state[mh::kJobState] : "", &ctx_.bad);
  if (!ctx_.job_state) {
    if (!ctx_.writer.Run({mh::SetJobState(ctx_.keys, proto::JobState::kRunning)})) {
      return;
    }
    ctx_.job_state = proto::JobState::kRunning;
  }
  if (!membership_.LoadTerm(state)) return;
  summary_.LoadTerm(state);
  actions_.LoadTerm(state);
  history_.LoadTerm(state);
  goodput_.LoadTerm(state);
  if (!window_.LoadTerm(state, unix_ms)) return;
  if (!summary_.LoadTimeouts()) return;

  EnsureTransferSecret(now);  // not a condition of the term: a failure is retried at the next check
  term_loaded_ = true;
  FT_LOG(Info, Master, "state loaded: job {}, events after {}, timeouts version {}{}{}",
         JobStateText(ctx_.job_state), window_.cursor().empty() ? "the start" : window_.cursor(), summary_.timeouts_version(),
         window_.open() ? ", an incident window open" : "",
         actions_.active() ? ", an action in progress" : "");
}

void MasterLoop::StopForRestoreMismatch(const proto::Incident& incident) {
  Action stop;
  stop.incident = incident.id;
  stop.decision = proto::DecisionKind::kStop;
  stop.phase = proto::ActionPhase::kStop;
  stop.decided_unix_ms = incident.decided_unix_ms;
  auto won = ctx_.writer.WriteIncidents({incident}, incident.decided_unix_ms, {},
                                        {{"action", proto::Encode(stop)},
                                         {"job_state", proto::JobStateName(proto::JobState::kStopping)}},
                                        {}, {});
  if (!won) return;  // fenced out or Redis failed: the next look finds the mismatch again
  if ((*won)[0]) ctx_.Print(incident, {});
  TakeAction(WindowAction{std::move(stop), (*won)[0]}, {});
}

void MasterLoop::StopForSlowness(SlowEviction slow, int64_t unix_ms) {
  // The stop command SIGTERMs every rank: each saves the step it was finishing (a termination
  // save, as on a preemption), the plan takes the newest step every shard has, and the
  // relaunch without the evicted node restores it.
  Action stop;
  stop.incident = slow.incident.id;
  stop.decision = proto::DecisionKind::kStop;
  stop.phase = proto::ActionPhase::kStop;
  stop.decided_unix_ms = unix_ms;
  const std::string why = fmt::format("fail-slow: rank {} straggles ({})", slow.rank, slow.incident.id);
  slow.incident.evicted = {{slow.node, why}};
  auto won = ctx_.writer.WriteIncidents({slow.incident}, unix_ms, {slow.node},
                                        {{mh::kAction, proto::Encode(stop)},
                                         {mh::kJobState, proto::JobStateName(proto::JobState::kStopping)},
                                         {mh::kSlowEvictions, summary_.SlowEvictionsField(unix_ms)},
                                         {mh::EvictedWhy(slow.node), why}},
                                        {}, {});
  if (!won) return;  // fenced out or Redis failed: the next pass weighs the rank again
  summary_.SlowEvicted(slow.rank, unix_ms);
  if ((*won)[0]) ctx_.Print(slow.incident, {slow.node});
  FT_LOG(Info, Master, "incident {}: stopping the job to replace {} (rank {} straggles)", slow.incident.id,
         slow.node, slow.rank);
  TakeAction(WindowAction{std::move(stop), (*won)[0]}, {});
}

void MasterLoop::TakeAction(WindowAction decided, std::vector<proto::Membership> decided_for) {
  if (decided.ours) {
    actions_.Start(std::move(decided.action), std::move(decided_for));
    ctx_.job_state = proto::JobState::kStopping;
    return;
  }
  // Another master decided this window first: carry out what it stored.
  actions_.LoadStored();
  redis::Reply state;
  if (ctx_.store->Run(mh::Get(ctx_.keys, mh::kJobState), &state).ok() && state.is_string()) {
    ctx_.job_state = ReadJobState(state.str(), &ctx_.bad);
  }
}

void MasterLoop::OnRanksRead() {
  if (membership_.version() != ranks_version_seen_) {
    ranks_version_seen_ = membership_.version();
    const std::vector<proto::Membership>& members = membership_.values();
    summary_.SetMembership(members);
    all_exited_ = !members.empty();
    for (const proto::Membership& m : members) all_exited_ = all_exited_ && proto::Is(m.state, proto::RankState::kExited);
    // The topology while the ranks run, so that it is known (and kept) once they have left.
    if (!membership_.has_explicit()) (void)membership_.CurrentTopology();
    // A stopped or finished job launched again (new processes) is watched again.
    const std::optional<proto::JobState> job_state = ctx_.job_state;
    const bool finished = job_state == proto::JobState::kFinished;
    const std::optional<Action>& action = actions_.action();
    if ((job_state == proto::JobState::kStopped && action) || finished) {
      for (const proto::Membership& m : members) {
        if (proto::Is(m.state, proto::RankState::kRunning) && (finished || actions_.StartedAfterDecision(m))) {
          // The finished action goes (its outcome stays in `checkpoint:<incident>`), so the
          // new run is watched and decided like a first one.
          // The job's recovery, as the slow policy weighs it: the stop decided → running again.
          const int64_t recovery_ms = action ? tick_unix_ms_ - action->decided_unix_ms : 0;
          std::vector<redis::Argv> writes = {mh::SetJobState(ctx_.keys, proto::JobState::kRunning),
                                             mh::Delete(ctx_.keys, {mh::kAction})};
          if (recovery_ms > 0) writes.push_back(mh::Set(ctx_.keys, {{mh::kLastRecoveryMs, std::to_string(recovery_ms)}}));
          if (ctx_.writer.Run(writes)) {
            if (recovery_ms > 0) summary_.SetMeasuredRecovery(static_cast<double>(recovery_ms) / 1000.0);
            ctx_.job_state = proto::JobState::kRunning;
            actions_.Drop();
            window_.ForgetProgress();
            FT_LOG(Info, Master, "rank {} on {} (a new incarnation) started after the job was {}: "
                   "watching the job again", m.rank, m.node, JobStateText(job_state));
          }
          break;
        }
      }
    }
  }
  MaybeFinish();
}

void MasterLoop::MaybeFinish() {
  if (!all_exited_ || ctx_.job_state != proto::JobState::kRunning || window_.open()) return;
  if (actions_.active()) return;
  if (!ctx_.writer.Run({mh::SetJobState(ctx_.keys, proto::JobState::kFinished)})) {
    return;
  }
  ctx_.job_state = proto::JobState::kFinished;
  FT_LOG(Info, Master, "job {} finished: all {} ranks exited cleanly; topology {}", ctx_.options.job,
         membership_.values().size(), membership_.CurrentTopology().Describe());
  // Its checkpoints are of a finished run: a launch after it restores none of them but a copy of
  // the step it ended at. Every copy its ranks saved is older than their exits' reports (or,
  // without their times, than now).
  // The step it ended at: the ranks' last ft_step_done (the newest, should they differ).
  int64_t last_exit_ms = 0, end_step = -1;
  for (const proto::Membership& m : membership_.values()) {
    last_exit_ms = std::max(last_exit_ms, m.unix_ms);
    end_step = std::max(end_step, m.step);
  }
  ckpt_.NoteFinished(last_exit_ms > 0 ? last_exit_ms : tick_unix_ms_, end_step);
}

void MasterLoop::EnsureTransferSecret(Clock::time_point now) {
  next_secret_check_ = now + kSecretCheck;
  const std::string key = ctx_.keys.TransferSecret();
  // STRLEN, not GET: the value never needs to pass through the master once it is there.
  redis::Reply length;
  if (!ctx_.store->Run(schema::TransferSecretLength(ctx_.keys), &length).ok()) return;
  if (length.integer() > 0) {
    if (!secret_seen_ && length.integer() != static_cast<int64_t>(2 * kTransferSecretBytes)) {
      FT_LOG(Warn, Master, "{} holds {} bytes, not a {}-hex-character secret: workers use it as it is; "
             "DEL it and the leading master creates a proper one", key, length.integer(),
             2 * kTransferSecretBytes);
    }
    secret_seen_ = true;
    return;
  }
  std::string secret;
  Status s = NewTransferSecret(&secret);
  if (!s.ok()) {
    FT_LOG(Error, Master, "cannot create the job's transfer secret: {}; peers cannot authenticate "
           "(checkpoint pulls fall back to the remote directory) until it exists; retrying in {} s",
           s.ToString(), kSecretCheck.count() / 1000);
    return;
  }
  // The notice goes out either way: had another writer raced us, workers read its secret.
  const bool written = ctx_.writer.Run(schema::PublishTransferSecret(ctx_.keys, secret));
  std::fill(secret.begin(), secret.end(), '\0');
  if (!written) return;
  // SET NX inside the fenced script: had another writer raced us, its secret stands and ours
  // is dropped. Logged by key, never by value.
  if (secret_seen_) {
    FT_LOG(Warn, Master, "the job's transfer secret was gone from Redis (flushed, or restarted without "
           "persistence): a new one is in {}; workers holding the old one must read it again", key);
  } else {
    FT_LOG(Info, Master, "the job's transfer secret is in {} (created if absent; its value is never printed)",
           key);
  }
  secret_seen_ = true;
}

}  // namespace ft::master
