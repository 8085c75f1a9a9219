#include "ftmaster/cli.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>
#include <set>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "ftmaster/action_runner.h"
#include "ftmaster/prefetch_view.h"
#include "ftmaster/report.h"
#include "ftmaster/core/save_outcome.h"
#include "ftmaster/store.h"
#include "ftmaster/core/text.h"
#include "ftmaster/core/topology.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "redis/spread.h"

namespace ft::master {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kRecentEvents = 2000;

// A decoded value as JSON (the codec's own encoding, parsed back for embedding).
template <typename T>
Json AsJson(const T& value) {
  return Json::parse(proto::Encode(value), nullptr, false);
}

Status Run(redis::Commands& client, const redis::Argv& argv, redis::Reply* reply) {
  return client.Run(argv, reply).WithContext(argv[0]);
}

std::string Age(int64_t now, int64_t then) {
  if (then <= 0) return "?";
  return HumanMs(static_cast<double>(std::max<int64_t>(0, now - then))) + " ago";
}

}  // namespace

Status StatusCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  BadValues bad;
  redis::Reply reply;
  DecodedHash<proto::Membership> ranks("ranks");
  DecodedHash<proto::RankProgress> progress("progress");
  DecodedHash<proto::RankSummary> summaries("summary");
  FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.Ranks()}, &reply));
  ranks.Load(reply, &bad);
  // Progress and summaries are spread over the job's groups (proto/keys.h).
  FT_RETURN_IF_ERROR(redis::HGetAllOf(client, keys.AllProgress(), &reply).WithContext("HGETALL"));
  progress.Load(reply, &bad);
  FT_RETURN_IF_ERROR(redis::HGetAllOf(client, keys.AllSummaries(), &reply).WithContext("HGETALL"));
  summaries.Load(reply, &bad);
  FT_RETURN_IF_ERROR(Run(client, {"XREVRANGE", keys.Events(), "+", "-", "COUNT",
                                  std::to_string(kRecentEvents)}, &reply));
  std::vector<StreamEntry> entries;
  ParseStream(reply, &entries);
  std::map<int, proto::Event> last_event;  // newest first in the reply: keep the first seen
  for (const StreamEntry& e : entries) {
    proto::Event event;
    if (!DecodeEventEntry(e, &event).ok()) continue;
    last_event.try_emplace(event.rank, std::move(event));
  }
  FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.MasterState()}, &reply));
  std::map<std::string, std::string> state;
  for (size_t i = 0; i + 1 < reply.size(); i += 2) state[reply[i].str()] = reply[i + 1].str();
  redis::Reply leader, version, incidents, evicted;
  FT_RETURN_IF_ERROR(Run(client, {"GET", keys.Leader()}, &leader));
  FT_RETURN_IF_ERROR(Run(client, {"GET", keys.TimeoutsVersion()}, &version));
  FT_RETURN_IF_ERROR(Run(client, {"XLEN", keys.Incidents()}, &incidents));
  FT_RETURN_IF_ERROR(Run(client, {"SCARD", keys.Evicted()}, &evicted));

  // --topology, else the one the leading master was given, else inferred from membership.
  Topology topology;
  std::string sizes = !o.topology.empty() ? o.topology : state["topology"];
  std::string order = !o.topology.empty() ? o.order : state["order"];
  Status parsed = sizes.empty() ? Status::NotFound("no topology given")
                                : Topology::Parse(sizes, order, 0, &topology);
  if (!parsed.ok()) {
    if (!o.topology.empty()) return parsed;
    if (!sizes.empty()) {
      FT_LOG(Warn, Master, "ignoring the master's stored topology '{}' (order '{}'): {}; inferring it",
             sizes, order, parsed.message());
    }
    // Inferred; once the ranks have left, the master's last inference while they ran.
    Topology last;
    const bool have_last = state.count("inferred_topology") &&
                           Topology::Parse(state["inferred_topology"], state["inferred_order"], 0,
                                           &last).ok();
    Topology kept = have_last ? Topology::Kept(last, "inferred while the ranks ran") : Topology();
    topology = Topology::InferOrKeep(ranks.values(), have_last ? &kept : nullptr);
  }

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
  const std::string job_state = JobStateText(ReadJobState(state.count("job_state") ? state["job_state"] : "", &bad));
  if (o.json) {
    Json j = Json::object();
    j["job"] = o.job;
    j["job_state"] = job_state;
    j["leader"] = leader.is_string() ? Json(leader.str()) : Json(nullptr);
    j["timeouts_version"] = version.is_string() ? Json(version.str()) : Json(nullptr);
    j["incidents"] = incidents.integer();
    j["evicted"] = evicted.integer();
    j["open_incident"] = state.count("open_incident")
                             ? Json::parse(state["open_incident"], nullptr, false)
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
  if (state.count("open_incident")) *out += "an incident window is open (the master is deciding)\n";
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
  if (bad.count() > 0) {
    *out += fmt::format("{} garbled value{} skipped (see the warnings above)\n", bad.count(),
                        bad.count() == 1 ? "" : "s");
  }
  return Status::Ok();
}

