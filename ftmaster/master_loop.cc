#include "ftmaster/master_loop.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/log.h"
#include "ftmaster/attribution.h"
#include "ftmaster/report.h"
#include "ftmaster/save_outcome.h"
#include "proto/codec.h"

namespace ft::master {
namespace {

using Json = nlohmann::json;
using Ms = std::chrono::milliseconds;

constexpr const char* kCommandsCap = "1000";
constexpr size_t kEventBatch = 1000;
constexpr int kMaxEventBatchesPerTick = 10;
constexpr size_t kMaxWindowEvents = 100000;
constexpr Ms kAckPoll{50};
constexpr Ms kStatePoll{1000};

// Runs a list of commands iff KEYS[1] (the lease) holds ARGV[1] (our id). ARGV[2]: the number
// of commands; then per command its argument count and arguments. -1: fenced out.
constexpr const char* kFencedScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local i = 2
local n = tonumber(ARGV[i]); i = i + 1
for c = 1, n do
  local argc = tonumber(ARGV[i]); i = i + 1
  redis.call(unpack(ARGV, i, i + argc - 1))
  i = i + argc
end
return n
)lua";

// The exactly-once write of a window's incidents. KEYS: lease, master hash, incidents stream,
// evicted set (incidents capped at MAXLEN ~ 10000). ARGV: id, now, n, n x (incident id, kind, suspects, json), n_evict, nodes...,
// n_on_win, pairs..., n_always, pairs..., n_del, fields... Per incident, HSETNX
// decided:<id> is the gate: only its winner XADDs the incident (if the XADD fails the gate is
// taken back, so a refused write is retried rather than lost). On any win the evicted nodes
// and the on-win fields (the action) are written too; the rest always. -1: fenced out.
constexpr const char* kIncidentScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local now = ARGV[2]
local i = 3
local n = tonumber(ARGV[i]); i = i + 1
local won = {}
local any = false
for k = 1, n do
  local gate = 'decided:' .. ARGV[i]
  if redis.call('HSETNX', KEYS[2], gate, now) == 1 then
    local r = redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', '10000', '*',
                          'kind', ARGV[i + 1], 'suspects', ARGV[i + 2], 'json', ARGV[i + 3])
    if type(r) == 'table' and r.err then
      redis.call('HDEL', KEYS[2], gate)
      return redis.error_reply(r.err)
    end
    won[k] = 1
    any = true
  else
    won[k] = 0
  end
  i = i + 4
end
local ne = tonumber(ARGV[i]); i = i + 1
if any and ne > 0 then redis.call('SADD', KEYS[4], unpack(ARGV, i, i + ne - 1)) end
i = i + ne
local nw = tonumber(ARGV[i]); i = i + 1
for k = 1, nw do
  if any then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
  i = i + 2
end
local na = tonumber(ARGV[i]); i = i + 1
for k = 1, na do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local nd = tonumber(ARGV[i]); i = i + 1
for k = 1, nd do
  redis.call('HDEL', KEYS[2], ARGV[i])
  i = i + 1
end
return won
)lua";

int64_t UnixMsNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int64_t ToMs(Duration d) { return std::chrono::duration_cast<Ms>(d).count(); }

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool Opens(const std::string& kind) { return kind == "timeout" || kind == "exit" || kind == "error"; }
bool Collected(const std::string& kind) { return Opens(kind) || kind == "busy"; }
bool Acted(const proto::Incident& i) {
  return i.kind == "hang" || i.kind == "crash" || i.kind == "transport-hang";
}

std::string EventKey(const proto::Event& e) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}", e.kind, e.rank, e.node, e.unix_ms, e.comm_id, e.seq,
                     e.code);
}

// Spaces a periodic read so it takes at most a third of the loop's time.
Ms Spacing(Ms nominal, double cost_ms) {
  return std::max(nominal, Ms(static_cast<int64_t>(3 * cost_ms)));
}

template <typename T>
bool Get(const Json& j, const char* name, T* out) {
  auto it = j.find(name);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
  } else {
    if (!it->is_number_integer()) return false;
  }
  *out = it->get<T>();
  return true;
}

}  // namespace

// ---- the persisted action and open window ---------------------------------------------------

