#include "ftmaster/window_round.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_set>
#include <utility>

#include "common/log.h"
#include "ftmaster/core/decision.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/stacks_request.h"
#include "proto/codec.h"
#include "proto/notice.h"
#include "redis/spread.h"
#include "schema/master_hash.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::master {

namespace mh = schema::master_hash;

void WindowRound::NewTerm(Clock::time_point now) {
  open_ = IncidentWindow{};
  progress_.Clear();
  cursor_.clear();
  next_progress_ = now;
}

bool WindowRound::LoadTerm(const MasterHash& state, int64_t unix_ms) {
  failures_.clear();
  for (const auto& [field, value] : state) {
    std::string node;
    if (!mh::ParseFailures(field, &node)) continue;
    bool garbled = false;
    failures_[node] = ParseUnixMsList(value, &garbled);
    if (garbled) ctx_->bad.Report("master " + field, value, Status::Corrupt("not a list of Unix ms; those entries are left out"));
  }
  auto it = state.find(mh::kEventsCursor);
  if (it != state.end()) {
    uint64_t ms = 0, seq = 0;
    if (ParseStreamId(it->second, &ms, &seq)) {
      cursor_ = it->second;
    } else {
      ctx_->bad.Report("master events_cursor", it->second,
                       Status::Corrupt("not a stream id; reading the events from the start"));
    }
  }
  it = state.find(mh::kOpenIncident);
  if (it == state.end()) return true;
  proto::OpenIncident persisted;
  Status s = proto::Decode(it->second, &persisted);
  if (!s.ok()) {
    ctx_->bad.Report("master open_incident", it->second,
                     s.WithContext("unreadable; the window is dropped and events decide anew"));
    return ctx_->writer.Run({mh::Delete(ctx_->keys, {mh::kOpenIncident})});
  }
  IncidentWindow o = IncidentWindow::Continued(persisted, unix_ms);
  // The window's events again: from its first event up to the cursor.
  schema::StreamRead<proto::Event> read;
  if (!schema::ReadStream(*ctx_->store, schema::Between(ctx_->keys.Events(), o.first_event_id, cursor_,
                                                        IncidentWindow::kMaxEvents),
                          &read).ok()) {
    return false;
  }
  for (schema::Entry<proto::Event>& e : read.entries) {
    if (e.ok() && CollectedInWindow(e.value.kind)) o.Add(std::move(e.value));
  }
  open_ = std::move(o);
  members_at_open_.clear();  // not known to this master: its action is for the membership then
  FT_LOG(Info, Master, "continuing the incident window opened at event {} ({} events so "
         "far){}", open_.first_event_id, open_.events.size(),
         open_.watching ? ", watching a busy rank" : "");
  return true;
}

void WindowRound::ReadEvents(Clock::time_point now, int64_t unix_ms) {
  const proto::Keys& keys = ctx_->keys;
  for (int batch = 0; batch < kMaxEventBatchesPerTick; ++batch) {
    schema::StreamRead<proto::Event> read;
    if (!schema::ReadStream(*ctx_->store, schema::After(keys.Events(), cursor_, kEventBatch), &read).ok()) return;
    if (!read.not_a_stream.empty()) {
      ctx_->bad.Report(keys.Events(), read.not_a_stream, Status::Corrupt("not a stream reply"));
      return;
    }
    if (read.malformed > 0) {
      ctx_->bad.Report(keys.Events(), fmt::format("{} malformed entries after {}", read.malformed, cursor_),
                       Status::Corrupt("malformed stream entries"));
    }
    if (read.entries.empty()) return;
    std::vector<redis::Argv> writes;
    const bool was_open = open_.open;
    for (schema::Entry<proto::Event>& e : read.entries) {
      cursor_ = e.id;
      if (!e.ok()) {
        ctx_->bad.Report(fmt::format("event {}", e.id), e.RawJson(), e.why);
        continue;
      }
      ++ctx_->stats.events;
      TakeEvent(e.id, std::move(e.value), unix_ms);
    }
    if (open_.open && !was_open) {
      writes.push_back(mh::Set(keys, {{mh::kEventsCursor, cursor_}, {mh::kOpenIncident, proto::Encode(open_.Persisted())}}));
      next_progress_ = now;  // read the tables at once
      membership_->ReadSoon(now);
    } else {
      writes.push_back(mh::Set(keys, {{mh::kEventsCursor, cursor_}}));
    }
    if (!ctx_->writer.Run(writes)) return;
    if (read.entries.size() + read.malformed < kEventBatch) return;
  }
}

