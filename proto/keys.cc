#include "proto/keys.h"

#include "common/hash.h"
#include "common/job_name.h"

namespace ft::proto {

std::string SanitizeName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-';
    out += keep ? c : '_';
  }
  return out.empty() ? "_" : out;
}

// The job as every other name spells it (common/job_name.h): jobs whose names differ never
// share a key, and no byte of the name can break the braces' hash tag.
Keys::Keys(std::string_view job) : job_(JobToken(job)), prefix_("ft:{" + job_ + "}:") {}

int Keys::GroupOfRank(int rank) {
  int g = rank % kGroups;
  return g < 0 ? g + kGroups : g;
}

int Keys::GroupOfNode(std::string_view node) {
  return static_cast<int>(Fnv1a64(SanitizeName(node)) % static_cast<uint64_t>(kGroups));
}

// A JobToken has no ':' ([A-Za-z0-9_-]), so "ft:{<job>:g" is no other job's prefix.
std::string Keys::GroupPrefix(int group) const {
  return "ft:{" + job_ + ":g" + std::to_string(group) + "}:";
}

std::string Keys::AllGroups(std::string_view suffix) const {
  return "ft:{" + job_ + ":g*}:" + std::string(suffix);
}

std::string Keys::Events() const { return prefix_ + "events"; }
std::string Keys::Progress(int group) const { return GroupPrefix(group) + "progress"; }
std::string Keys::Summaries(int group) const { return GroupPrefix(group) + "summary"; }
std::vector<std::string> Keys::AllProgress() const {
  std::vector<std::string> out;
  for (int g = 0; g < kGroups; ++g) out.push_back(Progress(g));
  return out;
}
std::vector<std::string> Keys::AllSummaries() const {
  std::vector<std::string> out;
  for (int g = 0; g < kGroups; ++g) out.push_back(Summaries(g));
  return out;
}
std::string Keys::Ranks() const { return prefix_ + "ranks"; }
std::string Keys::RanksVersion() const { return prefix_ + "ranks:version"; }
std::string Keys::Workers() const { return prefix_ + "workers"; }
std::string Keys::WorkerHeartbeat(std::string_view node) const {
  return GroupPrefix(GroupOfNode(node)) + "worker:" + SanitizeName(node);
}
std::string Keys::Timeouts() const { return prefix_ + "timeouts"; }
std::string Keys::TimeoutsVersion() const { return prefix_ + "timeouts:version"; }
std::string Keys::Commands(std::string_view node) const {
  return prefix_ + "cmd:" + SanitizeName(node);
}
std::string Keys::CommandCursor(std::string_view node) const {
  return Commands(node) + ":cursor";
}
std::string Keys::LegacyCommandCursor(std::string_view node) const {
  return GroupPrefix(GroupOfNode(node)) + "cursor:" + SanitizeName(node);
}
std::string Keys::Acks() const { return prefix_ + "acks"; }
std::string Keys::Notify() const { return prefix_ + "notify"; }
std::string Keys::Incidents() const { return prefix_ + "incidents"; }
std::string Keys::Evicted() const { return prefix_ + "evicted"; }
std::string Keys::Leader() const { return prefix_ + "leader"; }
std::string Keys::MasterState() const { return prefix_ + "master"; }
std::string Keys::CkptSteps() const { return prefix_ + "ckpt:steps"; }
std::string Keys::CkptStep(int64_t step) const { return prefix_ + "ckpt:" + std::to_string(step); }
std::string Keys::CkptBuddy(int64_t step) const { return prefix_ + "ckpt:" + std::to_string(step) + ":buddy"; }
std::string Keys::CkptVerdicts() const { return prefix_ + "ckpt:verdicts"; }
std::string Keys::CkptRewinds() const { return prefix_ + "ckpt:rewinds"; }
std::string Keys::Restore() const { return prefix_ + "restore"; }
std::string Keys::RestoreVersion() const { return prefix_ + "restore:version"; }
std::string Keys::TransferSecret() const { return prefix_ + "transfer:secret"; }
std::string Keys::Endpoints() const { return prefix_ + "endpoints"; }
std::string Keys::Prefetch() const { return prefix_ + "prefetch"; }

std::string Keys::NodeHistory(std::string_view node) { return "ft:node:{" + SanitizeName(node) + "}:history"; }
std::string Keys::NodesIndex() { return "ft:nodes"; }
std::string Keys::Cordons() { return "ft:cordon"; }

}  // namespace ft::proto