std::string EncodeAction(const Action& a) {
  Json j = Json::object();
  j["v"] = proto::kSchemaVersion;
  j["incident"] = a.incident;
  j["decision"] = a.decision;
  Json save = Json::array();
  for (const SaveTarget& t : a.save) save.push_back(Json{{"rank", t.rank}, {"node", t.node}});
  j["save"] = std::move(save);
  j["phase"] = a.phase;
  j["sent"] = a.sent;
  j["acks_from"] = a.acks_from;
  j["deadline_unix_ms"] = a.deadline_unix_ms;
  j["nodes"] = a.nodes;
  j["decided_unix_ms"] = a.decided_unix_ms;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status DecodeAction(std::string_view text, Action* out) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corrupt("action: not a JSON object");
  int64_t v = 0;
  if (!Get(j, "v", &v)) return Status::Corrupt("action: missing v");
  if (v != proto::kSchemaVersion) {
    return Status::Unsupported(fmt::format("action: version {}, this master reads {}", v,
                                           proto::kSchemaVersion));
  }
  Action a;
  if (!Get(j, "incident", &a.incident) || !Get(j, "decision", &a.decision) ||
      !Get(j, "phase", &a.phase) || !Get(j, "sent", &a.sent) ||
      !Get(j, "acks_from", &a.acks_from) || !Get(j, "deadline_unix_ms", &a.deadline_unix_ms) ||
      !Get(j, "decided_unix_ms", &a.decided_unix_ms)) {
    return Status::Corrupt("action: a required field is missing or of the wrong type");
  }
  if (a.phase != "save" && a.phase != "stop" && a.phase != "done") {
    return Status::Corrupt(fmt::format("action: unknown phase '{}'", a.phase.substr(0, 16)));
  }
  auto save = j.find("save");
  if (save != j.end() && save->is_array()) {
    for (const Json& t : *save) {
      SaveTarget target;
      int64_t rank = -1;
      if (!t.is_object() || !Get(t, "rank", &rank) || !Get(t, "node", &target.node)) {
        return Status::Corrupt("action: a save target is malformed");
      }
      target.rank = static_cast<int>(rank);
      a.save.push_back(std::move(target));
    }
  }
  auto nodes = j.find("nodes");
  if (nodes != j.end() && nodes->is_array()) {
    for (const Json& n : *nodes) {
      if (!n.is_string()) return Status::Corrupt("action: a node is not a string");
      a.nodes.push_back(n.get<std::string>());
    }
  }
  *out = std::move(a);
  return Status::Ok();
}

std::string MasterLoop::OpenJson() const {
  Json j = Json::object();
  j["v"] = proto::kSchemaVersion;
  j["first_event_id"] = open_.first_event_id;
  j["first_event_unix_ms"] = open_.first_unix_ms;
  j["opened_unix_ms"] = open_.opened_unix_ms;
  j["outcomes"] = open_.outcomes;
  j["last_outcome"] = open_.last_outcome;
  j["watching"] = open_.watching;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string DefaultMasterId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host, getpid(), rd());
}

// ---- the loop -------------------------------------------------------------------------------

