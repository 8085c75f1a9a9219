#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_set>
#include <utility>

#include "common/log.h"
#include "ftmaster/core/attribution.h"
#include "ftmaster/core/decision.h"
#include "ftmaster/incident_window.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/master_loop.h"
#include "redis/spread.h"

namespace ft::master {
namespace {

std::string EventKey(const proto::Event& e) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}", e.kind, e.rank, e.node, e.unix_ms, e.comm_id, e.seq,
                     e.code);
}

}  // namespace

bool OpensWindow(const proto::Event& event) {
  // A clean exit is how every rank of a finished job ends: alone it says nothing is stuck. A
  // rank that returned early leaves its peers waiting, and their timeouts open the window
  // (with this exit in it as evidence). A death or a freeze is an incident on its own, seen
  // waited on or not (attribution.h says which deaths are a teardown).
  if (proto::Is(event, proto::EventKind::kExit)) return !event.clean;
  return proto::Is(event, proto::EventKind::kTimeout) || proto::Is(event, proto::EventKind::kError) ||
         proto::Is(event, proto::EventKind::kFrozen);
}
bool CollectedInWindow(const std::string& kind) {
  std::optional<proto::EventKind> k = proto::ParseEventKind(kind);
  return k.has_value() && *k != proto::EventKind::kSlowdown;  // slowdowns go to the straggler round
}

void IncidentWindow::Add(proto::Event event) {
  if (events.size() >= kMaxEvents) return;
  if (seen.insert(EventKey(event)).second) events.push_back(std::move(event));
}

proto::OpenIncident IncidentWindow::Persisted() const {
  proto::OpenIncident o;
  o.first_event_id = first_event_id;
  o.first_event_unix_ms = first_unix_ms;
  o.opened_unix_ms = opened_unix_ms;
  o.outcomes = outcomes;
  o.last_outcome = last_outcome;
  o.watching = watching;
  return o;
}

IncidentWindow IncidentWindow::Continued(const proto::OpenIncident& p, int64_t unix_ms) {
  IncidentWindow w;
  w.open = true;
  w.first_event_id = p.first_event_id;
  w.first_unix_ms = p.first_event_unix_ms;
  w.opened_unix_ms = p.opened_unix_ms;
  w.outcomes = p.outcomes;
  w.last_outcome = p.last_outcome;
  w.watching = p.watching;
  w.next_eval_unix_ms = unix_ms;
  return w;
}

// ---- the master loop: events and the window -------------------------------------------------

void MasterLoop::ReadEvents(Clock::time_point now, int64_t unix_ms) {
  for (int batch = 0; batch < kMaxEventBatchesPerTick; ++batch) {
    redis::Reply reply;
    const std::string start = cursor_.empty() ? "-" : "(" + cursor_;
    if (!store_->Run({"XRANGE", keys_.Events(), start, "+", "COUNT", std::to_string(kEventBatch)},
                  &reply)
             .ok()) {
      return;
    }
    if (!reply.is_array() && !reply.is_nil()) {
      bad_.Report(keys_.Events(), reply.DebugString().substr(0, 64),
                  Status::Corrupt("not a stream reply"));
      return;
    }
    std::vector<StreamEntry> entries;
    const size_t skipped = ParseStream(reply, &entries);
    if (skipped > 0) {
      bad_.Report(keys_.Events(), fmt::format("{} malformed entries after {}", skipped, cursor_),
                  Status::Corrupt("malformed stream entries"));
    }
    if (entries.empty()) return;
    std::vector<redis::Argv> writes;
    const bool was_open = open_.open;
    for (StreamEntry& e : entries) {
      cursor_ = e.id;
      proto::Event event;
      Status s = DecodeEventEntry(e, &event);
      if (!s.ok()) {
        const std::string* json = e.Get("json");
        bad_.Report(fmt::format("event {}", e.id), json ? *json : std::string_view(), s);
        continue;
      }
      ++stats_.events;
      TakeEvent(e.id, std::move(event), unix_ms);
    }
    if (open_.open && !was_open) {
      writes.push_back({"HSET", keys_.MasterState(), "events_cursor", cursor_, "open_incident",
                        proto::Encode(open_.Persisted())});
      next_progress_ = next_ranks_ = now;  // read the tables at once
    } else {
      writes.push_back({"HSET", keys_.MasterState(), "events_cursor", cursor_});
    }
    if (!writer_.Run(writes)) return;
    if (entries.size() < kEventBatch) return;
  }
}