void WindowRound::RequestStacks(const std::vector<proto::Incident>& written, int64_t unix_ms) {
  std::vector<redis::Argv> writes = StacksRequests(written, membership_->values(), unix_ms, ctx_->keys);
  if (writes.empty()) return;
  // Best effort: a lost request costs the incident its stacks, nothing else.
  if (!ctx_->writer.Run(writes)) FT_LOG(Info, Master, "the stacks of the incident's suspects were not requested");
}

void WindowRound::TakeHardware(const proto::Event& event, int64_t unix_ms) {
  proto::HwSignal s = event.hw;
  s.node = event.node;
  if (s.unix_ms == 0) s.unix_ms = event.unix_ms;
  hardware_.Prune(unix_ms - kHardwareKeepMs);
  hardware_.Add(s);
  if (!s.critical || ctx_->job_state != proto::JobState::kRunning || open_.open) return;
  const std::string key = fmt::format("{}|{}|{}", s.node, s.device, s.kind);
  auto [it, fresh] = hardware_reported_.emplace(key, unix_ms);
  if (!fresh && unix_ms - it->second < kHardwareRepeatMs) return;
  it->second = unix_ms;
  proto::Incident incident;
  // From the event's own fields: the same id for any master that reads it.
  incident.id = fmt::format("{}-hardware-{}-{}", event.unix_ms, s.node, s.kind);
  incident.kind = proto::IncidentKindName(proto::IncidentKind::kHardware);
  const std::string what = DescribeSignal(s);
  if (s.ranks.empty()) {
    incident.suspects.push_back({-1, s.node, what});
  } else {
    for (int rank : s.ranks) incident.suspects.push_back({rank, s.node, what});
  }
  incident.evidence.push_back(EvidenceLine(s));
  incident.hardware = {s};
  incident.hardware_checked = true;
  incident.confidence = 1;
  incident.first_event_unix_ms = event.unix_ms;
  incident.window_closed_unix_ms = unix_ms;
  incident.decided_unix_ms = unix_ms;
  incident.decide_ms = static_cast<double>(std::max<int64_t>(0, unix_ms - event.unix_ms));
  incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
  incident.message = fmt::format("a critical hardware signal on {} while the job runs: {}; nothing has failed "
                                 "yet: {} is a suspect (a rank there that hangs or crashes evicts it)",
                                 s.node, what, s.node);
  auto won = ctx_->writer.WriteIncidents({incident}, unix_ms, {}, {}, {}, {});
  if (won && (*won)[0]) ctx_->Print(incident, {});
}