// The published restore plan's step and what took its copies ("termination 2"): after a
// teardown or a preemption, what the relaunch restores came from termination saves, which no
// save round counted. Empty when there is no plan with a step.
struct PlanSummary {
  int64_t version = 0;
  int64_t step = -1;
  std::map<std::string, int> origins;
};

Status ReadPlanSummary(redis::Commands& client, const proto::Keys& keys, BadValues* bad, PlanSummary* out) {
  redis::Reply plan_reply;
  FT_RETURN_IF_ERROR(Run(client, {"GET", keys.Restore()}, &plan_reply));
  if (!plan_reply.is_string()) return Status::Ok();
  proto::RestorePlan plan;
  if (Status s = proto::Decode(plan_reply.str(), &plan); !s.ok()) {
    bad->Report(keys.Restore(), plan_reply.str(), s);
    return Status::Ok();
  }
  if (plan.step < 0) return Status::Ok();
  redis::Reply copies;
  FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.CkptStep(plan.step)}, &copies));
  std::vector<proto::CkptCopy> decoded;
  for (size_t i = 0; i + 1 < copies.size(); i += 2) {
    proto::CkptCopy c;
    if (Status s = proto::Decode(copies[i + 1].str(), &c); !s.ok()) {
      bad->Report(keys.CkptStep(plan.step) + " " + copies[i].str(), copies[i + 1].str(), s);
      continue;
    }
    if (c.step == plan.step && !c.torn) decoded.push_back(std::move(c));
  }
  out->version = plan.version;
  out->step = plan.step;
  out->origins = CountOrigins(decoded);
  return Status::Ok();
}

namespace {

// The stacks the workers took for each incident (`<incident>-stacks-<rank>` acks,
// stacks_request.h), by incident id.
struct RankStack {
  int rank = -1;
  std::string node, result, text;
};
Status ReadStacks(redis::Commands& client, const proto::Keys& keys, std::map<std::string, std::vector<RankStack>>* out) {
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, {"XRANGE", keys.Acks(), "-", "+"}, &reply));
  std::vector<StreamEntry> entries;
  ParseStream(reply, &entries);
  for (const StreamEntry& e : entries) {
    const std::string* json = e.Get("json");
    proto::CommandAck ack;
    if (json == nullptr || !proto::Decode(*json, &ack).ok()) continue;  // not a stack: the others report bad acks
    const size_t at = ack.id.rfind("-stacks-");
    if (at == std::string::npos) continue;
    (*out)[ack.id.substr(0, at)].push_back({ack.rank, ack.node, ack.result, ack.message});
  }
  return Status::Ok();
}