void MasterLoop::TakeEvent(const std::string& id, proto::Event event, int64_t unix_ms) {
  if (proto::Is(event, proto::EventKind::kSlowdown)) {
    FT_LOG(Info, Master, "rank {} on {} is slow: {}", event.rank, event.node, event.message);
    return;
  }
  if (!CollectedInWindow(event.kind)) {
    FT_LOG(Debug, Master, "event {} of kind '{}' ignored", id, event.kind);
    return;
  }
  if (proto::Is(event, proto::EventKind::kExit) && event.clean && event.terminated_by_signal == 0) NoteCleanExit(event.unix_ms);
  if (job_state_ != "running") {
    FT_LOG(Debug, Master, "{} event {} of rank {} ignored: the job is {}", event.kind, id,
           event.rank, job_state_);
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
    FT_LOG(Info, Master, "incident window opened by the {} event {} of rank {} on {}: {}",
           event.kind, id, event.rank, event.node, event.message);
  }
  open_.Add(std::move(event));
}

bool MasterLoop::ReadProgress(Clock::time_point now) {
  const auto start = Clock::now();
  if (!ranks_loaded_ || ranks_.empty()) {
    // No membership (yet) to find the window's communicators by (workers not reporting it,
    // or its first read not done): every table, as the only way to see who is in what.
    redis::Reply reply;
    if (!redis::HGetAllOf(*store_, keys_.AllProgress(), &reply).ok()) return false;
    progress_.Load(reply, &bad_);
    window_whole_ = true;
  } else {
    // The window's communicators' members only: read what is missing or older than the first
    // event, follow the waits those tables show into other communicators, read again.
    if (window_reads_for_ != ranks_.version()) {
      window_reads_.Rebuild(ranks_.values());
      window_reads_for_ = ranks_.version();
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
        if (added) commands.push_back({"HMGET", keys_.Progress(group)});
        where.emplace_back(it->second, commands[it->second].size() - 2);
        commands[it->second].push_back(field);
      }
      std::vector<redis::Reply> replies;
      if (!store_->PipelinePartial(commands, &replies).ok()) return false;
      for (const redis::Reply& r : replies) {
        if (r.is_error()) return false;
      }
      std::vector<redis::Reply> values;
      for (const auto& [c, i] : where) {
        const redis::Reply& r = replies[c];
        values.push_back(r.is_array() && i < r.size() ? r[i] : redis::Reply::Nil());
      }
      progress_.LoadFields(fields, redis::Reply::Array(std::move(values)), &bad_);
      stats_.progress_rows_read += fields.size();
    }
    window_membership_ =
        window_reads_.MembershipOf(window_reads_.Make(progress_.values(), open_.events).members);
    window_whole_ = false;
  }
  membership_of_window_ = open_.first_event_id;
  stats_.progress_read_ms = MsSince(start);
  next_progress_ = now + Spacing(options_.tick, stats_.progress_read_ms);
  return true;
}

