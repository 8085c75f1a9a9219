// ft::ckpt tier internals: how every part of the tier (persist, read, list, retain) touches the
// tree below a tier's directory. Not for callers outside the tier's files.
//
// Trust: <dir> itself is the operator's setting (symlinks allowed). Below it, <dir>/<job> and
// every step directory must be directories of this user, never symlinks: on a shared file
// system another user could have created the name first. A writer refuses them (IoError naming
// the directory and its owner), readers refuse them (Corrupt), listings skip them. Files are
// opened with OpenTrusted (jitckpt/file_ops.h): a FIFO, a symlink or a file of another user is
// refused at once, never waited on.
#ifndef FT_JITCKPT_TIER_FILES_H_
#define FT_JITCKPT_TIER_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "jitckpt/file_ops.h"

namespace ft::ckpt::internal {

// O_DIRECT needs offset, length and buffer aligned to the device's logical block size; 4 KiB
// covers every block size in use (512 and 4096).
inline constexpr uint64_t kDirectAlign = 4096;
// One O_DIRECT write (or read) is synchronous to the device: large ones let the block layer
// keep many requests in flight. Reads of a copy's data go in pieces of this size too.
inline constexpr uint64_t kDirectIoBytes = 64ull << 20;

// An IoError that names the operation, the path and errno's words, whatever errno it is:
// a persist that fails is an I/O failure to its caller even when errno is ENOENT or EINVAL.
Status IoFailure(int err, std::string_view what, std::string_view path);

// A directory of the tree (<dir>/<job>, a step directory) is used only when it is a directory
// of this user, not a symlink. NotFound when absent; Corrupt naming the path and why otherwise.
Status CheckTreeDir(FileOps& ops, const std::string& path);
// The job's directory and, for step >= 0, the step's: both checked before a file in them is
// opened or listed.
Status CheckTree(FileOps& ops, std::string_view dir, std::string_view job, int64_t step);

// The entries of a directory (none when it cannot be read). A directory that changes or
// vanishes while it is listed (another node's Retain) just ends the listing; *err (when
// asked) gets the errno of a listing that failed, 0 otherwise.
std::vector<std::string> NamesIn(FileOps& ops, const std::string& dir, int* err = nullptr);

bool Exists(FileOps& ops, const std::string& path);
// A regular file of this user (lstat: a symlink is not one).
bool IsOwnRegularFile(FileOps& ops, const std::string& path);

}  // namespace ft::ckpt::internal

#endif  // FT_JITCKPT_TIER_FILES_H_