void WindowRound::TakeEvent(const std::string& id, proto::Event event, int64_t unix_ms) {
  if (proto::Is(event, proto::EventKind::kHardware)) {
    TakeHardware(event, unix_ms);
    return;
  }
  if (proto::Is(event, proto::EventKind::kSlowdown)) {
    FT_LOG(Info, Master, "rank {} on {} is slow: {}", event.rank, event.node, event.message);
    if (on_slowdown_) on_slowdown_(event, unix_ms);
    return;
  }
  if (!CollectedInWindow(event.kind)) {
    FT_LOG(Debug, Master, "event {} of kind '{}' ignored", id, event.kind);
    return;
  }
  if (proto::EndedCleanly(event) && event.terminated_by_signal == 0) NoteCleanExit(event.unix_ms);
  if (proto::Is(event, proto::EventKind::kExit) && event.terminated_by_signal != 0 && event.rank >= 0 &&
      event.progress.incarnation != 0) {
    teardown_deaths_[event.rank] = event.progress.incarnation;  // one per rank: its newest process
  }
  if (proto::Is(event, proto::EventKind::kExit) && (!event.clean || event.code != 0) && !event.node.empty()) {
    int64_t& at = ctx_->rank_ends[event.node];  // in any job state: a stopped job's ends too
    if (event.unix_ms > at) {
      at = event.unix_ms;
      ++ctx_->rank_ends_version;
    }
  }
  if (ctx_->job_state != proto::JobState::kRunning) {
    FT_LOG(Debug, Master, "{} event {} of rank {} ignored: the job is {}", event.kind, id,
           event.rank, JobStateText(ctx_->job_state));
    return;
  }
  if (const uint64_t newer = NewerProcessOf(event.rank, event.progress.incarnation)) {
    // A worker restarted after the rank ended reports the end late, when its relaunch already
    // runs: deciding on it would stop the relaunch (a campaign seed).
    FT_LOG(Info, Master, "{} event {} of rank {} is of its process from before a relaunch (incarnation {}; {} runs "
           "now): not an incident", event.kind, id, event.rank, event.progress.incarnation, newer);
    return;
  }
  if (!open_.open) {
    if (!OpensWindow(event)) return;  // busy or a clean exit alone: nothing is stuck yet
    open_ = IncidentWindow{};
    open_.open = true;
    progress_.Clear();  // tables of an earlier window say nothing about this one
    open_.first_event_id = id;
    open_.first_unix_ms = event.unix_ms;
    open_.opened_unix_ms = unix_ms;
    members_at_open_ = SlimMembers(membership_->values());
    FT_LOG(Info, Master, "incident window opened by the {} event {} of rank {} on {}: {}",
           event.kind, id, event.rank, event.node, event.message);
  }
  open_.Add(std::move(event));
}

uint64_t WindowRound::NewerProcessOf(int rank, uint64_t incarnation) {
  if (incarnation == 0 || rank < 0) return 0;
  if (newest_by_rank_for_ != membership_->version()) {
    newest_by_rank_.clear();
    for (const proto::Membership& m : membership_->values()) {
      uint64_t& newest = newest_by_rank_[m.rank];
      if (proto::Is(m.state, proto::RankState::kRunning) || proto::Is(m.state, proto::RankState::kDisabled)) {
        newest = std::max(newest, m.incarnation);
      }
    }
    newest_by_rank_for_ = membership_->version();
  }
  auto it = newest_by_rank_.find(rank);
  return it != newest_by_rank_.end() && it->second > incarnation ? it->second : 0;
}

void WindowRound::Notice(Clock::time_point now) {
  if (open_.open && membership_of_window_ != open_.first_event_id) return;  // members not read yet
  const std::optional<proto::RankRanges> ranks = open_.open ? notice_ranks_ : std::nullopt;
  const std::string ranks_text = open_.open ? notice_ranks_text_ : std::string("*");
  const bool renew = open_.open && window_noticed_ &&
                     (now >= next_window_notice_ || ranks_text != noticed_ranks_ ||
                      noticed_window_ != open_.first_event_id);
  if (open_.open == window_noticed_ && !renew) return;
  // A closed window has forgotten its id: the close names the one its open named.
  const std::string& id = open_.open ? open_.first_event_id : noticed_window_;
  proto::Notice notice{.kind = proto::NoticeKind::kWindow, .open = open_.open, .window = id, .ranks = ranks};
  if (!ctx_->writer.Run({schema::PostNotice(ctx_->keys, notice)})) return;  // again at the next tick
  window_noticed_ = open_.open;
  noticed_window_ = notice.window;
  noticed_ranks_ = ranks_text;
  next_window_notice_ = now + kWindowNoticeRenew;
}

