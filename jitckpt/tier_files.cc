#include "jitckpt/tier_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "jitckpt/tier_paths.h"

namespace ft::ckpt::internal {

Status IoFailure(int err, std::string_view what, std::string_view path) {
  return Status::IoError(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

Status CheckTreeDir(FileOps& ops, const std::string& path) {
  struct stat st {};
  if (ops.Lstat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("no checkpoint directory {}", path));
    return Status::FromErrno(err, fmt::format("stat of checkpoint directory {}", path));
  }
  return CheckOwnDirectory(st, path, ::geteuid());
}

Status CheckTree(FileOps& ops, std::string_view dir, std::string_view job, int64_t step) {
  FT_RETURN_IF_ERROR(CheckTreeDir(ops, JobDir(dir, job)));
  if (step >= 0) FT_RETURN_IF_ERROR(CheckTreeDir(ops, StepDir(dir, job, step)));
  return Status::Ok();
}

std::vector<std::string> NamesIn(FileOps& ops, const std::string& dir, int* err) {
  std::vector<std::string> names;
  int rc = ops.ListDir(dir.c_str(), &names);
  if (err != nullptr) *err = rc == 0 ? 0 : errno;
  if (rc != 0) names.clear();
  return names;
}

bool Exists(FileOps& ops, const std::string& path) {
  struct stat st {};
  return ops.Lstat(path.c_str(), &st) == 0;
}

bool IsOwnRegularFile(FileOps& ops, const std::string& path) {
  struct stat st {};
  return ops.Lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
}

}  // namespace ft::ckpt::internal
