// `ftmaster status` (cli.h): one row per rank and the job's state, leader and topology.
#include <fmt/format.h>

#include <map>
#include <vector>

#include "common/log.h"
#include "ftmaster/cli/cli.h"
#include "ftmaster/cli/cli_util.h"
#include "ftmaster/core/text.h"
#include "ftmaster/core/topology.h"
#include "ftmaster/store.h"
#include "proto/keys.h"
#include "redis/spread.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::master {
namespace {

using cli::AsJson;
using cli::Age;
using cli::Json;
using cli::Run;
namespace mh = schema::master_hash;

constexpr int kRecentEvents = 2000;

// --topology, else the one the leading master was given, else inferred from membership. An
// error only for a bad --topology.
Status ResolveTopology(const CliOptions& o, mh::Fields& state,
                       const std::vector<proto::Membership>& members, Topology* topology) {
  std::string sizes = !o.topology.empty() ? o.topology : state[mh::kTopology];
  std::string order = !o.topology.empty() ? o.order : state[mh::kOrder];
  Status parsed = sizes.empty() ? Status::NotFound("no topology given")
                                : Topology::Parse(sizes, order, 0, topology);
  if (parsed.ok()) return Status::Ok();
  if (!o.topology.empty()) return parsed;
  if (!sizes.empty()) {
    FT_LOG(Warn, Master, "ignoring the master's stored topology '{}' (order '{}'): {}; inferring it",
           sizes, order, parsed.message());
  }
  // Inferred; once the ranks have left, the master's last inference while they ran.
  Topology last;
  const bool have_last = state.count(mh::kInferredTopology) &&
                         Topology::Parse(state[mh::kInferredTopology], state[mh::kInferredOrder], 0,
                                         &last).ok();
  Topology kept = have_last ? Topology::Kept(last, "inferred while the ranks ran") : Topology();
  *topology = Topology::InferOrKeep(members, have_last ? &kept : nullptr);
  return Status::Ok();
}

}  // namespace