std::optional<proto::RankRanges> WindowRound::NoticeRanks() const {
  if (window_whole_) return std::nullopt;
  std::vector<int> members;
  members.reserve(window_membership_.size() + open_.events.size());
  for (const proto::Membership& m : window_membership_) members.push_back(m.rank);
  // The window's own events' ranks too: a rank that raised one may not be in the membership
  // read yet.
  for (const proto::Event& e : open_.events) members.push_back(e.rank);
  proto::RankRanges ranks = proto::RankRanges::Of(members);
  if (ranks.Format().size() > proto::kMaxNoticeRanksBytes) return std::nullopt;
  return ranks;
}

bool WindowRound::ReadProgress(Clock::time_point now) {
  const auto start = Clock::now();
  const proto::Keys& keys = ctx_->keys;
  if (!membership_->known()) {
    // No membership (yet) to find the window's communicators by (workers not reporting it,
    // or its first read not done): every table, as the only way to see who is in what.
    redis::Reply reply;
    if (!redis::HGetAllOf(*ctx_->store, keys.AllProgress(), &reply).ok()) return false;
    progress_.Load(reply, &ctx_->bad);
    window_whole_ = true;
  } else {
    // The window's communicators' members only: read what is missing or older than the first
    // event, follow the waits those tables show into other communicators, read again.
    if (window_reads_for_ != membership_->version()) {
      window_reads_.Rebuild(membership_->values());
      window_reads_for_ = membership_->version();
    }
    std::unordered_set<int> asked;
    for (int round = 0; round < kMaxWindowReadRounds; ++round) {
      const WindowReads::Plan plan = window_reads_.Make(progress_.values(), open_.events);
      std::vector<std::string> fields;
      for (int rank : plan.needed) {
        if (asked.insert(rank).second) fields.push_back(std::to_string(rank));
      }
      if (fields.empty()) break;
      // One HMGET per group the ranks fall in (proto/keys.h), in one pipeline; the replies
      // put back in the fields' order, as one HMGET would have answered.
      std::map<int, size_t> command_of;  // group -> index in commands
      std::vector<redis::Argv> commands;
      std::vector<std::pair<size_t, size_t>> where;  // per field: command, position in it
      for (const std::string& field : fields) {
        const int group = proto::Keys::GroupOfRank(std::atoi(field.c_str()));
        auto [it, added] = command_of.emplace(group, commands.size());
        if (added) commands.push_back({"HMGET", keys.Progress(group)});
        where.emplace_back(it->second, commands[it->second].size() - 2);
        commands[it->second].push_back(field);
      }
      std::vector<redis::Reply> replies;
      if (!ctx_->store->PipelinePartial(commands, &replies).ok()) return false;
      for (const redis::Reply& r : replies) {
        if (r.is_error()) return false;
      }
      std::vector<redis::Reply> values;
      for (const auto& [c, i] : where) {
        const redis::Reply& r = replies[c];
        values.push_back(r.is_array() && i < r.size() ? r[i] : redis::Reply::Nil());
      }
      progress_.LoadFields(fields, redis::Reply::Array(std::move(values)), &ctx_->bad);
      ctx_->stats.progress_rows_read += fields.size();
    }
    window_membership_ =
        window_reads_.MembershipOf(window_reads_.Make(progress_.values(), open_.events).members);
    window_whole_ = false;
  }
  membership_of_window_ = open_.first_event_id;
  notice_ranks_ = NoticeRanks();  // once per read, not at every notice check
  notice_ranks_text_ = notice_ranks_ ? notice_ranks_->Format() : "*";
  ctx_->stats.progress_read_ms = MsSince(start);
  next_progress_ = now + Spacing(ctx_->options.tick, ctx_->stats.progress_read_ms);
  return true;
}

AttributionInput WindowRound::Input(int64_t unix_ms) const {
  const Config& config = ctx_->options.config;
  AttributionInput in;
  in.progress = progress_.values();
  if (window_whole_) {
    in.membership = membership_->values();
  } else {
    in.membership = window_membership_;
  }
  in.events = open_.events;
  in.now_unix_ms = unix_ms;
  in.stale_ms = static_cast<double>(3 * ToMs(config.report_interval) + ToMs(config.hang_window) + 1000);
  in.min_wait_ms = static_cast<double>(ToMs(config.timeout_floor));
  in.clean_exit_unix_ms = clean_exit_times_;
  in.teardown_deaths = &teardown_deaths_;
  return in;
}

