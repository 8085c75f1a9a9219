#include "ftmaster/page/reader.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "common/log.h"
#include "ftmaster/page/render.h"
#include "proto/codec.h"
#include "proto/node_history_codec.h"
#include "redis/spread.h"
#include "schema/master_hash.h"
#include "schema/node_hashes.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"
#include "schema/verdict_hash.h"

namespace ft::master::page {

namespace {

constexpr int kRefreshS = 2;

void AddGarbled(Snapshot* s, std::string where, std::string_view raw, const Status& why) {
  s->garbled.push_back({std::move(where), std::string(raw.substr(0, kGarbledBytes)), std::string(why.message())});
}

// A JSON value the page shows when it decodes; a garbled one is listed instead (nothing when the
// key is absent).
template <typename T>
void DecodeOrGarbled(const redis::Reply& value, std::string where, Snapshot* s, std::optional<T>* out) {
  if (!value.is_string()) return;
  T decoded;
  if (Status st = proto::Decode(value.str(), &decoded); st.ok()) {
    *out = std::move(decoded);
  } else {
    AddGarbled(s, std::move(where), value.str(), st);
  }
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Fields of an HGETALL reply that did not decode (a field may hold a garbled value: skipped).
size_t Undecoded(const redis::Reply& reply, size_t decoded) {
  const size_t fields = reply.is_array() ? reply.size() / 2 : 0;
  return fields > decoded ? fields - decoded : 0;
}

void ReadRanks(redis::Commands& redis, const proto::Keys& keys, int64_t now_unix_ms, BadValues* bad, RankHashes* h,
               Snapshot* s) {
  // A large job's three hashes are read at most every kRankReadShare-th of the time: the page
  // never takes more than a tenth of what Redis spends on them. In between, the last read's.
  if (now_unix_ms >= h->next_read_unix_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    redis::Reply reply;
    h->undecoded = 0;
    if (redis.Run(schema::GetMemberships(keys), &reply).ok()) {
      h->ranks.Load(reply, bad);
      h->undecoded += Undecoded(reply, h->ranks.values().size());
    }
    if (redis::HGetAllOf(redis, keys.AllProgress(), &reply).ok()) {
      h->progress.Load(reply, bad);
      h->undecoded += Undecoded(reply, h->progress.values().size());
    }
    if (redis::HGetAllOf(redis, keys.AllSummaries(), &reply).ok()) {
      h->summaries.Load(reply, bad);
      h->undecoded += Undecoded(reply, h->summaries.values().size());
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    h->read_unix_ms = now_unix_ms;
    h->next_read_unix_ms = now_unix_ms + (RankHashes::kRankReadShare - 1) * took.count();
  }
  s->ranks_read_unix_ms = h->read_unix_ms;
  const size_t undecoded = h->undecoded;
  const auto& ranks = h->ranks;
  const auto& progress = h->progress;
  const auto& summaries = h->summaries;
  std::map<int, RankRow> rows;
  for (const proto::Membership& m : ranks.values()) {
    RankRow& r = rows[m.rank];
    r.rank = m.rank;
    r.node = m.node;
    r.state = m.state;
  }
  for (const proto::RankProgress& p : progress.values()) {
    RankRow& r = rows[p.rank];
    r.rank = p.rank;
    if (r.node.empty()) r.node = p.node;
    r.state = p.state;
    r.reported = true;
  }
  for (const proto::RankSummary& m : summaries.values()) {
    auto it = rows.find(m.rank);
    if (it == rows.end()) continue;  // a summary of a rank no longer a member
    it->second.step = m.declared_step >= 0 ? m.declared_step : static_cast<int64_t>(m.steps);
    it->second.step_ms = m.step_p50_ms > 0 ? m.step_p50_ms : m.step_ms;
  }
  s->ranks.reserve(rows.size());
  for (auto& [rank, row] : rows) s->ranks.push_back(std::move(row));
  if (undecoded > 0) {
    s->garbled.push_back({"ranks", "", fmt::format("{} rank value{} did not decode (skipped; the log names them)",
                                                   undecoded, undecoded == 1 ? "" : "s")});
  }
}

void ReadIncidents(redis::Commands& redis, const proto::Keys& keys, Snapshot* s) {
  schema::StreamRead<proto::Incident> read;
  if (!schema::ReadStream(redis, schema::Newest(keys.Incidents(), kIncidentsShown), &read).ok()) return;
  for (auto it = read.entries.rbegin(); it != read.entries.rend(); ++it) {
    if (!it->ok()) {
      AddGarbled(s, "incident " + it->id, it->RawJson(), it->why);
      continue;
    }
    IncidentRow row;
    row.stream_id = it->id;
    row.incident = std::move(it->value);
    s->incidents.push_back(std::move(row));
  }
}

void ReadCheckpoints(redis::Commands& redis, const proto::Keys& keys, const redis::Reply& steps, Snapshot* s) {
  if (!steps.is_array()) return;
  std::vector<int64_t> listed;
  for (size_t i = 0; i < steps.size() && i < kCheckpointsShown; ++i) {
    CheckpointRow row;
    int64_t step = -1;
    if (!ParseInt(steps[i].str(), &step).ok()) continue;
    row.step = step;
    s->checkpoints.push_back(row);
    listed.push_back(step);
  }
  if (s->checkpoints.empty()) return;
  redis::Reply got;
  std::vector<schema::HashValue<proto::StepVerdict>> verdicts;
  if (!redis.Run(schema::GetVerdictsOf(keys, listed), &got).ok() || !schema::DecodeVerdictsOf(listed, got, &verdicts).ok()) {
    return;
  }
  for (auto& v : verdicts) {
    if (!v.ok()) {
      AddGarbled(s, "verdict of step " + v.field, v.raw, v.why);
      continue;
    }
    for (CheckpointRow& row : s->checkpoints) {
      if (row.step == v.value.step) row.verdict = v.value;
    }
  }
}

void ReadNodes(redis::Commands& redis, Snapshot* s) {
  // Keys of no job (other slots on a Redis Cluster): one command each, never pipelined with the job's.
  redis::Reply nodes, cordons;
  const bool have_index = redis.Run(schema::NodeIndexExists(), &nodes).ok() && nodes.integer() > 0;
  const bool have_cordons = redis.Run(schema::GetCordons(), &cordons).ok() && cordons.size() > 0;
  s->node_keys_present = have_index || have_cordons;
  if (!s->node_keys_present) return;
  std::vector<schema::HashValue<proto::CordonEntry>> read;
  if (Status st = schema::DecodeCordons(cordons, &read); !st.ok()) AddGarbled(s, "cordons", "", st);
  for (schema::HashValue<proto::CordonEntry>& c : read) {
    if (s->cordons.size() >= 100) break;
    if (!c.ok()) {
      AddGarbled(s, "cordon " + c.field, c.raw, c.why);
      continue;
    }
    s->cordons.push_back(std::move(c.value));
  }
  if (!have_index) return;
  // The job's nodes: the incidents' suspects' and evicted first, then the rest in order.
  std::vector<std::string> order;
  std::set<std::string> seen;
  auto add = [&](const std::string& node) {
    if (!node.empty() && order.size() < kNodeHistoryNodes && seen.insert(node).second) order.push_back(node);
  };
  for (auto it = s->incidents.rbegin(); it != s->incidents.rend(); ++it) {
    for (const proto::Suspect& sp : it->incident.suspects) add(sp.node);
    for (const proto::Eviction& e : it->incident.evicted) add(e.node);
  }
  std::set<std::string> job_nodes;
  for (const RankRow& r : s->ranks) job_nodes.insert(r.node);
  std::vector<std::string> sorted(job_nodes.begin(), job_nodes.end());
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  for (const std::string& n : sorted) add(n);
  for (const std::string& node : order) {
    redis::Reply len, entries;
    if (!redis.Run(schema::Length(proto::Keys::NodeHistory(node)), &len).ok() || len.integer() <= 0) continue;
    NodeHistoryRow row;
    row.node = node;
    row.total = len.integer();
    if (redis.Run(schema::Newest(proto::Keys::NodeHistory(node), kNodeRecordsShown), &entries).ok()) {
      std::vector<StreamEntry> parsed;
      ParseStream(entries, &parsed);
      for (const StreamEntry& e : parsed) {
        proto::NodeRecord r;
        Status st = schema::DecodeNodeRecord(e, node, &r);
        if (!st.ok()) {
          const std::string* json = e.Get("json");
          AddGarbled(s, "history of " + node + " " + e.id, json ? std::string_view(*json) : std::string_view(), st);
          continue;
        }
        row.records.push_back(std::move(r));
      }
    }
    s->node_history.push_back(std::move(row));
  }
}

}  // namespace

void ReadSnapshot(redis::Commands& redis, const std::string& job, int64_t now_unix_ms, BadValues* bad,
                  RankHashes* hashes, Snapshot* s) {
  const proto::Keys keys(job);
  s->job = job;
  s->taken_unix_ms = now_unix_ms;
  s->job_state = "unknown";
  std::vector<redis::Reply> r;
  Status st = redis.PipelinePartial({schema::GetLeader(keys),
                                     schema::master_hash::Get(keys, schema::master_hash::kJobState),
                                     schema::master_hash::Get(keys, schema::master_hash::kOpenIncident),
                                     schema::CountEvicted(keys),
                                     schema::master_hash::Get(keys, schema::master_hash::kGoodput),
                                     schema::Length(keys.Incidents()),
                                     schema::GetPlan(keys),
                                     schema::NewestSteps(keys, kCheckpointsShown)},
                                    &r);
  if (!st.ok() || r.size() != 8) {
    s->redis_up = false;
    s->redis_error = st.ok() ? "a short reply" : std::string(st.message());
    return;
  }
  s->redis_up = true;
  if (r[0].is_string()) s->leader = r[0].str();
  if (r[1].is_string()) {
    proto::JobState state;
    if (Status js = proto::DecodeJobState(r[1].str(), &state); js.ok()) {
      s->job_state = proto::JobStateName(state);
    } else {
      s->job_state = "garbled";
      AddGarbled(s, "master job_state", r[1].str(), js);
    }
  }
  s->open_incident = r[2].is_string();
  s->evicted_nodes = r[3].integer();
  DecodeOrGarbled(r[4], "master goodput", s, &s->goodput);
  s->incidents_total = r[5].integer();
  DecodeOrGarbled(r[6], "restore plan", s, &s->plan);
  ReadRanks(redis, keys, now_unix_ms, bad, hashes, s);
  ReadIncidents(redis, keys, s);
  ReadCheckpoints(redis, keys, r[7], s);
  ReadNodes(redis, s);
}

PageReader::PageReader(PageReaderOptions options)
    : options_(std::move(options)),
      poller_(options_.endpoint, options_.interval, [this](redis::Commands* redis) { Poll(redis); }) {
  Snapshot empty;
  empty.job = options_.job;
  empty.job_state = "unknown";
  empty.redis_error = "not read yet";
  Publish(empty);
}

PageReader::~PageReader() { Stop(); }

void PageReader::Publish(const Snapshot& s) {
  auto r = std::make_shared<Rendered>();
  r->html = RenderHtml(s, kRefreshS);
  for (Panel p : kPanels) r->json[PanelName(p)] = RenderJson(s, p);
  MutexLock lock(&mu_);
  rendered_ = std::move(r);
}

std::shared_ptr<const PageReader::Rendered> PageReader::Newest() {
  MutexLock lock(&mu_);
  return rendered_;
}

std::map<std::string, metrics::Route> PageReader::Routes() {
  std::map<std::string, metrics::Route> routes;
  routes["/"] = {"text/html; charset=utf-8", [this] { return Newest()->html; }};
  for (Panel p : kPanels) {
    const std::string name = PanelName(p);
    routes["/api/" + name + ".json"] = {"application/json", [this, name] { return Newest()->json.at(name); }};
  }
  return routes;
}

void PageReader::Poll(redis::Commands* redis) {
  Snapshot s;
  if (redis != nullptr) {
    ReadSnapshot(*redis, options_.job, NowUnixMs(), &bad_, &hashes_, &s);
  } else {
    s.job = options_.job;
    s.taken_unix_ms = NowUnixMs();
    s.job_state = "unknown";
    s.redis_error = "cannot reach Redis (see the log)";
  }
  Publish(s);
}

}  // namespace ft::master::page
