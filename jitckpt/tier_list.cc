#include "jitckpt/tier_list.h"

#include <algorithm>

#include "jitckpt/file_ops.h"
#include "jitckpt/safe_name.h"
#include "jitckpt/tier_files.h"

namespace ft::ckpt {

namespace internal {

Status StepDirs(FileOps& ops, std::string_view dir, std::string_view job,
                std::vector<std::pair<int64_t, std::string>>* out) {
  out->clear();
  FT_RETURN_IF_ERROR(CheckTree(ops, dir, job, -1));
  const std::string job_dir = JobDir(dir, job);
  for (const std::string& name : NamesIn(ops, job_dir)) {
    int64_t step = 0;
    if (!ParseStepDirName(name, &step)) continue;
    std::string path = JoinPath(job_dir, name);
    if (!CheckTreeDir(ops, path).ok()) continue;  // no symlinks, nobody else's
    out->emplace_back(step, std::move(path));
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

}  // namespace internal

std::vector<CopyId> ListCommitted(std::string_view dir, std::string_view job) {
  std::vector<CopyId> out;
  return ListCommitted(SystemFileOps(), dir, job, &out).ok() ? out : std::vector<CopyId>();
}

Status ListCommitted(FileOps& ops, std::string_view dir, std::string_view job, std::vector<CopyId>* out) {
  std::vector<std::pair<int64_t, std::string>> steps;
  Status s = internal::StepDirs(ops, dir, job, &steps);
  if (s.code() == StatusCode::kNotFound) {
    out->clear();
    return Status::Ok();
  }
  FT_RETURN_IF_ERROR(s);
  std::vector<CopyId> found;
  for (const auto& [step, step_dir] : steps) {
    for (const std::string& name : internal::NamesIn(ops, step_dir)) {
      int rank = -1;
      if (!internal::ParseRankFileName(name, internal::kManifestSuffix, &rank)) continue;
      // Committed: the manifest is in place, and so is the data it describes.
      CopyId id{step, rank};
      if (internal::IsOwnRegularFile(ops, step_dir + "/" + name) &&
          internal::IsOwnRegularFile(ops, DataPath(dir, job, id))) {
        found.push_back(id);
      }
    }
  }
  std::sort(found.begin(), found.end());
  *out = std::move(found);
  return Status::Ok();
}

}  // namespace ft::ckpt