// The suspects' stacks, then the healthy ranks' grouped by their main thread's stack (the
// dominant group first): a suspect whose stack is not the healthy ranks' is where it is stuck.
std::string StacksBlock(const proto::Incident& incident, const std::vector<RankStack>& stacks) {
  std::set<int> suspects;
  for (const proto::Suspect& s : incident.suspects) suspects.insert(s.rank);
  auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  std::string out;
  std::map<std::string, std::vector<int>> healthy;  // main thread's stack -> ranks
  for (const RankStack& s : stacks) {
    if (suspects.count(s.rank)) {
      out += s.result == "done"
                 ? fmt::format("   stack of rank {} (suspect, {}): {}\n", s.rank, s.node, first_line(s.text))
                 : fmt::format("   stack of rank {} (suspect, {}): not taken: {}\n", s.rank, s.node, s.text);
    } else if (s.result == "done") {
      // Alike whatever their thread ids: "tid 4100: " left out of the key.
      std::string stack = first_line(s.text);
      if (const size_t colon = stack.find(": "); stack.rfind("tid ", 0) == 0 && colon != std::string::npos) {
        stack = stack.substr(colon + 2);
      }
      healthy[stack].push_back(s.rank);
    }
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups(healthy.begin(), healthy.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  for (const auto& [stack, ranks] : groups) {
    std::string list;
    for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
    out += fmt::format("   stack of healthy rank{} {}: {}\n", ranks.size() == 1 ? "" : "s", list, stack);
  }
  return out;
}

}  // namespace

Status IncidentsCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  BadValues bad;
  PlanSummary plan;
  FT_RETURN_IF_ERROR(ReadPlanSummary(client, keys, &bad, &plan));
  std::map<std::string, std::vector<RankStack>> stacks;
  FT_RETURN_IF_ERROR(ReadStacks(client, keys, &stacks));
  std::string start = "-";
  size_t shown = 0;
  // The newest incident is written last, with the plan the relaunch restores.
  std::string held;
  std::optional<Json> held_json;
  auto flush = [&] {
    if (held_json) *out += held_json->dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    *out += held;
    held.clear();
    held_json.reset();
  };
  for (;;) {
    redis::Reply reply;
    FT_RETURN_IF_ERROR(Run(client, {"XRANGE", keys.Incidents(), start, "+", "COUNT", "1000"}, &reply));
    std::vector<StreamEntry> entries;
    ParseStream(reply, &entries);
    std::vector<proto::Incident> batch;
    for (const StreamEntry& e : entries) {
      start = "(" + e.id;
      const std::string* json = e.Get("json");
      proto::Incident incident;
      Status s = json ? proto::Decode(*json, &incident) : Status::Corrupt("no json field");
      if (!s.ok()) {
        bad.Report(fmt::format("incident {}", e.id), json ? *json : std::string_view(), s);
        continue;
      }
      batch.push_back(std::move(incident));
    }
    // The save outcome of each incident whose save ran (`checkpoint:<id>`, master hash).
    std::vector<std::string> outcomes(batch.size());
    if (!batch.empty()) {
      redis::Argv argv = {"HMGET", keys.MasterState()};
      for (const proto::Incident& i : batch) argv.push_back("checkpoint:" + i.id);
      redis::Reply got;
      FT_RETURN_IF_ERROR(Run(client, argv, &got));
      for (size_t k = 0; k < batch.size() && k < got.size(); ++k) {
        if (got[k].is_string()) outcomes[k] = got[k].str();
      }
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      const proto::Incident& incident = batch[k];
      SaveOutcome outcome;
      const bool saved = !outcomes[k].empty() && DecodeSaveOutcome(outcomes[k], &outcome);
      if (!outcomes[k].empty() && !saved) {
        bad.Report(fmt::format("checkpoint:{}", incident.id), outcomes[k], Status::Corrupt("not a save outcome"));
      }
      ++shown;
      flush();
      if (o.json) {
        Json j = AsJson(incident);
        if (saved) j["checkpoint"] = Json::parse(outcomes[k], nullptr, false);
        if (auto st = stacks.find(incident.id); st != stacks.end()) {
          Json list = Json::array();
          for (const RankStack& r : st->second) {
            list.push_back({{"rank", r.rank}, {"node", r.node}, {"result", r.result}, {"stack", r.text}});
          }
          j["stacks"] = std::move(list);
        }
        held_json = std::move(j);
      } else {
        held = IncidentBlock(incident, {});
        if (saved) held += fmt::format("   checkpoint: {}\n", DescribeSaveOutcome(outcome));
        if (auto st = stacks.find(incident.id); st != stacks.end()) held += StacksBlock(incident, st->second);
      }
    }
    if (entries.size() < 1000) break;
  }
  if (plan.step >= 0 && shown > 0) {
    if (held_json) {
      (*held_json)["restore"] = {{"plan", plan.version}, {"step", plan.step}, {"saved_by", plan.origins}};
    } else {
      held += fmt::format("   restore: plan {} restores step {}, its copies saved by {}\n", plan.version, plan.step,
                          plan.origins.empty() ? std::string("(none reported)") : FormatOrigins(plan.origins));
    }
  }
  flush();
  if (!o.json && shown == 0) *out += fmt::format("no incidents for job {}\n", o.job);
  return Status::Ok();
}

