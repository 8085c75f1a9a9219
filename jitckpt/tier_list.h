// ft::ckpt tier listing: which steps and which committed copies of a job a tier's directory
// holds. Reads directories only; writes nothing. Thread-safe (no state).
#ifndef FT_JITCKPT_TIER_LIST_H_
#define FT_JITCKPT_TIER_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "jitckpt/tier_paths.h"

namespace ft::ckpt {

class FileOps;

// Committed copies of `job` in `dir`, sorted: a manifest and its data file, both regular files
// of this user. None when the job has no directory; Corrupt when its directory is not trusted
// (the first form then returns none).
std::vector<CopyId> ListCommitted(std::string_view dir, std::string_view job);
Status ListCommitted(FileOps& ops, std::string_view dir, std::string_view job, std::vector<CopyId>* out);

namespace internal {

// Steps of `job` in `dir` that have a step directory of this user, with its path, ascending.
// NotFound when the job has no directory; Corrupt when its directory is not trusted.
Status StepDirs(FileOps& ops, std::string_view dir, std::string_view job,
                std::vector<std::pair<int64_t, std::string>>* out);

}  // namespace internal
}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_LIST_H_
