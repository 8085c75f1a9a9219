// ft::ckpt tier naming: where a copy of (job, step, rank) lives in a tier's directory, and the
// exact spellings the rest of the tier recognises. Pure functions (ThisHost asks gethostname
// once); no file is touched here.
//
//   <dir>/<job>/step-<step, 12 digits>/rank-<rank, 6 digits>.data       the data region
//   <dir>/<job>/step-<step, 12 digits>/rank-<rank, 6 digits>.manifest   committed last
//   ...*.tmp.<host>.<pid>                                                being written
//
// <job> is the job as every ft file name spells it (jitckpt/safe_name.h): one path component
// that never climbs out of <dir>.
#ifndef FT_JITCKPT_TIER_PATHS_H_
#define FT_JITCKPT_TIER_PATHS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ft::ckpt {

enum class TierKind { kLocal, kRemote };
const char* TierName(TierKind kind);  // "local", "remote"

struct CopyId {
  int64_t step = -1;
  int rank = -1;
  bool operator==(const CopyId&) const = default;
  auto operator<=>(const CopyId&) const = default;
};

std::string StepDir(std::string_view dir, std::string_view job, int64_t step);
std::string DataPath(std::string_view dir, std::string_view job, CopyId id);
std::string ManifestPath(std::string_view dir, std::string_view job, CopyId id);

// The tier's own files only (tier_files, tier_list, tier_persist, tier_read, tier_retain).
namespace internal {

inline constexpr std::string_view kDataSuffix = ".data";
inline constexpr std::string_view kManifestSuffix = ".manifest";

// <dir>/<job>.
std::string JobDir(std::string_view dir, std::string_view job);
// "rank-<rank, 6 digits><suffix>": a copy's file name within its step directory.
std::string RankFileName(int rank, std::string_view suffix);

// The exact spellings above and nothing else: "step-5" or "rank-1.data.bak" are never
// mistaken for a step directory or a copy's file.
bool ParseStepDirName(std::string_view name, int64_t* step);
bool ParseRankFileName(std::string_view name, std::string_view suffix, int* rank);

// This host as temp file names carry it: a pid means something only on its own host, and the
// remote tier's directory is shared by every node's worker.
const std::string& ThisHost();
// ".tmp.<this host>.<this pid>": appended to a file's final path while it is written.
std::string TempSuffix();
bool IsTempName(std::string_view name);
// The host and pid a temp name carries; false for a name of another form.
bool ParseTempName(std::string_view name, std::string_view* host, pid_t* pid);
// The final name a temp name will be renamed to (the part before ".tmp.").
std::string_view TempTarget(std::string_view name);

}  // namespace internal
}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_PATHS_H_
