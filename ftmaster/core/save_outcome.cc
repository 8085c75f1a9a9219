#include "ftmaster/core/save_outcome.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "common/names.h"

namespace ft::master {

SaveOutcome CountSaveOutcome(std::span<const SaveTarget> targets, const std::map<int, std::string>& results,
                             const std::function<ShardId(int)>& shard_of) {
  SaveOutcome o;
  std::set<ShardId> shards, saved;
  for (const SaveTarget& t : targets) {
    ++o.ranks;
    const ShardId shard = shard_of ? shard_of(t.rank) : ShardId{t.rank, 0, -1};
    shards.insert(shard);
    if (t.node.empty()) {
      ++o.unreachable;
      continue;
    }
    auto it = results.find(t.rank);
    if (it == results.end()) {
      ++o.unanswered;
    } else if (proto::Is(it->second, proto::AckResult::kDone)) {
      ++o.done;
      saved.insert(shard);
    } else if (proto::Is(it->second, proto::AckResult::kNotSupported)) {
      ++o.not_supported;
    } else if (proto::Is(it->second, proto::AckResult::kNothingRegistered)) {
      ++o.nothing_registered;
    } else {
      ++o.failed;
    }
  }
  o.shards = static_cast<int>(shards.size());
  o.saved = static_cast<int>(saved.size());
  return o;
}

void AddVerification(const StepJudgement& judged, SaveOutcome* o) {
  o->step = judged.verdict.step;
  o->verdict = judged.verdict.state;
  o->verified = judged.verdict.verified_shards;
}

namespace {
constexpr Named<SaveConclusion> kSaveConclusionNames[] = {
    {SaveConclusion::kNoCheckpoint, "no-checkpoint"},
    {SaveConclusion::kNothingRegistered, "nothing-registered"}, {SaveConclusion::kIncomplete, "incomplete"},
    {SaveConclusion::kVerified, "verified"}, {SaveConclusion::kComplete, "complete"},
    {SaveConclusion::kNotVerified, "not-verified"}};
static_assert(NamesAreUnique(kSaveConclusionNames));
}  // namespace

const char* SaveConclusionName(SaveConclusion c) { return NameIn(kSaveConclusionNames, c); }

SaveConclusion Conclude(const SaveOutcome& o) {
  if (o.saved == 0) {
    return o.nothing_registered > 0 && o.nothing_registered + o.unanswered + o.unreachable == o.ranks
               ? SaveConclusion::kNothingRegistered
               : SaveConclusion::kNoCheckpoint;
  }
  if (o.saved < o.shards) return SaveConclusion::kIncomplete;
  if (!o.verdict.has_value()) return SaveConclusion::kComplete;
  if (*o.verdict == proto::VerdictState::kVerified) return SaveConclusion::kVerified;
  return SaveConclusion::kNotVerified;
}

std::string DescribeSaveOutcome(const SaveOutcome& o) {
  std::vector<std::string> why;
  if (o.done > 0 && o.done != o.saved) why.push_back(fmt::format("{} ranks answered done", o.done));
  if (o.not_supported > 0) {
    why.push_back(fmt::format("{} answered not_supported: this libft.so cannot checkpoint", o.not_supported));
  }
  if (o.nothing_registered > 0) {
    why.push_back(fmt::format("{} answered nothing_registered", o.nothing_registered));
  }
  if (o.failed > 0) why.push_back(fmt::format("{} failed", o.failed));
  if (o.unreachable > 0) {
    why.push_back(fmt::format("{} never asked: no node is known for the rank (no membership in Redis)",
                              o.unreachable));
  }
  if (o.unanswered > 0) why.push_back(fmt::format("{} did not answer by FT_SAVE_DEADLINE", o.unanswered));
  std::string text = fmt::format("saved {} of {} shard{}", o.saved, o.shards, o.shards == 1 ? "" : "s");
  if (!why.empty()) text += fmt::format(" ({})", fmt::join(why, "; "));
  if (o.saved > 0 && o.verdict.has_value()) {
    text += fmt::format(", verified {} at step {} ({})", o.verified, o.step, proto::VerdictStateName(*o.verdict));
  }
  switch (Conclude(o)) {
    case SaveConclusion::kNoCheckpoint: text += "; the job is stopped without a checkpoint"; break;
    case SaveConclusion::kNothingRegistered:
      text += "; the job is stopped without a checkpoint: nothing is registered — call ft_register";
      break;
    case SaveConclusion::kIncomplete: text += "; the checkpoint is incomplete: restore from an earlier one"; break;
    case SaveConclusion::kVerified: text += "; the checkpoint is complete and verified"; break;
    case SaveConclusion::kComplete: text += "; the checkpoint is complete"; break;
    case SaveConclusion::kNotVerified:
      text += "; the checkpoint is saved but not verified: the restore plan keeps the last verified step";
      break;
  }
  return text;
}

std::map<std::string, int> CountOrigins(std::span<const proto::CkptCopy> copies) {
  std::map<std::string, int> origins;
  for (const proto::CkptCopy& c : copies) ++origins[c.origin.empty() ? "unknown" : c.origin];
  return origins;
}

std::string FormatOrigins(const std::map<std::string, int>& origins) {
  std::vector<std::pair<std::string, int>> sorted(origins.begin(), origins.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [origin, n] : sorted) parts.push_back(fmt::format("{} {}", origin, n));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string EncodeSaveOutcome(const std::string& incident, const SaveOutcome& o) {
  nlohmann::ordered_json j;
  j["v"] = 1;
  j["incident"] = incident;
  j["shards"] = o.shards;
  j["saved"] = o.saved;
  j["verified"] = o.verified;
  j["step"] = o.step;
  j["verdict"] = o.verdict.has_value() ? proto::VerdictStateName(*o.verdict) : "";
  j["ranks"] = o.ranks;
  j["done"] = o.done;
  j["not_supported"] = o.not_supported;
  j["nothing_registered"] = o.nothing_registered;
  j["failed"] = o.failed;
  j["unreachable"] = o.unreachable;
  j["unanswered"] = o.unanswered;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

bool DecodeSaveOutcome(std::string_view json, SaveOutcome* out) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object() || j.value("v", 0) != 1) return false;
  SaveOutcome o;
  try {
    auto get = [&](const char* key, auto* field) {
      if (j.contains(key)) *field = j.at(key).get<std::remove_pointer_t<decltype(field)>>();
    };
    get("shards", &o.shards);
    get("saved", &o.saved);
    get("verified", &o.verified);
    get("step", &o.step);
    std::string verdict;
    get("verdict", &verdict);
    if (!verdict.empty()) {
      o.verdict = proto::ParseVerdictState(verdict);
      if (!o.verdict.has_value()) return false;  // a state this build does not know
    }
    get("ranks", &o.ranks);
    get("done", &o.done);
    get("not_supported", &o.not_supported);
    get("nothing_registered", &o.nothing_registered);
    get("failed", &o.failed);
    get("unreachable", &o.unreachable);
    get("unanswered", &o.unanswered);
  } catch (const std::exception&) {
    return false;
  }
  *out = o;
  return true;
}

}  // namespace ft::master