Status TimeoutsCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, {"GET", keys.Timeouts()}, &reply));
  if (!reply.is_string()) {
    if (o.json) {
      *out += "null\n";
    } else {
      *out += fmt::format("no timeouts published for job {} yet (workers use FT_TIMEOUT_WARMUP)\n",
                          o.job);
    }
    return Status::Ok();
  }
  proto::TimeoutTable table;
  FT_RETURN_IF_ERROR(proto::Decode(reply.str(), &table).WithContext(keys.Timeouts()));
  if (o.json) {
    *out += proto::Encode(table);
    *out += "\n";
    return Status::Ok();
  }
  *out += fmt::format("timeouts version {} (published {}): default {}, {} entr{}\n", table.version,
                      Age(o.now_unix_ms, table.unix_ms), HumanMs(table.default_ms),
                      table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
  if (table.entries.empty()) return Status::Ok();
  *out += fmt::format("{:<16}  {:<14}  {:>6}  {:>10}\n", "COMM", "OP", "BUCKET", "TIMEOUT");
  for (const proto::TimeoutEntry& e : table.entries) {
    *out += fmt::format("{:<16}  {:<14}  {:>6}  {:>10}\n", CommHex(e.comm_id), proto::OpKindName(e.op), e.bucket,
                        HumanMs(e.ms));
  }
  return Status::Ok();
}

Status EvictedCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, {"SMEMBERS", keys.Evicted()}, &reply));
  std::vector<std::string> nodes;
  for (const redis::Reply& r : reply.elements()) nodes.push_back(r.str());
  std::sort(nodes.begin(), nodes.end());
  if (o.json) {
    *out += Json(nodes).dump();
    *out += "\n";
    return Status::Ok();
  }
  if (nodes.empty()) *out += fmt::format("no nodes evicted for job {}\n", o.job);
  // Each node's reason, where the master recorded one (`evicted_why:<node>` in its hash).
  for (const std::string& n : nodes) {
    redis::Reply why;
    const bool known = Run(client, {"HGET", keys.MasterState(), "evicted_why:" + n}, &why).ok() && why.is_string();
    *out += known ? fmt::format("{}  {}\n", n, why.str()) : n + "\n";
  }
  return Status::Ok();
}