void WindowRound::CollectCleanExits() {
  // Clean exits this master read in the events, and (for those before its term, or whose
  // events it never read) the membership's exited ranks, by the time their worker saw it.
  clean_exit_times_.assign(clean_exits_.begin(), clean_exits_.end());
  for (const proto::Membership& m : membership_->values()) {
    if (proto::Is(m.state, proto::RankState::kExited) && m.unix_ms > 0) clean_exit_times_.push_back(m.unix_ms);
  }
}

std::optional<WindowAction> WindowRound::Step(Clock::time_point now, int64_t unix_ms) {
  const int64_t window_ms = ToMs(ctx_->options.config.hang_window);
  if (open_.watching) {
    if (unix_ms < open_.next_eval_unix_ms) return std::nullopt;
    // The tables read for the last look are all newer than the first event, so ReadProgress
    // fetches none again: the busy ranks' own are read, and once they call CUDA/NCCL again the
    // job moves and the window is over (a new stall opens a new one). Re-reading every member
    // instead catches peers mid-op as the busy rank rejoins: a transient "neither completes".
    if (std::optional<std::string> resumed = BusyRanksResumed()) {
      CloseIncident(*resumed);
      return std::nullopt;
    }
    if (!ReadProgress(now) || !ReadRanks(now)) return std::nullopt;
    return Close(Clock::now(), unix_ms);
  }
  bool read = false;
  if (now >= next_progress_) {
    if (!ReadProgress(now)) return std::nullopt;
    if (membership_->Due(now) && !ReadRanks(now)) return std::nullopt;
    read = true;
  }
  // The window's age by this master's clock (no two hosts' clocks compared for less than a
  // second); WindowCanClose then decides by the reports alone.
  const bool expired = unix_ms - open_.opened_unix_ms >= window_ms;
  if (!expired && !read) return std::nullopt;
  if (!expired && !WindowCanClose(Input(unix_ms), std::numeric_limits<int64_t>::max())) return std::nullopt;
  if (expired && !read) {
    // Decide on fresh tables.
    if (!ReadProgress(now) || !ReadRanks(now)) return std::nullopt;
  }
  if (WaitsForMembership(now, unix_ms)) return std::nullopt;
  return Close(Clock::now(), unix_ms);
}

bool WindowRound::WaitsForMembership(Clock::time_point now, int64_t unix_ms) {
  // Again when the membership moved, or an event joined the window (its rank may be missing).
  if (gap_for_ != membership_->version() || gap_events_ != open_.events.size() ||
      gap_window_ != open_.first_event_id) {
    const int world = membership_->has_explicit() ? membership_->CurrentTopology().world_size() : 0;
    gap_ = FindMembershipGap(membership_->values(), open_.events, world);
    gap_for_ = membership_->version();
    gap_events_ = open_.events.size();
  }
  const int64_t waited_ms = unix_ms - open_.opened_unix_ms - ToMs(ctx_->options.config.hang_window);
  if (gap_.empty() || waited_ms >= kMembershipWaitMs) {
    if (!gap_.empty()) {
      FT_LOG(Warn, Master, "incident window {}: deciding without the membership of {} (waited {} ms for their "
             "workers to write it): a rank it lacks is neither saved nor stopped by its node", open_.first_event_id,
             gap_.Text(), kMembershipWaitMs);
    }
    gap_window_.clear();
    return false;
  }
  if (gap_window_ != open_.first_event_id) {
    gap_window_ = open_.first_event_id;
    FT_LOG(Info, Master, "incident window {}: the membership lacks {} (Redis lost it? its workers write it again "
           "once they reconnect): waiting up to {} ms for it before deciding", open_.first_event_id, gap_.Text(),
           kMembershipWaitMs);
  }
  membership_->ReadSoon(now);
  return true;
}

