#include "jitckpt/tier_retain.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <utility>

#include "jitckpt/file_ops.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier_files.h"
#include "jitckpt/tier_list.h"
#include "jitckpt/tier_read.h"

namespace ft::ckpt {

Status Retain(std::string_view dir, std::string_view job, const RetentionRule& rule, RetentionResult* result) {
  return Retain(SystemFileOps(), dir, job, rule, result);
}

Status Retain(FileOps& ops, std::string_view dir, std::string_view job, const RetentionRule& rule,
              RetentionResult* result) {
  if (rule.keep_steps < 1) {
    return Status::InvalidArgument(
        fmt::format("keeping {} checkpoint steps: at least 1 must be kept", rule.keep_steps));
  }
  RetentionResult out;
  std::vector<CopyId> copies;
  FT_RETURN_IF_ERROR(ListCommitted(ops, dir, job, &copies));
  std::map<int64_t, std::set<int>> ranks_of;
  for (const CopyId& id : copies) ranks_of[id.step].insert(id.rank);
  out.steps_held = ranks_of.size();
  // Complete: every expected rank has its copy here. Only those count towards keep_steps: a
  // newer step some rank lacks (its node's persist failed, or is still running) must not push
  // out the last step every rank can restore from.
  for (const auto& [step, ranks] : ranks_of) {
    bool complete = !rule.expected_ranks.empty();
    for (int rank : rule.expected_ranks) complete = complete && ranks.contains(rank);
    if (complete) out.complete_steps.push_back(step);
  }
  const size_t keep = static_cast<size_t>(rule.keep_steps);
  if (out.complete_steps.size() >= keep) {
    const int64_t oldest_kept = out.complete_steps[out.complete_steps.size() - keep];
    const std::set<int64_t> also(rule.keep_also.begin(), rule.keep_also.end());
    std::vector<std::pair<int64_t, std::string>> steps;
    FT_RETURN_IF_ERROR(internal::StepDirs(ops, dir, job, &steps));
    for (const auto& [step, step_dir] : steps) {
      if (step >= oldest_kept || also.contains(step)) continue;
      for (int rank : rule.own_ranks) {
        const CopyId id{step, rank};
        const std::string manifest = ManifestPath(dir, job, id), data = DataPath(dir, job, id);
        struct stat st;
        if (ops.Lstat(manifest.c_str(), &st) != 0) continue;  // none of this rank here
        // The manifest names its job: a copy of another job in this job's directory (two jobs
        // whose names were once spelled alike) is never this job's to remove.
        Manifest m;
        Status read = ReadManifest(ops, dir, job, id, &m);
        if (!read.ok()) {
          out.left.push_back(fmt::format("{} (not removed: {})", manifest, read.message()));
          continue;
        }
        if (ops.Unlink(manifest.c_str()) != 0 && errno != ENOENT) {
          return internal::IoFailure(errno, "removing old checkpoint manifest", manifest);
        }
        if (ops.Unlink(data.c_str()) != 0 && errno != ENOENT) {
          return internal::IoFailure(errno, "removing old checkpoint data", data);
        }
        out.removed.push_back(id);
      }
      ops.Rmdir(step_dir.c_str());  // only once every node's worker removed its ranks' copies
    }
  }
  std::sort(out.removed.begin(), out.removed.end());
  if (result != nullptr) *result = std::move(out);
  return Status::Ok();
}

}  // namespace ft::ckpt