Status CheckpointsCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  BadValues bad;
  redis::Reply steps_reply, plan_reply;
  FT_RETURN_IF_ERROR(Run(client, {"ZREVRANGE", keys.CkptSteps(), "0", "-1"}, &steps_reply));
  FT_RETURN_IF_ERROR(Run(client, {"GET", keys.Restore()}, &plan_reply));
  proto::RestorePlan plan;
  bool have_plan = false;
  if (plan_reply.is_string()) {
    Status s = proto::Decode(plan_reply.str(), &plan);
    if (s.ok()) {
      have_plan = true;
    } else {
      bad.Report(keys.Restore(), plan_reply.str(), s);
    }
  }
  // What replacement nodes' workers prefetched (written only where FT_NODE_RANKS is set).
  redis::Reply prefetch_reply;
  FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.Prefetch()}, &prefetch_reply));
  std::vector<proto::PrefetchReport> prefetch;  // by node (HGETALL order is not)
  for (size_t i = 0; i + 1 < prefetch_reply.size(); i += 2) {
    proto::PrefetchReport r;
    Status s = proto::Decode(prefetch_reply[i + 1].str(), &r);
    if (s.ok() && r.node != prefetch_reply[i].str()) s = Status::Corrupt("the report of another node");
    if (!s.ok()) {
      bad.Report(keys.Prefetch() + " " + prefetch_reply[i].str(), prefetch_reply[i + 1].str(), s);
      continue;
    }
    prefetch.push_back(std::move(r));
  }
  std::sort(prefetch.begin(), prefetch.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  std::map<int64_t, proto::StepVerdict> verdicts;  // of the listed steps (HMGET below)

  struct Row {
    int64_t step = -1;
    const proto::StepVerdict* verdict = nullptr;
    int copies = 0, torn = 0;
    std::map<std::string, int> tiers;    // tier -> copies it holds
    std::map<std::string, int> origins;  // what took the copies -> how many
  };
  std::vector<Row> rows;
  for (const redis::Reply& r : steps_reply.elements()) {
    Row row;
    const std::string text = r.is_string() ? r.str() : std::string();
    auto parsed = std::from_chars(text.data(), text.data() + text.size(), row.step);
    if (text.empty() || parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || row.step < 0) {
      bad.Report(keys.CkptSteps(), text, Status::Corrupt("not a step number"));
      continue;
    }
    redis::Reply copies;
    FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.CkptStep(row.step)}, &copies));
    for (size_t i = 0; i + 1 < copies.size(); i += 2) {
      proto::CkptCopy c;
      Status s = proto::Decode(copies[i + 1].str(), &c);
      if (!s.ok()) {
        bad.Report(keys.CkptStep(row.step) + " " + copies[i].str(), copies[i + 1].str(), s);
        continue;
      }
      ++row.copies;
      if (c.torn) ++row.torn;
      ++row.origins[c.origin.empty() ? "unknown" : c.origin];
      for (const std::string& t : c.tiers) ++row.tiers[t];
    }
    rows.push_back(std::move(row));
  }
  if (!rows.empty()) {
    redis::Argv argv = {"HMGET", keys.CkptVerdicts()};
    for (const Row& row : rows) argv.push_back(std::to_string(row.step));
    redis::Reply got;
    FT_RETURN_IF_ERROR(Run(client, argv, &got));
    for (size_t k = 0; k < rows.size() && k < got.size(); ++k) {
      if (!got[k].is_string()) continue;  // not judged yet
      proto::StepVerdict v;
      Status s = proto::Decode(got[k].str(), &v);
      if (!s.ok() || v.step != rows[k].step) {
        bad.Report(keys.CkptVerdicts() + " " + std::to_string(rows[k].step), got[k].str(),
                   s.ok() ? Status::Corrupt("the verdict of another step") : s);
        continue;
      }
      verdicts[v.step] = std::move(v);
    }
    for (Row& row : rows) {
      auto v = verdicts.find(row.step);
      row.verdict = v == verdicts.end() ? nullptr : &v->second;
    }
  }
  const int64_t planned = have_plan ? plan.step : -1;

  if (o.json) {
    Json j = Json::object();
    j["job"] = o.job;
    Json p = Json::object();
    p["version"] = have_plan ? Json(plan.version) : Json(nullptr);
    p["step"] = planned >= 0 ? Json(planned) : Json(nullptr);
    p["ranks"] = have_plan ? Json(plan.ranks.size()) : Json(0);
    j["plan"] = std::move(p);
    Json list = Json::array();
    for (const Row& row : rows) {
      Json r = Json::object();
      r["step"] = row.step;
      r["state"] = row.verdict ? Json(proto::VerdictStateName(row.verdict->state)) : Json("unjudged");
      r["shards"] = row.verdict ? Json(row.verdict->shards) : Json(nullptr);
      r["verified_shards"] = row.verdict ? Json(row.verdict->verified_shards) : Json(nullptr);
      r["copies"] = row.copies;
      r["torn"] = row.torn;
      Json tiers = Json::object();
      for (const char* t : {"arena", "local", "remote"}) tiers[t] = row.tiers.count(t) ? row.tiers.at(t) : 0;
      r["tiers"] = std::move(tiers);
      r["origins"] = row.origins;
      r["sdc_ranks"] = row.verdict ? Json(row.verdict->sdc_ranks) : Json::array();
      r["why"] = row.verdict ? Json(row.verdict->why) : Json("");
      r["planned"] = row.step == planned;
      list.push_back(std::move(r));
    }
    j["steps"] = std::move(list);
    Json reports = Json::array();
    for (const proto::PrefetchReport& r : prefetch) reports.push_back(AsJson(r));
    j["prefetch"] = std::move(reports);
    j["garbled_values"] = bad.count();
    *out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
    *out += "\n";
    return Status::Ok();
  }

  if (planned >= 0) {
    *out += fmt::format("restore plan {}: step {} for {} ranks (published {})\n", plan.version, planned,
                        plan.ranks.size(), Age(o.now_unix_ms, plan.unix_ms));
  } else if (have_plan) {
    *out += fmt::format("restore plan {}: no restorable checkpoint\n", plan.version);
  } else {
    *out += "no restore plan published\n";
  }
  *out += PrefetchText(prefetch, planned, o.now_unix_ms);
  if (rows.empty()) {
    *out += fmt::format("no checkpoints reported for job {}\n", o.job);
    return Status::Ok();
  }
  auto line = [&](std::string text) {
    while (!text.empty() && text.back() == ' ') text.pop_back();
    *out += text + "\n";
  };
  line(fmt::format("{:>10}  {:<11}  {:>7}  {:>6}  {:>4}  {:<26}  {:<8}  {:<10}  {}", "STEP", "STATE", "SHARDS",
                   "COPIES", "TORN", "TIERS (arena/local/remote)", "SDC", "PLAN", "SAVED BY"));
  for (const Row& row : rows) {
    std::string shards = row.verdict ? fmt::format("{}/{}", row.verdict->verified_shards, row.verdict->shards) : "-";
    std::string tiers = fmt::format("{}/{}/{}", row.tiers.count("arena") ? row.tiers.at("arena") : 0,
                                    row.tiers.count("local") ? row.tiers.at("local") : 0,
                                    row.tiers.count("remote") ? row.tiers.at("remote") : 0);
    std::string sdc = "-";
    if (row.verdict && !row.verdict->sdc_ranks.empty()) sdc = fmt::format("{}", fmt::join(row.verdict->sdc_ranks, ","));
    line(fmt::format("{:>10}  {:<11}  {:>7}  {:>6}  {:>4}  {:<26}  {:<8}  {:<10}  {}", row.step,
                     row.verdict ? proto::VerdictStateName(row.verdict->state) : "unjudged", shards, row.copies, row.torn, tiers, sdc,
                     row.step == planned ? "<- restore" : "", FormatOrigins(row.origins)));
    if (row.verdict && !row.verdict->why.empty() && row.verdict->state != proto::VerdictState::kVerified) {
      line(fmt::format("{:>10}  {}", "", row.verdict->why));
    }
  }
  if (bad.count() > 0) {
    *out += fmt::format("{} garbled value{} skipped (see the warnings above)\n", bad.count(),
                        bad.count() == 1 ? "" : "s");
  }
  return Status::Ok();
}