Status StatusCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  BadValues bad;
  redis::Reply reply;
  DecodedHash<proto::Membership> ranks("ranks");
  DecodedHash<proto::RankProgress> progress("progress");
  DecodedHash<proto::RankSummary> summaries("summary");
  FT_RETURN_IF_ERROR(Run(client, schema::GetMemberships(keys), &reply));
  ranks.Load(reply, &bad);
  // Progress and summaries are spread over the job's groups (proto/keys.h).
  FT_RETURN_IF_ERROR(redis::HGetAllOf(client, keys.AllProgress(), &reply).WithContext("HGETALL"));
  progress.Load(reply, &bad);
  FT_RETURN_IF_ERROR(redis::HGetAllOf(client, keys.AllSummaries(), &reply).WithContext("HGETALL"));
  summaries.Load(reply, &bad);
  schema::StreamRead<proto::Event> events;
  FT_RETURN_IF_ERROR(schema::ReadStream(client, schema::Newest(keys.Events(), kRecentEvents), &events));
  std::map<int, proto::Event> last_event;  // newest first in the reply: keep the first seen
  for (schema::Entry<proto::Event>& e : events.entries) {
    if (e.ok()) last_event.try_emplace(e.value.rank, std::move(e.value));
  }
  FT_RETURN_IF_ERROR(Run(client, mh::GetAll(keys), &reply));
  mh::Fields state;
  FT_RETURN_IF_ERROR(mh::DecodeAll(reply, &state));
  redis::Reply leader, version, incidents, evicted;
  FT_RETURN_IF_ERROR(Run(client, schema::GetLeader(keys), &leader));
  FT_RETURN_IF_ERROR(Run(client, schema::GetTimeoutsVersion(keys), &version));
  FT_RETURN_IF_ERROR(Run(client, schema::Length(keys.Incidents()), &incidents));
  FT_RETURN_IF_ERROR(Run(client, schema::CountEvicted(keys), &evicted));

  Topology topology;
  FT_RETURN_IF_ERROR(ResolveTopology(o, state, ranks.values(), &topology));

  struct Row {
    const proto::Membership* member = nullptr;
    const proto::RankProgress* progress = nullptr;
    const proto::RankSummary* summary = nullptr;
    const proto::Event* event = nullptr;
  };
  std::map<int, Row> rows;
  for (const auto& m : ranks.values()) rows[m.rank].member = &m;
  for (const auto& p : progress.values()) rows[p.rank].progress = &p;
  for (const auto& s : summaries.values()) rows[s.rank].summary = &s;
  for (const auto& [rank, e] : last_event) rows[rank].event = &e;

  // Absent or garbled (reported above, counted in garbled_values): "unknown".
  const std::string job_state = JobStateText(ReadJobState(state.count(mh::kJobState) ? state[mh::kJobState] : "", &bad));
  if (o.json) {
    Json j = Json::object();
    j["job"] = o.job;
    j["job_state"] = job_state;
    j["leader"] = leader.is_string() ? Json(leader.str()) : Json(nullptr);
    j["timeouts_version"] = version.is_string() ? Json(version.str()) : Json(nullptr);
    j["incidents"] = incidents.integer();
    j["evicted"] = evicted.integer();
    j["open_incident"] = state.count(mh::kOpenIncident)
                             ? Json::parse(state[mh::kOpenIncident], nullptr, false)
                             : Json(nullptr);
    Json t = Json::object();
    t["known"] = topology.known();
    t["inferred"] = topology.inferred();
    t["kept"] = topology.kept();
    t["describe"] = topology.Describe();
    if (topology.known()) {
      t["tp"] = topology.tp();
      t["dp"] = topology.dp();
      t["pp"] = topology.pp();
      t["order"] = topology.order();
    }
    j["topology"] = std::move(t);
    Json list = Json::array();
    for (const auto& [rank, row] : rows) {
      Json r = Json::object();
      r["rank"] = rank;
      r["membership"] = row.member ? AsJson(*row.member) : Json(nullptr);
      r["progress"] = row.progress ? AsJson(*row.progress) : Json(nullptr);
      r["summary"] = row.summary ? AsJson(*row.summary) : Json(nullptr);
      r["last_event"] = row.event ? AsJson(*row.event) : Json(nullptr);
      list.push_back(std::move(r));
    }
    j["ranks"] = std::move(list);
    j["garbled_values"] = bad.count();
    *out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
    *out += "\n";
    return Status::Ok();
  }

  *out += fmt::format("job {}: {}; leader {}; timeouts version {}; {} incident{}; {} node{} "
                      "evicted\n",
                      o.job, job_state, leader.is_string() ? leader.str() : "(none)",
                      version.is_string() ? version.str() : "(none)", incidents.integer(),
                      incidents.integer() == 1 ? "" : "s", evicted.integer(),
                      evicted.integer() == 1 ? "" : "s");
  *out += fmt::format("topology: {}\n", topology.Describe());
  if (state.count(mh::kOpenIncident)) *out += "an incident window is open (the master is deciding)\n";
  if (rows.empty()) {
    *out += "no ranks have reported (is ftworker running on the nodes, with this --job?)\n";
    return Status::Ok();
  }
  *out += fmt::format("{:>6}  {:<16}  {:<22}  {:>8}  {:>10}  {}\n", "RANK", "NODE", "STATE", "STEP",
                      "STEP TIME", "LAST EVENT");
  for (const auto& [rank, row] : rows) {
    std::string node = row.progress ? row.progress->node : row.member ? row.member->node : "?";
    std::string st = row.progress ? row.progress->state : row.member ? row.member->state : "?";
    if (row.progress) {
      if (row.progress->busy) st += ", busy";
      const int64_t age = o.now_unix_ms - row.progress->observed_unix_ms;
      if (age > 5000) st += fmt::format(" ({} old)", HumanMs(static_cast<double>(age)));
    } else {
      st += " (no report)";
    }
    std::string step = "-", step_time = "-";
    if (row.summary) {
      // The job's own step number when it says it (ft_step_done), else the steps ft counted.
      step = std::to_string(row.summary->declared_step >= 0 ? row.summary->declared_step : row.summary->steps);
      const double ms = row.summary->step_p50_ms > 0 ? row.summary->step_p50_ms : row.summary->step_ms;
      if (ms > 0) step_time = HumanMs(ms);
    }
    std::string event = "-";
    if (row.event) event = fmt::format("{} {}", row.event->kind, Age(o.now_unix_ms, row.event->unix_ms));
    *out += fmt::format("{:>6}  {:<16}  {:<22}  {:>8}  {:>10}  {}\n", rank, node, st, step,
                        step_time, event);
  }
  *out += cli::GarbledNote(bad.count());
  return Status::Ok();
}

}  // namespace ft::master