std::optional<WindowAction> WindowRound::Close(Clock::time_point closed_at, int64_t unix_ms) {
  CollectCleanExits();
  std::string why_none;
  std::vector<proto::Incident> incidents = Attribute(Input(unix_ms), &why_none);
  // Decided now, after the last reads and the attribution: the tick's time plus what the tick
  // has taken so far (at 16k ranks, a few hundred ms).
  const int64_t decided_unix_ms = unix_ms + static_cast<int64_t>(MsSince(ctx_->tick_started));
  ++ctx_->stats.windows;
  // The topology only when the job is to be stopped: the decision names save targets by it.
  const Topology* topology = WindowActs(incidents) ? &membership_->CurrentTopology() : nullptr;
  WindowDecision d = DecideWindow(std::move(incidents), why_none, open_, unix_ms, decided_unix_ms, topology,
                                  membership_->values(), ctx_->options.config.sharded_optimizer,
                                  ToMs(ctx_->options.config.busy_report_after), &hardware_, &failures_);
  return Commit(std::move(d), closed_at, unix_ms);
}

std::optional<WindowAction> WindowRound::Commit(WindowDecision d, Clock::time_point closed_at, int64_t unix_ms) {
  if (d.kind == WindowDecision::Kind::kClose) {
    CloseIncident(d.close_why);
    return std::nullopt;
  }
  // The outcomes count as written from here: a refused write is not retried with the same
  // outcome (a new one, or the hang it turns into, is written).
  open_.outcomes = d.outcomes;
  open_.last_outcome = d.last_outcome;
  if (d.kind == WindowDecision::Kind::kWatch) {
    const int64_t window_ms = ToMs(ctx_->options.config.hang_window);
    open_.watching = true;
    if (watched_busy_.empty()) {
      // Where each busy rank stood, and when: it is back in the job once it has entered
      // further ops since (busy_watch.h).
      for (int rank : d.busy_ranks) {
        const proto::RankProgress* p = NewestProgress(rank);
        watched_busy_[rank] = BusyWatchStart{p != nullptr ? EnteredOps(*p) : 0, unix_ms};
      }
    }
    open_.next_eval_unix_ms = unix_ms + window_ms;
    if (d.to_write.empty()) {
      FT_LOG(Debug, Master, "busy outcome unchanged ({}); watching", d.busy_outcome);
      return std::nullopt;
    }
    auto won = ctx_->writer.WriteIncidents(d.to_write, unix_ms, {}, {},
                                           {{"open_incident", proto::Encode(open_.Persisted())}}, {});
    ctx_->stats.last_close_to_written_ms = MsSince(closed_at);
    if (!won) return std::nullopt;
    std::vector<proto::Incident> written;
    for (size_t i = 0; i < d.to_write.size(); ++i) {
      if (!(*won)[i]) continue;
      ctx_->Print(d.to_write[i], {});
      written.push_back(d.to_write[i]);
    }
    RequestStacks(written, unix_ms);
    FT_LOG(Info, Master, "a busy rank holds the job up ({}); re-evaluating every {} ms",
           d.busy_outcome, window_ms);
    return std::nullopt;
  }

  ctx_->stats.last_attribute_ms = MsSince(closed_at);
  std::string encoded_action = proto::Encode(d.action);
  const double encoded_ms = MsSince(closed_at);
  // Each evicted node's reason beside the action (`evicted_why:<node>`): what a scheduler's
  // drain takes as its reason.
  std::vector<std::pair<std::string, std::string>> on_win = {
      {mh::kAction, std::move(encoded_action)}, {mh::kJobState, proto::JobStateName(proto::JobState::kStopping)}};
  for (size_t i = 0; i < d.evict_nodes.size() && i < d.evict_reasons.size(); ++i) {
    on_win.push_back({mh::EvictedWhy(d.evict_nodes[i]), d.evict_reasons[i]});
  }
  // This failure counted for the node's next one (repeated failures evict it).
  for (const auto& [node, times] : d.failures) on_win.push_back({mh::Failures(node), UnixMsList(times)});
  auto won = ctx_->writer.WriteIncidents(d.to_write, unix_ms, d.evict_nodes, on_win, {}, {mh::kOpenIncident});
  if (!won) return std::nullopt;  // fenced out or Redis failed: the window stays open (retried if leading)
  for (auto& [node, times] : d.failures) failures_[node] = std::move(times);
  ctx_->stats.last_close_to_written_ms = MsSince(closed_at);
  bool any = false;
  std::vector<proto::Incident> written;
  for (size_t i = 0; i < d.to_write.size(); ++i) {
    if (!(*won)[i]) continue;
    any = true;
    ctx_->Print(d.to_write[i], Acted(d.to_write[i]) ? d.evict_nodes : std::vector<std::string>{});
    written.push_back(d.to_write[i]);
  }
  // Before the action's save and stop commands: a worker executes its node's commands in order,
  // so the stacks are taken while the suspects still run.
  RequestStacks(written, unix_ms);
  open_ = IncidentWindow{};
  if (any) {
    FT_LOG(Info, Master, "incident {}: {} ({}); topology {}; after the window closed: decided {:.0f} ms, "
           "action encoded {:.0f} ms, written {:.0f} ms", d.action.incident,
           proto::DecisionKindName(d.action.decision), d.reason,
           d.topology, ctx_->stats.last_attribute_ms, encoded_ms, ctx_->stats.last_close_to_written_ms);
  } else {
    FT_LOG(Info, Master, "incident {} was already decided by another master", d.action.incident);
  }
  return WindowAction{std::move(d.action), any};
}