Status SaveCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply members;
  FT_RETURN_IF_ERROR(Run(client, {"SMEMBERS", keys.Workers()}, &members));
  std::set<std::string> nodes;
  for (const redis::Reply& m : members.elements()) {
    if (m.is_string() && !m.str().empty()) nodes.insert(m.str());
  }
  if (nodes.empty()) {
    return Status::NotFound(fmt::format("no workers have registered for job {} ({} is empty)", o.job,
                                        keys.Workers()));
  }
  // The processes running now: a worker that replays its stream later (its cursor lost) must
  // not make a relaunch of theirs save.
  redis::Reply ranks_reply;
  FT_RETURN_IF_ERROR(Run(client, {"HGETALL", keys.Ranks()}, &ranks_reply));
  BadValues bad;
  DecodedHash<proto::Membership> ranks("ranks");
  ranks.Load(ranks_reply, &bad);
  const DecidedFor decided_for(ranks.values(), o.now_unix_ms);
  // One id for the request: each worker passes it to its ranks, whose acks name it.
  const std::string id = fmt::format("{}-save-at-step", o.now_unix_ms);
  for (const std::string& node : nodes) {
    proto::Command command;
    command.id = id + "-" + node;
    command.kind = "save-at-step";
    command.rank = -1;
    command.text = id;
    command.unix_ms = o.now_unix_ms;
    command.decided_unix_ms = o.now_unix_ms;
    command.incarnations = decided_for.OfNode(node);
    redis::Reply added;
    FT_RETURN_IF_ERROR(Run(client, {"XADD", keys.Commands(node), "MAXLEN", "~", "1000", "*", "kind",
                                    "save-at-step", "rank", "-1", "json", proto::Encode(command)},
                           &added));
  }
  if (o.json) {
    Json j = Json::object();
    j["id"] = id;
    j["nodes"] = Json(std::vector<std::string>(nodes.begin(), nodes.end()));
    *out += j.dump();
    *out += "\n";
    return Status::Ok();
  }
  *out += fmt::format("save requested: {} (sent to {} node{}); every rank saves at its next step "
                      "boundary — see `ftmaster checkpoints`\n",
                      id, nodes.size(), nodes.size() == 1 ? "" : "s");
  return Status::Ok();
}

