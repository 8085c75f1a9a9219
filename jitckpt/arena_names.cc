// Where arenas live, by name: a rank's arena, the copy a worker prefetched for it, the buddy
// copy a worker holds of another node's rank, and the listing ftworker scans (arena.h).
#include <dirent.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "jitckpt/arena.h"
#include "jitckpt/safe_name.h"

namespace ft::ckpt {
namespace {

constexpr std::string_view kFilePrefix = "ft-ckpt.";
constexpr std::string_view kPrefetchPrefix = "ft-prefetch.";
constexpr std::string_view kReplicaPrefix = "ft-replica.";

}  // namespace

std::string Arena::PathFor(std::string_view arena_dir, std::string_view job, int rank) {
  return JoinPath(arena_dir, fmt::format("{}{}.{}", kFilePrefix, SafeJobName(job), rank));
}

std::string Arena::PrefetchPathFor(std::string_view arena_dir, std::string_view job, int rank) {
  return JoinPath(arena_dir, fmt::format("{}{}.{}", kPrefetchPrefix, SafeJobName(job), rank));
}

std::string Arena::ReplicaPathFor(std::string_view arena_dir, std::string_view job, int rank) {
  return JoinPath(arena_dir, fmt::format("{}{}.{}", kReplicaPrefix, SafeJobName(job), rank));
}

std::vector<std::string> Arena::List(std::string_view arena_dir, std::string_view job) {
  std::vector<std::pair<int, std::string>> found;
  const std::string prefix = fmt::format("{}{}.", kFilePrefix, SafeJobName(job));
  const std::string dir(arena_dir);
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.starts_with(prefix)) continue;
      int rank = RankOf(name);
      // The job part must be exactly ours ("a" must not list "a-b"'s arenas).
      if (rank >= 0 && name.size() == prefix.size() + std::to_string(rank).size()) {
        found.emplace_back(rank, JoinPath(arena_dir, name));
      }
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (auto& [rank, path] : found) paths.push_back(std::move(path));
  return paths;
}

int Arena::RankOf(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (!name.starts_with(kFilePrefix)) return -1;
  name.remove_prefix(kFilePrefix.size());
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return -1;
  std::string_view job = name.substr(0, dot);
  std::string_view digits = name.substr(dot + 1);
  if (SafeJobName(job) != job) return -1;  // temp files ("....3.tmp.77") and strangers
  if (digits.empty() || digits.size() > 10 || (digits.size() > 1 && digits[0] == '0')) return -1;
  int64_t rank = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    rank = rank * 10 + (c - '0');
  }
  return rank > INT32_MAX ? -1 : static_cast<int>(rank);
}

}  // namespace ft::ckpt
