// `ftmaster incidents` (cli.h): the incident stream, each with its save's outcome and the stacks
// its workers took; the newest with the plan the relaunch restores.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "ftmaster/cli/cli.h"
#include "ftmaster/cli/cli_util.h"
#include "ftmaster/core/save_outcome.h"
#include "ftmaster/report.h"
#include "ftmaster/store.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "schema/master_hash.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::master {
namespace {

using cli::AsJson;
using cli::Json;
using cli::Run;

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
  FT_RETURN_IF_ERROR(Run(client, schema::GetPlan(keys), &plan_reply));
  if (!plan_reply.is_string()) return Status::Ok();
  proto::RestorePlan plan;
  if (Status s = proto::Decode(plan_reply.str(), &plan); !s.ok()) {
    bad->Report(keys.Restore(), plan_reply.str(), s);
    return Status::Ok();
  }
  if (plan.step < 0) return Status::Ok();
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetCopies(keys, plan.step), &reply));
  std::vector<schema::HashValue<proto::CkptCopy>> copies;
  if (Status s = schema::DecodeRankHash(reply, &copies); !s.ok()) bad->Report(keys.CkptStep(plan.step), "", s);
  std::vector<proto::CkptCopy> decoded;
  for (auto& [field, c, why, raw] : copies) {
    if (!why.ok()) {
      bad->Report(keys.CkptStep(plan.step) + " " + field, raw, why);
      continue;
    }
    if (c.step == plan.step && !c.torn) decoded.push_back(std::move(c));
  }
  out->version = plan.version;
  out->step = plan.step;
  out->origins = CountOrigins(decoded);
  return Status::Ok();
}


// The stacks the workers took for each incident (`<incident>-stacks-<rank>` acks,
// stacks_request.h), by incident id.
struct RankStack {
  int rank = -1;
  std::string node, result, text;
};
Status ReadStacks(redis::Commands& client, const proto::Keys& keys, std::map<std::string, std::vector<RankStack>>* out) {
  std::string cursor;
  for (;;) {
    schema::StreamRead<proto::CommandAck> read;
    FT_RETURN_IF_ERROR(schema::ReadStream(client, schema::After(keys.Acks(), cursor, 1000), &read));
    for (const schema::Entry<proto::CommandAck>& e : read.entries) {
      if (!e.ok()) continue;  // not a stack: the master reports bad acks
      const proto::CommandAck& ack = e.value;
      const size_t at = ack.id.rfind("-stacks-");
      if (at == std::string::npos) continue;
      (*out)[ack.id.substr(0, at)].push_back({ack.rank, ack.node, ack.result, ack.message});
    }
    if (read.entries.size() + read.malformed < 1000) return Status::Ok();
    cursor = read.last_id();
  }
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
      out += proto::Is(s.result, proto::AckResult::kDone)
                 ? fmt::format("   stack of rank {} (suspect, {}): {}\n", s.rank, s.node, first_line(s.text))
                 : fmt::format("   stack of rank {} (suspect, {}): not taken: {}\n", s.rank, s.node, s.text);
    } else if (proto::Is(s.result, proto::AckResult::kDone)) {
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
  std::string cursor;
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
    schema::StreamRead<proto::Incident> read;
    FT_RETURN_IF_ERROR(schema::ReadStream(client, schema::After(keys.Incidents(), cursor, 1000), &read));
    cursor = read.last_id().empty() ? cursor : read.last_id();
    std::vector<proto::Incident> batch;
    for (schema::Entry<proto::Incident>& e : read.entries) {
      if (!e.ok()) {
        bad.Report(fmt::format("incident {}", e.id), e.RawJson(), e.why);
        continue;
      }
      batch.push_back(std::move(e.value));
    }
    // The save outcome of each incident whose save ran (`checkpoint:<id>`, master hash).
    std::vector<std::string> outcomes(batch.size());
    if (!batch.empty()) {
      std::vector<std::string> fields;
      for (const proto::Incident& i : batch) fields.push_back(schema::master_hash::CheckpointOf(i.id));
      redis::Reply got;
      FT_RETURN_IF_ERROR(Run(client, schema::master_hash::GetFields(keys, fields), &got));
      for (size_t k = 0; k < batch.size() && k < got.size(); ++k) {
        if (got[k].is_string()) outcomes[k] = got[k].str();
      }
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      const proto::Incident& incident = batch[k];
      SaveOutcome outcome;
      const bool saved = !outcomes[k].empty() && DecodeSaveOutcome(outcomes[k], &outcome);
      if (!outcomes[k].empty() && !saved) {
        bad.Report(schema::master_hash::CheckpointOf(incident.id), outcomes[k], Status::Corrupt("not a save outcome"));
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
    if (read.entries.size() + read.malformed < 1000) break;
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

}  // namespace ft::master