MasterLoop::MasterLoop(MasterOptions options, redis::Endpoint endpoint)
    : options_(std::move(options)),
      keys_(options_.job),
      redis_(std::move(endpoint),
             redis::ReconnectPolicy{.connect_timeout = Ms(500),
                                    .io_timeout = Ms(2000),
                                    .log_subsystem = Subsystem::kMaster}),
      lease_(keys_.Leader(), options_.id.empty() ? DefaultMasterId() : options_.id,
             Ms(std::max<int64_t>(ToMs(options_.config.lease), 30))),
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
  if (!redis_.Ensure(now)) {
    if (leading_ && !lease_.leading(now)) {
      FT_LOG(Warn, Master, "Redis unreachable past the lease: not acting until it is back");
      leading_ = false;
    }
    return;
  }
  const bool lead = lease_.Tick(redis_.client(), now);
  if (!lead) {
    if (leading_) FT_LOG(Warn, Master, "not leading any more: every action stops here");
    leading_ = false;
    if (now >= next_state_poll_ && redis_.connected()) {
      redis::Reply reply;
      if (redis_.client().Run({"HGET", keys_.MasterState(), "job_state"}, &reply).ok() &&
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
  if (!redis_.connected()) return;
  if (open_.open) CollectAndMaybeDecide(now, unix_ms);
  if (action_ && action_->phase != "done" && redis_.connected()) RunAction(now, unix_ms);
  if (now >= next_summary_ && redis_.connected()) SummaryRound(now, unix_ms);
}

void MasterLoop::Run(const std::atomic<bool>& stop, bool exit_when_stopped) {
  FT_LOG(Info, Master, "ftmaster '{}' for job {} (Redis {}), lease {} ms", lease_.id(),
         options_.job, redis::Redacted(redis_.endpoint()), lease_.lease().count());
  auto next = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    Tick();
    if (exit_when_stopped && job_state_ == "stopped") {
      FT_LOG(Info, Master, "job {} is stopped; exiting (--exit-when-stopped)", options_.job);
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
  if (redis_.connected()) lease_.Release(redis_.client());
  leading_ = false;
}

void MasterLoop::StartTerm(Clock::time_point now, int64_t unix_ms) {
  term_loaded_ = false;
  open_ = Open{};
  action_.reset();
  pending_acks_.clear();
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
  redis::Client& c = redis_.client();

  redis::Reply hash;
  if (!c.Run({"HGETALL", keys_.MasterState()}, &hash).ok()) return;
  std::unordered_map<std::string, std::string> state;
  if (hash.is_array()) {
    for (size_t i = 0; i + 1 < hash.size(); i += 2) state[hash[i].str()] = hash[i + 1].str();
  }
  job_state_ = state.count("job_state") ? state["job_state"] : "";
  if (job_state_ != "running" && job_state_ != "stopping" && job_state_ != "stopped") {
    if (!job_state_.empty()) {
      bad_.Report("master job_state", job_state_, Status::Corrupt("unknown job state"));
    }
    if (!FencedRun({{"HSET", keys_.MasterState(), "job_state", "running"}})) return;
    job_state_ = "running";
  }
  // The topology this leader decides with, for `ftmaster status` (which has no --topology of
  // its own to go by); an inferred one is recomputed by every reader from the membership.
  if (have_explicit_ && (state["topology"] != options_.topology || state["order"] != options_.order)) {
    if (!FencedRun({{"HSET", keys_.MasterState(), "topology", options_.topology, "order", options_.order}})) return;
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
    Status s = DecodeAction(state["action"], &a);
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
    Json j = Json::parse(state["open_incident"], nullptr, false);
    int64_t v = 0;
    Open o;
    bool ok = j.is_object() && Get(j, "v", &v) && v == proto::kSchemaVersion &&
              Get(j, "first_event_id", &o.first_event_id) &&
              Get(j, "first_event_unix_ms", &o.first_unix_ms) &&
              Get(j, "opened_unix_ms", &o.opened_unix_ms);
    uint64_t ms = 0, seq = 0;
    ok = ok && ParseStreamId(o.first_event_id, &ms, &seq);
    if (ok) {
      int64_t outcomes = 0;
      if (Get(j, "outcomes", &outcomes)) o.outcomes = static_cast<int>(outcomes);
      Get(j, "last_outcome", &o.last_outcome);
      Get(j, "watching", &o.watching);
      o.open = true;
      o.next_eval_unix_ms = unix_ms;
      // The window's events again: from its first event up to the cursor.
      redis::Reply reply;
      if (!c.Run({"XRANGE", keys_.Events(), o.first_event_id, cursor_.empty() ? "+" : cursor_,
                  "COUNT", std::to_string(kMaxWindowEvents)},
                 &reply).ok()) {
        return;
      }
      std::vector<StreamEntry> entries;
      ParseStream(reply, &entries);
      for (const StreamEntry& e : entries) {
        proto::Event event;
        if (!DecodeEventEntry(e, &event).ok() || !Collected(event.kind)) continue;
        if (o.seen.insert(EventKey(event)).second) o.events.push_back(std::move(event));
      }
      open_ = std::move(o);
      FT_LOG(Info, Master, "continuing the incident window opened at event {} ({} events so "
             "far){}", open_.first_event_id, open_.events.size(),
             open_.watching ? ", watching a busy rank" : "");
    } else {
      bad_.Report("master open_incident", state["open_incident"],
                  Status::Corrupt("unreadable; the window is dropped and events decide anew"));
      if (!FencedRun({{"HDEL", keys_.MasterState(), "open_incident"}})) return;
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

  next_progress_ = next_ranks_ = next_summary_ = next_acks_ = now;
  term_loaded_ = true;
  FT_LOG(Info, Master, "state loaded: job {}, events after {}, timeouts version {}{}{}",
         job_state_, cursor_.empty() ? "the start" : cursor_, timeouts_.table().version,
         open_.open ? ", an incident window open" : "",
         action_ && action_->phase != "done" ? ", an action in progress" : "");
}

// ---- events and the window ------------------------------------------------------------------

void MasterLoop::ReadEvents(Clock::time_point now, int64_t unix_ms) {
  for (int batch = 0; batch < kMaxEventBatchesPerTick; ++batch) {
    redis::Reply reply;
    const std::string start = cursor_.empty() ? "-" : "(" + cursor_;
    if (!redis_.client()
             .Run({"XRANGE", keys_.Events(), start, "+", "COUNT", std::to_string(kEventBatch)},
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
                        OpenJson()});
      next_progress_ = next_ranks_ = now;  // read the tables at once
    } else {
      writes.push_back({"HSET", keys_.MasterState(), "events_cursor", cursor_});
    }
    if (!FencedRun(writes)) return;
    if (entries.size() < kEventBatch) return;
  }
}

void MasterLoop::TakeEvent(const std::string& id, proto::Event event, int64_t unix_ms) {
  if (event.kind == "slowdown") {
    FT_LOG(Info, Master, "rank {} on {} is slow: {}", event.rank, event.node, event.message);
    return;
  }
  if (!Collected(event.kind)) {
    FT_LOG(Debug, Master, "event {} of kind '{}' ignored", id, event.kind);
    return;
  }
  if (job_state_ != "running") {
    FT_LOG(Debug, Master, "{} event {} of rank {} ignored: the job is {}", event.kind, id,
           event.rank, job_state_);
    return;
  }
  if (!open_.open) {
    if (!Opens(event.kind)) return;  // busy alone: nothing is stuck yet
    open_ = Open{};
    open_.open = true;
    open_.first_event_id = id;
    open_.first_unix_ms = event.unix_ms;
    open_.opened_unix_ms = unix_ms;
    FT_LOG(Info, Master, "incident window opened by the {} event {} of rank {} on {}: {}",
           event.kind, id, event.rank, event.node, event.message);
  }
  if (open_.events.size() >= kMaxWindowEvents) return;
  if (open_.seen.insert(EventKey(event)).second) open_.events.push_back(std::move(event));
}

bool MasterLoop::ReadProgress(Clock::time_point now) {
  const auto start = Clock::now();
  redis::Reply reply;
  if (!redis_.client().Run({"HGETALL", keys_.Progress()}, &reply).ok()) return false;
  progress_.Load(reply, &bad_);
  stats_.progress_read_ms = MsSince(start);
  next_progress_ = now + Spacing(options_.tick, stats_.progress_read_ms);
  return true;
}

bool MasterLoop::ReadRanks(Clock::time_point now) {
  const auto start = Clock::now();
  redis::Reply reply;
  if (!redis_.client().Run({"HGETALL", keys_.Ranks()}, &reply).ok()) return false;
  ranks_.Load(reply, &bad_);
  const double cost = MsSince(start);
  next_ranks_ = now + Spacing(open_.open ? options_.tick : options_.ranks_period, cost);
  if (ranks_.version() != ranks_version_seen_) {
    ranks_version_seen_ = ranks_.version();
    stragglers_.SetMembership(ranks_.values());
    // A stopped job launched again (new processes) is watched again.
    if (job_state_ == "stopped" && action_) {
      for (const proto::Membership& m : ranks_.values()) {
        if (m.state == "running" &&
            static_cast<int64_t>(m.incarnation / 1000000) > action_->decided_unix_ms) {
          if (FencedRun({{"HSET", keys_.MasterState(), "job_state", "running"}})) {
            job_state_ = "running";
            FT_LOG(Info, Master, "rank {} on {} started after the job was stopped: watching the "
                   "job again", m.rank, m.node);
          }
          break;
        }
      }
    }
  }
  return true;
}

const Topology& MasterLoop::CurrentTopology() {
  if (have_explicit_) return explicit_topology_;
  if (!inferred_ || inferred_for_ != ranks_.version()) {
    inferred_ = Topology::Infer(ranks_.values());
    inferred_for_ = ranks_.version();
  }
  return *inferred_;
}

AttributionInput MasterLoop::Input(int64_t unix_ms) const {
  AttributionInput in;
  in.progress = progress_.values();
  in.membership = ranks_.values();
  in.events = open_.events;
  in.now_unix_ms = unix_ms;
  in.stale_ms = static_cast<double>(3 * ToMs(options_.config.report_interval) +
                                    ToMs(options_.config.hang_window) + 1000);
  in.min_wait_ms = static_cast<double>(ToMs(options_.config.timeout_floor));
  return in;
}

void MasterLoop::CollectAndMaybeDecide(Clock::time_point now, int64_t unix_ms) {
  const int64_t window_ms = ToMs(options_.config.hang_window);
  if (open_.watching) {
    if (unix_ms < open_.next_eval_unix_ms) return;
    if (!ReadProgress(now) || !ReadRanks(now)) return;
    DecideWindow(now, Clock::now(), unix_ms);
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
  DecideWindow(now, Clock::now(), unix_ms);
}

void MasterLoop::DecideWindow(Clock::time_point tick_start, Clock::time_point closed_at, int64_t unix_ms) {
  const int64_t window_ms = ToMs(options_.config.hang_window);
  std::vector<proto::Incident> incidents = Attribute(Input(unix_ms));
  // Decided now, after the last reads and the attribution: the tick's time plus what the tick
  // has taken so far (at 16k ranks, a few hundred ms).
  const int64_t decided_unix_ms = unix_ms + static_cast<int64_t>(MsSince(tick_start));
  ++stats_.windows;
  if (incidents.empty()) {
    CloseIncident(fmt::format("resolved: nothing waits any more ({} event{} in the window)",
                              open_.events.size(), open_.events.size() == 1 ? "" : "s"));
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
    if (incident.kind == "busy") {
      busy_outcome = "busy:";
      for (size_t i = 0; i < incident.suspects.size(); ++i) {
        busy_outcome += (i ? "," : "") + std::to_string(incident.suspects[i].rank);
      }
    }
  }
  std::vector<proto::Incident> to_write;
  for (proto::Incident& incident : incidents) {
    if (incident.kind == "busy") {
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
    auto won = WriteIncidents(to_write, unix_ms, {}, {}, {{"open_incident", OpenJson()}}, {});
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
  action.save = decision.save;
  action.phase = decision.decision == "save-then-stop" ? "save" : "stop";
  action.decided_unix_ms = decided_unix_ms;
  auto won = WriteIncidents(to_write, unix_ms, decision.evict_nodes,
                            {{"action", EncodeAction(action)}, {"job_state", "stopping"}}, {},
                            {"open_incident"});
  if (!won) return;  // fenced out or Redis failed: the window stays open (retried if leading)
  stats_.last_close_to_written_ms = MsSince(closed_at);
  bool any = false;
  for (size_t i = 0; i < to_write.size(); ++i) {
    if (!(*won)[i]) continue;
    any = true;
    Print(to_write[i], Acted(to_write[i]) ? decision.evict_nodes : std::vector<std::string>{});
  }
  open_ = Open{};
  if (any) {
    FT_LOG(Info, Master, "incident {}: {} ({}); topology {}", action.incident, decision.decision,
           decision.reason, topology.Describe());
    action_ = std::move(action);
    pending_loaded_ = false;
    job_state_ = "stopping";
  } else {
    // Another master decided this window first: carry out what it stored.
    FT_LOG(Info, Master, "incident {} was already decided by another master", action.incident);
    redis::Reply stored, state;
    if (redis_.client().Run({"HGET", keys_.MasterState(), "action"}, &stored).ok() &&
        stored.is_string()) {
      Action a;
      if (DecodeAction(stored.str(), &a).ok()) action_ = std::move(a);
      pending_loaded_ = false;
    }
    if (redis_.client().Run({"HGET", keys_.MasterState(), "job_state"}, &state).ok() &&
        state.is_string()) {
      job_state_ = state.str();
    }
  }
}

void MasterLoop::CloseIncident(const std::string& why) {
  if (!FencedRun({{"HDEL", keys_.MasterState(), "open_incident"}})) return;
  FT_LOG(Info, Master, "incident window of event {} closed: {}", open_.first_event_id, why);
  open_ = Open{};
}

void MasterLoop::Print(const proto::Incident& incident, const std::vector<std::string>& evicted) {
  ++stats_.incidents_written;
  if (options_.out == nullptr) return;
  std::string text = IncidentBlock(incident, evicted);
  std::fwrite(text.data(), 1, text.size(), options_.out);
  std::fflush(options_.out);
}

// ---- carrying out a decision ----------------------------------------------------------------

std::string MasterLoop::LastAckId() {
  redis::Reply reply;
  if (!redis_.client().Run({"XREVRANGE", keys_.Acks(), "+", "-", "COUNT", "1"}, &reply).ok()) {
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
    writes.push_back({"HSET", keys_.MasterState(), "action", EncodeAction(next), "job_state",
                      "stopping"});
    if (!FencedRun(writes)) return;
    save_results_.clear();
    stats_.commands += static_cast<uint64_t>(asked);
    a = std::move(next);
    LoadPending();
    FT_LOG(Info, Master, "incident {}: asked {} rank{} to save; waiting up to {} ms for their "
           "acknowledgements", a.incident, asked, asked == 1 ? "" : "s",
           ToMs(options_.config.save_deadline));
  }
  if (a.phase == "save") {
    if (!AcksSettled(now, unix_ms, a.deadline_unix_ms)) return;
    if (!pending_acks_.empty()) {
      FT_LOG(Warn, Master, "incident {}: {} save acknowledgement{} missing at the deadline "
             "(FT_SAVE_DEADLINE); stopping anyway, the checkpoint may be incomplete",
             a.incident, pending_acks_.size(), pending_acks_.size() == 1 ? "" : "s");
    }
    if (!RecordSaveOutcome(a)) return;
    a.phase = "stop";
    a.sent = false;
    pending_loaded_ = false;
  }
  if (a.phase == "stop" && !a.sent) {
    redis::Reply members;
    if (!redis_.client().Run({"SMEMBERS", keys_.Workers()}, &members).ok()) return;
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
    writes.push_back({"HSET", keys_.MasterState(), "action", EncodeAction(next), "job_state",
                      "stopping"});
    if (!FencedRun(writes)) return;
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
    if (!FencedRun({{"HSET", keys_.MasterState(), "action", EncodeAction(done), "job_state",
                     "stopped"}})) {
      return;
    }
    a = std::move(done);
    job_state_ = "stopped";
    FT_LOG(Info, Master, "job {} stopped (incident {})", options_.job, a.incident);
  }
}

bool MasterLoop::RecordSaveOutcome(const Action& a) {
  SaveOutcome outcome = CountSaveOutcome(a.save, save_results_);
  if (!FencedRun({{"HSET", keys_.MasterState(), "checkpoint", EncodeSaveOutcome(a.incident, outcome)}})) {
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
    if (!redis_.client().Run({"XRANGE", keys_.Acks(), start, "+", "COUNT", "1000"}, &reply).ok()) {
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

// ---- timeouts and stragglers ----------------------------------------------------------------

void MasterLoop::SummaryRound(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  redis::Reply reply;
  if (!redis_.client().Run({"HGETALL", keys_.Summaries()}, &reply).ok()) return;
  summaries_.Load(reply, &bad_);
  if (now >= next_ranks_ && !ReadRanks(now)) return;
  for (const proto::RankSummary& s : summaries_.values()) {
    timeouts_.Add(s);
    stragglers_.Add(s);
  }
  if (timeouts_.Update(unix_ms)) unpublished_ = true;
  if (unpublished_) {
    const proto::TimeoutTable& table = timeouts_.table();
    if (FencedRun({{"SET", keys_.Timeouts(), proto::Encode(table)},
                   {"SET", keys_.TimeoutsVersion(), std::to_string(table.version)}})) {
      unpublished_ = false;
      ++stats_.timeouts_published;
      FT_LOG(Info, Master, "timeouts version {}: default {:.0f} ms, {} entr{}", table.version,
             table.default_ms, table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
    }
  }
  Stragglers(unix_ms);
  next_summary_ = now + Spacing(options_.summary_period, MsSince(start));
}

void MasterLoop::Stragglers(int64_t unix_ms) {
  std::vector<proto::Incident> incidents = stragglers_.Evaluate(unix_ms);
  const std::unordered_set<int>& named = stragglers_.named();
  std::vector<redis::Argv> ended;
  for (int rank : named_before_) {
    if (named.count(rank) || !straggler_fields_.count(rank)) continue;
    ended.push_back({"HDEL", keys_.MasterState(), fmt::format("straggler:{}", rank)});
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
      if (it->second > StragglerOptions::FromConfig(options_.config).steps + 2) {
        ended.push_back({"HDEL", keys_.MasterState(), fmt::format("straggler:{}", s.rank)});
      }
    }
  }
  if (!ended.empty() && FencedRun(ended)) {
    for (const redis::Argv& cmd : ended) {
      const int rank = std::atoi(cmd[2].c_str() + 10);
      straggler_fields_.erase(rank);
      inherited_seen_.erase(rank);
    }
  }
  for (int rank : named) {
    if (inherited_seen_.count(rank)) inherited_seen_.erase(rank);  // confirmed: ours now
  }
  named_before_ = named;
  for (proto::Incident& incident : incidents) {
    if (incident.suspects.empty()) continue;
    const int rank = incident.suspects.front().rank;
    if (straggler_fields_.count(rank)) continue;  // this episode was written already
    auto won = WriteIncidents({incident}, unix_ms, {}, {},
                              {{fmt::format("straggler:{}", rank), incident.id}}, {});
    if (!won) continue;
    straggler_fields_[rank] = incident.id;
    if ((*won)[0]) Print(incident, {});
  }
}

// ---- fenced writes --------------------------------------------------------------------------

bool MasterLoop::FencedRun(const std::vector<redis::Argv>& commands) {
  if (commands.empty()) return true;
  redis::Argv argv = {"EVAL", kFencedScript, "1", keys_.Leader(), lease_.id(),
                      std::to_string(commands.size())};
  for (const redis::Argv& c : commands) {
    argv.push_back(std::to_string(c.size()));
    argv.insert(argv.end(), c.begin(), c.end());
  }
  redis::Reply reply;
  Status s = redis_.client().Run(argv, &reply);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "write to Redis failed: {}; retrying next round", s.message());
    return false;
  }
  if (reply.is_integer() && reply.integer() == -1) {
    ++stats_.fenced_out;
    FT_LOG(Warn, Master, "write refused: the lease {} is no longer this master's ('{}'); "
           "standing by", keys_.Leader(), lease_.id());
    return false;
  }
  return true;
}

std::optional<std::vector<bool>> MasterLoop::WriteIncidents(
    const std::vector<proto::Incident>& incidents, int64_t unix_ms,
    const std::vector<std::string>& evict,
    const std::vector<std::pair<std::string, std::string>>& on_win,
    const std::vector<std::pair<std::string, std::string>>& always,
    const std::vector<std::string>& del) {
  redis::Argv argv = {"EVAL",
                      kIncidentScript,
                      "4",
                      keys_.Leader(),
                      keys_.MasterState(),
                      keys_.Incidents(),
                      keys_.Evicted(),
                      lease_.id(),
                      std::to_string(unix_ms),
                      std::to_string(incidents.size())};
  for (const proto::Incident& incident : incidents) {
    argv.push_back(incident.id);
    argv.push_back(incident.kind);
    argv.push_back(proto::SuspectsField(incident.suspects));
    argv.push_back(proto::Encode(incident));
  }
  argv.push_back(std::to_string(evict.size()));
  argv.insert(argv.end(), evict.begin(), evict.end());
  argv.push_back(std::to_string(on_win.size()));
  for (const auto& [f, v] : on_win) {
    argv.push_back(f);
    argv.push_back(v);
  }
  argv.push_back(std::to_string(always.size()));
  for (const auto& [f, v] : always) {
    argv.push_back(f);
    argv.push_back(v);
  }
  argv.push_back(std::to_string(del.size()));
  argv.insert(argv.end(), del.begin(), del.end());
  redis::Reply reply;
  Status s = redis_.client().Run(argv, &reply);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "writing incident {} failed: {}; retrying next round",
           incidents.empty() ? "" : incidents.front().id, s.message());
    return std::nullopt;
  }
  if (reply.is_integer() && reply.integer() == -1) {
    ++stats_.fenced_out;
    FT_LOG(Warn, Master, "incident write refused: the lease is no longer this master's; standing by");
    return std::nullopt;
  }
  std::vector<bool> won(incidents.size(), false);
  for (size_t i = 0; i < incidents.size() && i < reply.size(); ++i) won[i] = reply[i].integer() == 1;
  return won;
}

}  // namespace ft::master