bool ParseRankFlag(const std::string& text, int* rank) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 0) return false;
  *rank = v;
  return true;
}

Status StacksCommand(redis::Commands& client, const CliOptions& o, int rank, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply value;
  FT_RETURN_IF_ERROR(Run(client, {"HGET", keys.Ranks(), std::to_string(rank)}, &value));
  proto::Membership m;
  if (!value.is_string() || !proto::Decode(value.str(), &m).ok() || m.node.empty()) {
    return Status::NotFound(fmt::format("rank {} of job {} is not in {}", rank, o.job, keys.Ranks()));
  }
  redis::Reply last;
  FT_RETURN_IF_ERROR(Run(client, {"XREVRANGE", keys.Acks(), "+", "-", "COUNT", "1"}, &last));
  std::vector<StreamEntry> tail;
  ParseStream(last, &tail);
  std::string from = tail.empty() ? "0-0" : tail.front().id;
  proto::Command command;
  command.id = fmt::format("cli-{}-stacks-{}", o.now_unix_ms, rank);
  command.kind = "stacks";
  command.rank = rank;
  command.text = "ftmaster stacks";
  command.unix_ms = o.now_unix_ms;
  command.decided_unix_ms = o.now_unix_ms;
  command.incarnations = {proto::RankIncarnation{rank, m.incarnation}};
  redis::Reply added;
  FT_RETURN_IF_ERROR(Run(client, {"XADD", keys.Commands(m.node), "MAXLEN", "~", "1000", "*", "kind", "stacks", "rank",
                                  std::to_string(rank), "json", proto::Encode(command)},
                         &added));
  // The worker's ack, read as it comes (XREAD after the last ack before the command).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    redis::Reply got;
    FT_RETURN_IF_ERROR(Run(client, {"XREAD", "COUNT", "100", "STREAMS", keys.Acks(), from}, &got));
    std::vector<StreamEntry> entries;
    if (got.is_array() && got.size() > 0 && got[0].size() > 1) ParseStream(got[0][1], &entries);
    for (const StreamEntry& e : entries) {
      from = e.id;
      const std::string* json = e.Get("json");
      proto::CommandAck ack;
      if (json == nullptr || !proto::Decode(*json, &ack).ok() || ack.id != command.id) continue;
      if (o.json) {
        *out += Json({{"rank", rank}, {"node", ack.node}, {"result", ack.result}, {"stack", ack.message}}).dump() + "\n";
      } else {
        *out += fmt::format("rank {} on {} ({}):\n{}", rank, ack.node, ack.result, ack.message);
        if (!ack.message.empty() && ack.message.back() != '\n') *out += "\n";
      }
      return ack.result == "done" ? Status::Ok() : Status::Unavailable(ack.message);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Timeout(fmt::format("no answer from {}'s worker within 10 s (is it running?)", m.node));
}

}  // namespace ft::master