void WindowRound::NoteCleanExit(int64_t unix_ms) {
  // Only those within the teardown horizon of the newest matter; a few suffice (one before a
  // death is enough to call it the job's teardown).
  const int64_t horizon = AttributionInput{}.finish_teardown_ms;
  while (!clean_exits_.empty() && clean_exits_.front() < unix_ms - horizon) clean_exits_.pop_front();
  if (clean_exits_.size() < kMaxCleanExits) clean_exits_.push_back(unix_ms);
}

const proto::RankProgress* WindowRound::NewestProgress(int rank) const {
  const proto::RankProgress* newest = nullptr;
  for (const proto::RankProgress& p : progress_.values()) {
    if (p.rank == rank && (newest == nullptr || p.observed_unix_ms > newest->observed_unix_ms)) newest = &p;
  }
  for (const proto::Event& e : open_.events) {
    const proto::RankProgress& p = e.progress;
    if (p.rank == rank && (newest == nullptr || p.observed_unix_ms > newest->observed_unix_ms)) newest = &p;
  }
  return newest;
}

std::optional<std::string> WindowRound::BusyRanksResumed() {
  if (watched_busy_.empty()) return std::nullopt;
  for (const auto& [rank, start] : watched_busy_) {
    redis::Reply reply;
    if (!ctx_->store->Run(schema::GetProgress(ctx_->keys, rank), &reply).ok() || !reply.is_string()) return std::nullopt;
    proto::RankProgress p;
    if (!proto::Decode(reply.str(), &p).ok()) return std::nullopt;
    // Back in the job (busy_watch.h): not frozen, and entered ops after the watch began that
    // reach the collectives its peers wait in.
    std::string_view why_not = WhyNotBack(p, start, open_.events);
    if (!why_not.empty()) {
      FT_LOG(Debug, Master, "busy rank {} not back yet: {}", rank, why_not);
      return std::nullopt;
    }
  }
  std::string ranks;
  for (const auto& [rank, start] : watched_busy_) ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
  return fmt::format("resolved: busy rank{} {} back in the job (entering collectives again)",
                     watched_busy_.size() == 1 ? "" : "s", ranks);
}

void WindowRound::CloseIncident(const std::string& why) {
  if (!ctx_->writer.Run({mh::Delete(ctx_->keys, {mh::kOpenIncident})})) return;
  FT_LOG(Info, Master, "incident window of event {} closed: {}", open_.first_event_id, why);
  open_ = IncidentWindow{};
  watched_busy_.clear();
}

}  // namespace ft::master
