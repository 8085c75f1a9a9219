// `ftmaster checkpoints` (cli.h): the checkpoint steps newest first with their verdicts, copies
// and tiers, the restore plan, and what replacement nodes' workers prefetched.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <vector>

#include "ftmaster/cli/cli.h"
#include "ftmaster/cli/cli_util.h"
#include "ftmaster/core/save_outcome.h"
#include "ftmaster/prefetch_view.h"
#include "ftmaster/store.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "schema/node_hashes.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/verdict_hash.h"

namespace ft::master {
namespace {

using cli::Age;
using cli::AsJson;
using cli::Json;
using cli::Run;

struct Row {
  int64_t step = -1;
  std::optional<proto::StepVerdict> verdict;  // nullopt: not judged yet
  int copies = 0, torn = 0;
  std::map<std::string, int> tiers;    // tier -> copies it holds
  std::map<std::string, int> origins;  // what took the copies -> how many
};

// What the command shows, as read.
struct Checkpoints {
  std::optional<proto::RestorePlan> plan;
  std::vector<proto::PrefetchReport> prefetch;  // by node (HGETALL order is not)
  std::vector<Row> rows;                        // newest step first
  int64_t planned() const { return plan ? plan->step : -1; }
};

Status ReadPlan(redis::Commands& client, const proto::Keys& keys, BadValues* bad, Checkpoints* c) {
  redis::Reply plan_reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetPlan(keys), &plan_reply));
  if (!plan_reply.is_string()) return Status::Ok();
  proto::RestorePlan plan;
  Status s = proto::Decode(plan_reply.str(), &plan);
  if (s.ok()) {
    c->plan = std::move(plan);
  } else {
    bad->Report(keys.Restore(), plan_reply.str(), s);
  }
  return Status::Ok();
}

// What replacement nodes' workers prefetched (written only where FT_NODE_RANKS is set).
Status ReadPrefetch(redis::Commands& client, const proto::Keys& keys, BadValues* bad, Checkpoints* c) {
  redis::Reply prefetch_reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetPrefetch(keys), &prefetch_reply));
  std::vector<schema::HashValue<proto::PrefetchReport>> reports;
  if (Status s = schema::DecodePrefetch(prefetch_reply, &reports); !s.ok()) {
    bad->Report(keys.Prefetch(), prefetch_reply.DebugString().substr(0, 64), s);
  }
  for (schema::HashValue<proto::PrefetchReport>& r : reports) {
    if (!r.ok()) {
      bad->Report(keys.Prefetch() + " " + r.field, r.raw, r.why);
      continue;
    }
    c->prefetch.push_back(std::move(r.value));
  }
  std::sort(c->prefetch.begin(), c->prefetch.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  return Status::Ok();
}

// One row per listed step: its copies counted by tier and by what took them.
Status ReadSteps(redis::Commands& client, const proto::Keys& keys, const redis::Reply& steps_reply, BadValues* bad,
                 Checkpoints* c) {
  for (const redis::Reply& r : steps_reply.elements()) {
    Row row;
    const std::string text = r.is_string() ? r.str() : std::string();
    auto parsed = std::from_chars(text.data(), text.data() + text.size(), row.step);
    if (text.empty() || parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || row.step < 0) {
      bad->Report(keys.CkptSteps(), text, Status::Corrupt("not a step number"));
      continue;
    }
    redis::Reply reply;
    FT_RETURN_IF_ERROR(Run(client, schema::GetCopies(keys, row.step), &reply));
    std::vector<schema::HashValue<proto::CkptCopy>> copies;
    if (Status s = schema::DecodeRankHash(reply, &copies); !s.ok()) bad->Report(keys.CkptStep(row.step), "", s);
    for (const auto& [field, copy, why, raw] : copies) {
      if (!why.ok()) {
        bad->Report(keys.CkptStep(row.step) + " " + field, raw, why);
        continue;
      }
      ++row.copies;
      if (copy.torn) ++row.torn;
      ++row.origins[copy.origin.empty() ? "unknown" : copy.origin];
      for (const std::string& t : copy.tiers) ++row.tiers[t];
    }
    c->rows.push_back(std::move(row));
  }
  return Status::Ok();
}