bool MasterLoop::ReadRanks(Clock::time_point now) {
  const auto start = Clock::now();
  if (ranks_cursor_.empty()) {
    // Workers bump ranks:version with every membership write; unchanged, the hash is too.
    // Without the key (older workers, or Redis lost it) the hash is read every time.
    redis::Reply version;
    if (!store_->Run({"GET", keys_.RanksVersion()}, &version).ok()) return false;
    const bool versioned = version.is_string();
    if (versioned && ranks_loaded_ && version.str() == ranks_version_read_) {
      next_ranks_ = now + Spacing(open_.open ? options_.tick : options_.ranks_period,
                                  MsSince(start));
      OnRanksRead();  // a new term's models still need the membership it kept
      return true;
    }
    ranks_pass_version_ = versioned ? version.str() : "";
    ranks_.BeginPass();
  }
  // In HSCAN chunks, one per call: 131k members are ~40 MB, and one HGETALL of them would hold
  // the loop (and the lease) for seconds.
  const std::string cursor = ranks_cursor_.empty() ? std::string(1, '0') : ranks_cursor_;
  redis::Reply reply;
  if (!store_->Run({"HSCAN", keys_.Ranks(), cursor, "COUNT", kRanksChunk}, &reply).ok()) {
    return false;
  }
  if (!reply.is_array() || reply.size() != 2 || !reply[0].is_string()) {
    bad_.Report(keys_.Ranks(), reply.DebugString().substr(0, 64),
                Status::Corrupt("not an HSCAN reply (wrong key type?)"));
    ranks_cursor_.clear();
    next_ranks_ = now + options_.ranks_period;
    return true;
  }
  ranks_.LoadPairs(reply[1], &bad_);
  if (reply[0].str() != "0") {
    ranks_cursor_ = reply[0].str();
    next_ranks_ = now + Spacing(options_.tick, MsSince(start));
    return true;
  }
  ranks_cursor_.clear();
  ranks_.EndPass();
  ranks_loaded_ = true;
  ranks_version_read_ = ranks_pass_version_;
  ++stats_.ranks_reads;
  const double cost = MsSince(start);
  next_ranks_ = now + Spacing(open_.open ? options_.tick : options_.ranks_period, cost);
  OnRanksRead();
  return true;
}

void MasterLoop::OnRanksRead() {
  if (ranks_.version() != ranks_version_seen_) {
    ranks_version_seen_ = ranks_.version();
    stragglers_.SetMembership(ranks_.values());
    all_exited_ = !ranks_.values().empty();
    for (const proto::Membership& m : ranks_.values()) all_exited_ = all_exited_ && m.state == "exited";
    // The topology while the ranks run, so that it is known (and kept) once they have left.
    if (!have_explicit_) (void)CurrentTopology();
    // A stopped or finished job launched again (new processes) is watched again.
    if ((job_state_ == "stopped" && action_) || job_state_ == "finished") {
      for (const proto::Membership& m : ranks_.values()) {
        if (m.state == "running" &&
            (job_state_ == "finished" ||
             static_cast<int64_t>(m.incarnation / 1000000) > action_->decided_unix_ms)) {
          // The finished action goes (its outcome stays in `checkpoint:<incident>`), so the
          // new run is watched and decided like a first one.
          const std::string was = job_state_;
          if (writer_.Run({{"HSET", keys_.MasterState(), "job_state", "running"},
                           {"HDEL", keys_.MasterState(), "action"}})) {
            job_state_ = "running";
            action_.reset();
            pending_acks_.clear();
            pending_loaded_ = false;
            progress_.Clear();
            FT_LOG(Info, Master, "rank {} on {} (a new incarnation) started after the job was {}: "
                   "watching the job again", m.rank, m.node, was);
          }
          break;
        }
      }
    }
  }
  MaybeFinish();
}

void MasterLoop::MaybeFinish() {
  if (!all_exited_ || job_state_ != "running" || open_.open) return;
  if (action_ && action_->phase != "done") return;
  if (!writer_.Run({{"HSET", keys_.MasterState(), "job_state", "finished"}})) return;
  job_state_ = "finished";
  FT_LOG(Info, Master, "job {} finished: all {} ranks exited cleanly; topology {}", options_.job,
         ranks_.values().size(), CurrentTopology().Describe());
}

const Topology& MasterLoop::CurrentTopology() {
  if (have_explicit_) return explicit_topology_;
  if (!inferred_ || inferred_for_ != ranks_.version()) {
    inferred_ = Topology::InferOrKeep(ranks_.values(), last_inferred_ ? &*last_inferred_ : nullptr);
    inferred_for_ = ranks_.version();
    const bool changed = !last_inferred_ || last_inferred_->sizes() != inferred_->sizes() ||
                         last_inferred_->order() != inferred_->order();
    if (inferred_->known() && !inferred_->kept() && changed &&
        writer_.Run({{"HSET", keys_.MasterState(), "inferred_topology", inferred_->sizes(),
                      "inferred_order", inferred_->order()}})) {
      last_inferred_ = Topology::Kept(*inferred_, "inferred while the ranks ran");
    }
  }
  return *inferred_;
}

