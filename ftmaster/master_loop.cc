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

// The loop's term and tick. Its other jobs, each in its own file: events and the incident
// window (incident_window.cc), carrying out a decision (action_runner.cc), timeouts and
// stragglers (summary_round.cc), fenced writes (fenced_writer.h).

namespace ft::master {
namespace {

int64_t UnixMsNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

std::string DefaultMasterId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host, getpid(), rd());
}

// ---- the loop -------------------------------------------------------------------------------

MasterLoop::MasterLoop(MasterOptions options, redis::Endpoint endpoint)
    : MasterLoop(std::move(options),
                 std::make_unique<redis::RedisStore>(
                     std::move(endpoint),
                     redis::ReconnectPolicy{.connect_timeout = Ms(500),
                                            .io_timeout = Ms(2000),
                                            .log_subsystem = Subsystem::kMaster})) {}

MasterLoop::MasterLoop(MasterOptions options, std::unique_ptr<redis::Store> store)
    : options_(std::move(options)),
      keys_(options_.job),
      store_(std::move(store)),
      lease_(keys_.Leader(), options_.id.empty() ? DefaultMasterId() : options_.id,
             Ms(std::max<int64_t>(ToMs(options_.config.lease), 30))),
      writer_(store_.get(), &keys_, lease_.id(), std::addressof(stats_.fenced_out)),  // kept, read later (clang: &stats_.x is a use)
      timeouts_(TimeoutOptions::FromConfig(options_.config)),
      stragglers_(StragglerOptions::FromConfig(options_.config)) {}

Status MasterLoop::Init() {
  if (!options_.topology.empty()) {
    FT_RETURN_IF_ERROR(Topology::Parse(options_.topology, options_.order, 0, &explicit_topology_));
    have_explicit_ = true;
  } else if (!options_.order.empty()) {
    return Status::InvalidArgument("--order needs --topology");
  }
  return Status::Ok();
}

void MasterLoop::Tick() { Tick(Clock::now(), UnixMsNow()); }

void MasterLoop::Tick(Clock::time_point now, int64_t unix_ms) {
  ++stats_.ticks;
  tick_started_ = Clock::now();
  if (!store_->Ensure(now)) {
    if (leading_ && !lease_.leading(now)) {
      FT_LOG(Warn, Master, "Redis unreachable past the lease: not acting until it is back");
      leading_ = false;
    }
    return;
  }
  const bool lead = lease_.Tick(*store_, now);
  if (!lead) {
    if (leading_) FT_LOG(Warn, Master, "not leading any more: every action stops here");
    leading_ = false;
    if (now >= next_state_poll_ && store_->connected()) {
      redis::Reply reply;
      if (store_->Run({"HGET", keys_.MasterState(), "job_state"}, &reply).ok() &&
          reply.is_string()) {
        job_state_ = reply.str();
      }
      next_state_poll_ = now + kStatePoll;
    }
    return;
  }
  if (!leading_ || lease_.term() != term_) {
    StartTerm(now, unix_ms);
    if (!term_loaded_) return;  // Redis failed while loading: again next tick
    term_ = lease_.term();
  }
  leading_ = true;
  ReadEvents(now, unix_ms);
  if (!store_->connected()) return;
  NoticeWindow(now);
  if (open_.open) CollectAndMaybeDecide(now, unix_ms);
  NoticeWindow(now);
  if (action_ && action_->phase != "done" && store_->connected()) RunAction(now, unix_ms);
  if (now >= next_summary_ && store_->connected()) SummaryRound(now, unix_ms);
  if (now >= next_ckpt_ && store_->connected()) CkptRound(now, unix_ms);
  if (!open_.open && now >= next_ranks_ && store_->connected()) (void)ReadRanks(now);
  if (now >= next_secret_check_ && store_->connected()) EnsureTransferSecret(now);
}

void MasterLoop::Run(const std::atomic<bool>& stop, bool exit_when_stopped) {
  FT_LOG(Info, Master, "ftmaster '{}' for job {} (Redis {}), lease {} ms", lease_.id(),
         options_.job, store_->Where(), lease_.lease().count());
  auto next = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    Tick();
    if (exit_when_stopped && (job_state_ == "stopped" || job_state_ == "finished")) {
      FT_LOG(Info, Master, "job {} is {}; exiting (--exit-when-stopped)", options_.job, job_state_);
      break;
    }
    next += options_.tick;
    auto now = Clock::now();
    if (next < now) next = now;
    std::this_thread::sleep_until(next);
  }
  Release();
}

void MasterLoop::Release() {
  if (store_->connected()) lease_.Release(*store_);
  leading_ = false;
}