// The listed steps' verdicts, one HMGET.
Status ReadVerdicts(redis::Commands& client, const proto::Keys& keys, BadValues* bad, Checkpoints* c) {
  if (c->rows.empty()) return Status::Ok();
  std::vector<int64_t> steps;
  for (const Row& row : c->rows) steps.push_back(row.step);
  redis::Reply got;
  FT_RETURN_IF_ERROR(Run(client, schema::GetVerdictsOf(keys, steps), &got));
  std::vector<schema::HashValue<proto::StepVerdict>> verdicts;  // the steps judged yet
  if (Status s = schema::DecodeVerdictsOf(steps, got, &verdicts); !s.ok()) bad->Report(keys.CkptVerdicts(), "", s);
  for (auto& v : verdicts) {
    if (!v.ok()) {
      bad->Report(keys.CkptVerdicts() + " " + v.field, v.raw, v.why);
      continue;
    }
    for (Row& row : c->rows) {
      if (row.step == v.value.step) row.verdict = v.value;
    }
  }
  return Status::Ok();
}

std::string CheckpointsJson(const CliOptions& o, const Checkpoints& c, const BadValues& bad) {
  const int64_t planned = c.planned();
  Json j = Json::object();
  j["job"] = o.job;
  Json p = Json::object();
  p["version"] = c.plan ? Json(c.plan->version) : Json(nullptr);
  p["step"] = planned >= 0 ? Json(planned) : Json(nullptr);
  p["ranks"] = c.plan ? Json(c.plan->ranks.size()) : Json(0);
  j["plan"] = std::move(p);
  Json list = Json::array();
  for (const Row& row : c.rows) {
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
  for (const proto::PrefetchReport& r : c.prefetch) reports.push_back(AsJson(r));
  j["prefetch"] = std::move(reports);
  j["garbled_values"] = bad.count();
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string CheckpointsText(const CliOptions& o, const Checkpoints& c, const BadValues& bad) {
  const int64_t planned = c.planned();
  std::string out;
  if (planned >= 0) {
    out += fmt::format("restore plan {}: step {} for {} ranks (published {})\n", c.plan->version, planned,
                       c.plan->ranks.size(), Age(o.now_unix_ms, c.plan->unix_ms));
  } else if (c.plan) {
    out += fmt::format("restore plan {}: no restorable checkpoint\n", c.plan->version);
  } else {
    out += "no restore plan published\n";
  }
  out += PrefetchText(c.prefetch, planned, o.now_unix_ms);
  if (c.rows.empty()) return out + fmt::format("no checkpoints reported for job {}\n", o.job);
  auto line = [&](std::string text) {
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(fmt::format("{:>10}  {:<11}  {:>7}  {:>6}  {:>4}  {:<26}  {:<8}  {:<10}  {}", "STEP", "STATE", "SHARDS",
                   "COPIES", "TORN", "TIERS (arena/local/remote)", "SDC", "PLAN", "SAVED BY"));
  for (const Row& row : c.rows) {
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
  return out + cli::GarbledNote(bad.count());
}

}  // namespace

Status CheckpointsCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  BadValues bad;
  Checkpoints c;
  redis::Reply steps_reply;
  FT_RETURN_IF_ERROR(Run(client, schema::NewestSteps(keys, 0), &steps_reply));
  FT_RETURN_IF_ERROR(ReadPlan(client, keys, &bad, &c));
  FT_RETURN_IF_ERROR(ReadPrefetch(client, keys, &bad, &c));
  FT_RETURN_IF_ERROR(ReadSteps(client, keys, steps_reply, &bad, &c));
  FT_RETURN_IF_ERROR(ReadVerdicts(client, keys, &bad, &c));
  *out += o.json ? CheckpointsJson(o, c, bad) : CheckpointsText(o, c, bad);
  return Status::Ok();
}

}  // namespace ft::master