AttributionInput MasterLoop::Input(int64_t unix_ms) const {
  AttributionInput in;
  in.progress = progress_.values();
  if (window_whole_) {
    in.membership = ranks_.values();
  } else {
    in.membership = window_membership_;
  }
  in.events = open_.events;
  in.now_unix_ms = unix_ms;
  in.stale_ms = static_cast<double>(3 * ToMs(options_.config.report_interval) +
                                    ToMs(options_.config.hang_window) + 1000);
  in.min_wait_ms = static_cast<double>(ToMs(options_.config.timeout_floor));
  in.clean_exit_unix_ms = clean_exit_times_;
  return in;
}

void MasterLoop::CollectCleanExits() {
  // Clean exits this master read in the events, and (for those before its term, or whose
  // events it never read) the membership's exited ranks, by the time their worker saw it.
  clean_exit_times_.assign(clean_exits_.begin(), clean_exits_.end());
  for (const proto::Membership& m : ranks_.values()) {
    if (m.state == "exited" && m.unix_ms > 0) clean_exit_times_.push_back(m.unix_ms);
  }
}

void MasterLoop::CollectAndMaybeDecide(Clock::time_point now, int64_t unix_ms) {
  const int64_t window_ms = ToMs(options_.config.hang_window);
  if (open_.watching) {
    if (unix_ms < open_.next_eval_unix_ms) return;
    if (!ReadProgress(now) || !ReadRanks(now)) return;
    DecideWindow(Clock::now(), unix_ms);
    return;
  }
  bool read = false;
  if (now >= next_progress_) {
    if (!ReadProgress(now)) return;
    if (now >= next_ranks_ && !ReadRanks(now)) return;
    read = true;
  }
  // The window's age by this master's clock (no two hosts' clocks compared for less than a
  // second); WindowCanClose then decides by the reports alone.
  const bool expired = unix_ms - open_.opened_unix_ms >= window_ms;
  if (!expired && !read) return;
  if (!expired && !WindowCanClose(Input(unix_ms), std::numeric_limits<int64_t>::max())) return;
  if (expired && !read) {
    // Decide on fresh tables.
    if (!ReadProgress(now) || !ReadRanks(now)) return;
  }
  DecideWindow(Clock::now(), unix_ms);
}