void MasterLoop::StartTerm(Clock::time_point now, int64_t unix_ms) {
  term_loaded_ = false;
  open_ = IncidentWindow{};
  progress_.Clear();
  // ranks_ stays: ReadRanks re-reads it when ranks:version moved (a re-read of 131k members
  // at every new term would hold the loop for longer than a lease).
  summary_cursor_.clear();
  summary_passes_ = 0;
  summaries_.Clear();  // the models start empty: the first pass gives them every summary
  ranks_cursor_.clear();
  action_.reset();
  pending_acks_.clear();
  copies_deadline_.reset();
  ckpt_.clear();
  ckpt_topology_.clear();
  sdc_reported_.clear();
  plan_loaded_ = false;
  evicted_ = EvictedNodes{};
  pending_loaded_ = false;
  cursor_.clear();
  timeouts_ = TimeoutModel(TimeoutOptions::FromConfig(options_.config));
  unpublished_ = false;
  stragglers_ = StragglerDetector(StragglerOptions::FromConfig(options_.config));
  ranks_version_seen_ = 0;
  named_before_.clear();
  straggler_fields_.clear();
  inherited_seen_.clear();
  summary_ms_.clear();
  redis::Store& c = *store_;

  redis::Reply hash;
  if (!c.Run({"HGETALL", keys_.MasterState()}, &hash).ok()) return;
  std::unordered_map<std::string, std::string> state;
  if (hash.is_array()) {
    for (size_t i = 0; i + 1 < hash.size(); i += 2) state[hash[i].str()] = hash[i + 1].str();
  }
  job_state_ = state.count("job_state") ? state["job_state"] : "";
  if (job_state_ != "running" && job_state_ != "stopping" && job_state_ != "stopped" &&
      job_state_ != "finished") {
    if (!job_state_.empty()) {
      bad_.Report("master job_state", job_state_, Status::Corrupt("unknown job state"));
    }
    if (!writer_.Run({{"HSET", keys_.MasterState(), "job_state", "running"}})) return;
    job_state_ = "running";
  }
  // The topology this leader decides with, for `ftmaster status` (which has no --topology of
  // its own to go by); an inferred one is recomputed by every reader from the membership.
  if (have_explicit_ && (state["topology"] != options_.topology || state["order"] != options_.order)) {
    if (!writer_.Run({{"HSET", keys_.MasterState(), "topology", options_.topology, "order", options_.order}})) return;
  }
  last_inferred_.reset();
  inferred_.reset();
  if (!have_explicit_ && state.count("inferred_topology")) {
    Topology t;
    Status s = Topology::Parse(state["inferred_topology"], state["inferred_order"], 0, &t);
    if (s.ok()) {
      last_inferred_ = Topology::Kept(t, "inferred while the ranks ran");
    } else {
      bad_.Report("master inferred_topology", state["inferred_topology"], s);
    }
  }
  if (state.count("events_cursor")) {
    uint64_t ms = 0, seq = 0;
    if (ParseStreamId(state["events_cursor"], &ms, &seq)) {
      cursor_ = state["events_cursor"];
    } else {
      bad_.Report("master events_cursor", state["events_cursor"],
                  Status::Corrupt("not a stream id; reading the events from the start"));
    }
  }
  for (const auto& [field, value] : state) {
    if (field.rfind("straggler:", 0) != 0) continue;
    int rank = -1;
    if (std::sscanf(field.c_str() + 10, "%d", &rank) == 1 && rank >= 0) {
      straggler_fields_[rank] = value;
      inherited_seen_[rank] = 0;
    }
  }
  if (state.count("action")) {
    Action a;
    Status s = proto::Decode(state["action"], &a);
    if (s.ok()) {
      if (a.phase != "done") {
        FT_LOG(Info, Master, "resuming the {} of incident {} (phase {}{})", a.decision, a.incident,
               a.phase, a.sent ? ", commands sent" : "");
      }
      action_ = std::move(a);
    } else {
      bad_.Report("master action", state["action"], s);
    }
  }
  if (state.count("open_incident")) {
    proto::OpenIncident persisted;
    Status s = proto::Decode(state["open_incident"], &persisted);
    if (s.ok()) {
      IncidentWindow o = IncidentWindow::Continued(persisted, unix_ms);
      // The window's events again: from its first event up to the cursor.
      redis::Reply reply;
      if (!c.Run({"XRANGE", keys_.Events(), o.first_event_id, cursor_.empty() ? "+" : cursor_,
                  "COUNT", std::to_string(IncidentWindow::kMaxEvents)},
                 &reply).ok()) {
        return;
      }
      std::vector<StreamEntry> entries;
      ParseStream(reply, &entries);
      for (const StreamEntry& e : entries) {
        proto::Event event;
        if (!DecodeEventEntry(e, &event).ok() || !CollectedInWindow(event.kind)) continue;
        o.Add(std::move(event));
      }
      open_ = std::move(o);
      FT_LOG(Info, Master, "continuing the incident window opened at event {} ({} events so "
             "far){}", open_.first_event_id, open_.events.size(),
             open_.watching ? ", watching a busy rank" : "");
    } else {
      bad_.Report("master open_incident", state["open_incident"],
                  s.WithContext("unreadable; the window is dropped and events decide anew"));
      if (!writer_.Run({{"HDEL", keys_.MasterState(), "open_incident"}})) return;
    }
  }

  // The published timeouts stand until the data moves them.
  redis::Reply table, version;
  if (!c.Run({"GET", keys_.Timeouts()}, &table).ok()) return;
  if (!c.Run({"GET", keys_.TimeoutsVersion()}, &version).ok()) return;
  if (table.is_string()) {
    proto::TimeoutTable t;
    Status s = proto::Decode(table.str(), &t);
    if (s.ok()) {
      timeouts_.Restore(t);
    } else {
      bad_.Report("timeouts table", table.str(), s);
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

  EnsureTransferSecret(now);  // not a condition of the term: a failure is retried at the next check
  next_progress_ = next_ranks_ = next_summary_ = next_acks_ = next_ckpt_ = now;
  term_loaded_ = true;
  FT_LOG(Info, Master, "state loaded: job {}, events after {}, timeouts version {}{}{}",
         job_state_, cursor_.empty() ? "the start" : cursor_, timeouts_.table().version,
         open_.open ? ", an incident window open" : "",
         action_ && action_->phase != "done" ? ", an action in progress" : "");
}

void MasterLoop::NoticeWindow(Clock::time_point now) {
  if (open_.open && membership_of_window_ != open_.first_event_id) return;  // members not read yet
  const std::optional<proto::RankRanges> ranks =
      open_.open ? WindowNoticeRanks() : std::optional<proto::RankRanges>();
  const std::string ranks_text = ranks ? ranks->Format() : "*";
  const bool renew = open_.open && window_noticed_ &&
                     (now >= next_window_notice_ || ranks_text != noticed_ranks_ ||
                      noticed_window_ != open_.first_event_id);
  if (open_.open == window_noticed_ && !renew) return;
  // A closed window has forgotten its id: the close names the one its open named.
  const std::string& id = open_.open ? open_.first_event_id : noticed_window_;
  proto::Notice notice{.kind = proto::NoticeKind::kWindow, .open = open_.open, .window = id, .ranks = ranks};
  if (!writer_.Run({proto::NoticeXadd(keys_.Notify(), notice)})) return;  // again at the next tick
  window_noticed_ = open_.open;
  noticed_window_ = notice.window;
  noticed_ranks_ = ranks_text;
  next_window_notice_ = now + kWindowNoticeRenew;
}

std::optional<proto::RankRanges> MasterLoop::WindowNoticeRanks() const {
  if (window_whole_) return std::nullopt;
  std::vector<int> members;
  members.reserve(window_membership_.size());
  for (const proto::Membership& m : window_membership_) members.push_back(m.rank);
  // The window's own events' ranks too: a rank that raised one may not be in the membership
  // read yet.
  for (const proto::Event& e : open_.events) members.push_back(e.rank);
  proto::RankRanges ranks = proto::RankRanges::Of(members);
  if (ranks.Format().size() > proto::kMaxNoticeRanksBytes) return std::nullopt;
  return ranks;
}

void MasterLoop::EnsureTransferSecret(Clock::time_point now) {
  next_secret_check_ = now + kSecretCheck;
  const std::string key = keys_.TransferSecret();
  // STRLEN, not GET: the value never needs to pass through the master once it is there.
  redis::Reply length;
  if (!store_->Run({"STRLEN", key}, &length).ok()) return;
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
  const bool written = writer_.Run({{"SET", key, secret, "NX"},
                                    proto::NoticeXadd(keys_.Notify(), proto::NoticeOf(proto::NoticeKind::kSecret))});
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

void MasterLoop::Print(const proto::Incident& incident, const std::vector<std::string>& evicted) {
  ++stats_.incidents_written;
  if (options_.out == nullptr) return;
  std::string text = IncidentBlock(incident, evicted);
  std::fwrite(text.data(), 1, text.size(), options_.out);
  std::fflush(options_.out);
}

}  // namespace ft::master
