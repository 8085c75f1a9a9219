#include "jitckpt/tier_paths.h"

#include <unistd.h>

#include <fmt/format.h>

#include "common/names.h"
#include "jitckpt/safe_name.h"

namespace ft::ckpt {

namespace internal {

namespace {

// Parses the decimal number that follows `prefix` and precedes `suffix` in `name`, accepting
// only the exact spelling this file writes (zero-padded to `width`).
bool ParseNumberedName(std::string_view name, std::string_view prefix, std::string_view suffix,
                       int width, int64_t* out) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  if (name.size() < prefix.size() + suffix.size()) return false;
  std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18) return false;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (fmt::format("{:0{}}", value, width) != digits) return false;
  *out = value;
  return true;
}

constexpr std::string_view kTempMark = ".tmp.";

}  // namespace

std::string JobDir(std::string_view dir, std::string_view job) {
  return JoinPath(dir, SafeJobName(job));
}

std::string RankFileName(int rank, std::string_view suffix) {
  return fmt::format("rank-{:06}{}", rank, suffix);
}

bool ParseStepDirName(std::string_view name, int64_t* step) {
  return ParseNumberedName(name, "step-", "", 12, step);
}

bool ParseRankFileName(std::string_view name, std::string_view suffix, int* rank) {
  int64_t value = 0;
  if (!ParseNumberedName(name, "rank-", suffix, 6, &value) || value > INT32_MAX) return false;
  *rank = static_cast<int>(value);
  return true;
}

const std::string& ThisHost() {
  static const std::string host = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0) return std::string("unknown-host");
    return SafeNodeName(name);
  }();
  return host;
}

std::string TempSuffix() { return fmt::format("{}{}.{}", kTempMark, ThisHost(), ::getpid()); }

bool IsTempName(std::string_view name) { return name.find(kTempMark) != std::string_view::npos; }

bool ParseTempName(std::string_view name, std::string_view* host, pid_t* pid) {
  const size_t mark = name.rfind(kTempMark);
  if (mark == std::string_view::npos) return false;
  std::string_view tag = name.substr(mark + kTempMark.size());  // "<host>.<pid>"
  size_t dot = tag.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  std::string_view pid_text = tag.substr(dot + 1);
  int64_t value = 0;
  if (pid_text.empty() || pid_text.size() > 9) return false;
  for (char c : pid_text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value <= 0) return false;
  *host = tag.substr(0, dot);
  *pid = static_cast<pid_t>(value);
  return true;
}

std::string_view TempTarget(std::string_view name) { return name.substr(0, name.rfind(kTempMark)); }

}  // namespace internal

namespace {
constexpr Named<TierKind> kTierKindNames[] = {
    {TierKind::kLocal, "local"}, {TierKind::kRemote, "remote"}};
static_assert(NamesAreUnique(kTierKindNames));
}  // namespace

const char* TierName(TierKind kind) { return NameIn(kTierKindNames, kind, "unknown"); }

std::string StepDir(std::string_view dir, std::string_view job, int64_t step) {
  return fmt::format("{}/step-{:012}", internal::JobDir(dir, job), step);
}

std::string DataPath(std::string_view dir, std::string_view job, CopyId id) {
  return StepDir(dir, job, id.step) + "/" + internal::RankFileName(id.rank, internal::kDataSuffix);
}

std::string ManifestPath(std::string_view dir, std::string_view job, CopyId id) {
  return StepDir(dir, job, id.step) + "/" + internal::RankFileName(id.rank, internal::kManifestSuffix);
}

}  // namespace ft::ckpt