void MasterLoop::DecideWindow(Clock::time_point closed_at, int64_t unix_ms) {
  const int64_t window_ms = ToMs(options_.config.hang_window);
  CollectCleanExits();
  std::string why_none;
  std::vector<proto::Incident> incidents = Attribute(Input(unix_ms), &why_none);
  // Decided now, after the last reads and the attribution: the tick's time plus what the tick
  // has taken so far (at 16k ranks, a few hundred ms).
  const int64_t decided_unix_ms = unix_ms + static_cast<int64_t>(MsSince(tick_started_));
  ++stats_.windows;
  if (incidents.empty()) {
    CloseIncident(why_none.empty()
                      ? fmt::format("resolved: nothing waits any more ({} event{} in the window)",
                                    open_.events.size(), open_.events.size() == 1 ? "" : "s")
                      : "no incident: " + why_none);
    return;
  }
  const int64_t first = open_.first_unix_ms;
  bool acted = false;
  std::string busy_outcome;
  for (proto::Incident& incident : incidents) {
    // Ids from the window's first event as persisted: the same for any master deciding it.
    const size_t dash = incident.id.find('-');
    incident.id = fmt::format("{}{}", first,
                              dash == std::string::npos ? "-" + incident.kind : incident.id.substr(dash));
    incident.first_event_unix_ms = first;
    incident.window_closed_unix_ms = unix_ms;
    incident.decided_unix_ms = decided_unix_ms;
    incident.decide_ms = static_cast<double>(decided_unix_ms - first);
    acted = acted || Acted(incident);
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      busy_outcome = "busy:";
      for (size_t i = 0; i < incident.suspects.size(); ++i) {
        busy_outcome += (i ? "," : "") + std::to_string(incident.suspects[i].rank);
      }
    }
  }
  std::vector<proto::Incident> to_write;
  for (proto::Incident& incident : incidents) {
    if (proto::Is(incident, proto::IncidentKind::kBusy)) {
      if (busy_outcome == open_.last_outcome) continue;  // unchanged: written before
      ++open_.outcomes;
      if (open_.outcomes > 1) incident.id += fmt::format("-{}", open_.outcomes);
      open_.last_outcome = busy_outcome;
    }
    to_write.push_back(incident);
  }

  if (!acted) {
    open_.watching = true;
    open_.next_eval_unix_ms = unix_ms + window_ms;
    if (to_write.empty()) {
      FT_LOG(Debug, Master, "busy outcome unchanged ({}); watching", busy_outcome);
      return;
    }
    auto won = writer_.WriteIncidents(to_write, unix_ms, {}, {}, {{"open_incident", proto::Encode(open_.Persisted())}}, {});
    stats_.last_close_to_written_ms = MsSince(closed_at);
    if (!won) return;
    for (size_t i = 0; i < to_write.size(); ++i) {
      if ((*won)[i]) Print(to_write[i], {});
    }
    FT_LOG(Info, Master, "a busy rank holds the job up ({}); re-evaluating every {} ms",
           busy_outcome, window_ms);
    return;
  }

  const Topology& topology = CurrentTopology();
  const double attributed_ms = MsSince(closed_at);
  Decision decision = Decide(incidents, topology, ranks_.values(), options_.config.sharded_optimizer);
  ApplyDecision(decision, to_write);
  stats_.last_attribute_ms = MsSince(closed_at);
  Action action;
  for (const proto::Incident& incident : to_write) {
    if (Acted(incident)) {
      action.incident = incident.id;
      break;
    }
  }
  action.decision = decision.decision;
  action.save = std::move(decision.save);  // 131k targets: not used after this
  action.phase = decision.decision == "save-then-stop" ? "save" : "stop";
  action.decided_unix_ms = decided_unix_ms;
  const double decided_ms = MsSince(closed_at);
  std::string encoded_action = proto::Encode(action);
  const double encoded_ms = MsSince(closed_at);
  auto won = writer_.WriteIncidents(to_write, unix_ms, decision.evict_nodes,
                            {{"action", std::move(encoded_action)}, {"job_state", "stopping"}}, {},
                            {"open_incident"});
  if (!won) return;  // fenced out or Redis failed: the window stays open (retried if leading)
  stats_.last_close_to_written_ms = MsSince(closed_at);
  bool any = false;
  for (size_t i = 0; i < to_write.size(); ++i) {
    if (!(*won)[i]) continue;
    any = true;
    Print(to_write[i], Acted(to_write[i]) ? decision.evict_nodes : std::vector<std::string>{});
  }
  open_ = IncidentWindow{};
  if (any) {
    FT_LOG(Info, Master, "incident {}: {} ({}); topology {}; after the window closed: attributed "
           "{:.0f} ms, decided {:.0f} ms, action encoded {:.0f} ms, written {:.0f} ms",
           action.incident, decision.decision, decision.reason, topology.Describe(), attributed_ms,
           decided_ms, encoded_ms, stats_.last_close_to_written_ms);
    action_ = std::move(action);
    pending_loaded_ = false;
    job_state_ = "stopping";
  } else {
    // Another master decided this window first: carry out what it stored.
    FT_LOG(Info, Master, "incident {} was already decided by another master", action.incident);
    redis::Reply stored, state;
    if (store_->Run({"HGET", keys_.MasterState(), "action"}, &stored).ok() &&
        stored.is_string()) {
      Action a;
      if (proto::Decode(stored.str(), &a).ok()) action_ = std::move(a);
      pending_loaded_ = false;
    }
    if (store_->Run({"HGET", keys_.MasterState(), "job_state"}, &state).ok() &&
        state.is_string()) {
      job_state_ = state.str();
    }
  }
}

void MasterLoop::NoteCleanExit(int64_t unix_ms) {
  // Only those within the teardown horizon of the newest matter; a few suffice (one before a
  // death is enough to call it the job's teardown).
  const int64_t horizon = AttributionInput{}.finish_teardown_ms;
  while (!clean_exits_.empty() && clean_exits_.front() < unix_ms - horizon) clean_exits_.pop_front();
  if (clean_exits_.size() < kMaxCleanExits) clean_exits_.push_back(unix_ms);
}

void MasterLoop::CloseIncident(const std::string& why) {
  if (!writer_.Run({{"HDEL", keys_.MasterState(), "open_incident"}})) return;
  FT_LOG(Info, Master, "incident window of event {} closed: {}", open_.first_event_id, why);
  open_ = IncidentWindow{};
}

}  // namespace ft::master
