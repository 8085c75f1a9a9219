// ft::ckpt::FileOps: the system calls the checkpoint tiers write, read and list files with,
// behind a small interface (LevelDB's Env), so a test can make the n-th write fail with ENOSPC
// — a full disk — refuse O_DIRECT with EINVAL — tmpfs — or cut the power and drop whatever was
// never fsynced (jitckpt/tests/fault_file_ops.h), without filling a disk or mounting anything.
//
// Every method does what the system call of its name does, returns what it returns and leaves
// errno set on failure; the defaults are the real calls. A directory's fsync is Open with
// O_DIRECTORY, then Fsync of that descriptor. A fake overrides what it needs and calls the base
// for the rest. Thread-safety is the implementation's: the defaults are thread-safe.
//
// OpenTrusted is the one way ft opens a file someone else could have put there (a tier's
// copies, the plan file, an arena): it never blocks on what sits at the path and refuses what
// is not a regular file of this user.
#ifndef FT_JITCKPT_FILE_OPS_H_
#define FT_JITCKPT_FILE_OPS_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::ckpt {

class FileOps {
 public:
  virtual ~FileOps() = default;

  virtual int Open(const char* path, int flags, mode_t mode);
  virtual ssize_t Write(int fd, const void* data, size_t bytes);
  virtual ssize_t Pread(int fd, void* data, size_t bytes, off_t offset);
  // fallocate(fd, 0, 0, bytes): reserves the file's blocks up front (EOPNOTSUPP where the
  // file system cannot; callers ignore that).
  virtual int Reserve(int fd, uint64_t bytes);
  virtual int Fsync(int fd);
  virtual int Close(int fd);
  virtual int Fstat(int fd, struct stat* st);
  virtual int Lstat(const char* path, struct stat* st);
  virtual int Rename(const char* from, const char* to);
  virtual int Unlink(const char* path);
  virtual int Mkdir(const char* path, mode_t mode);
  virtual int Rmdir(const char* path);
  // The names in a directory, without "." and ".."; 0, or -1 with errno (ENOENT, ENOTDIR...).
  // A directory that changes meanwhile may or may not show the change (readdir's rule).
  virtual int ListDir(const char* path, std::vector<std::string>* names);
};

// The real system calls (a process-wide instance with no state).
FileOps& SystemFileOps();

// Opens `path` with `flags` (O_RDONLY, maybe O_DIRECT; O_NONBLOCK, O_NOFOLLOW and O_CLOEXEC are
// added) without ever blocking on what sits there — a FIFO with no writer, a device — then
// requires a regular file owned by `owner`, and clears O_NONBLOCK again before handing the
// descriptor over. `what` names the file in errors ("checkpoint manifest"). NotFound when
// absent; Corrupt for a symlink, a FIFO, socket, device or directory ("not a regular file"),
// or another owner ("owned by uid 4242, not by this user (uid 1000): not trusted"), each naming
// the path; what errno says otherwise (FromErrno: EINVAL for a refused O_DIRECT is
// InvalidArgument). *fd is set only on success.
Status OpenTrusted(FileOps& ops, const std::string& path, int flags, std::string_view what, int* fd,
                   uid_t owner);
// The same for this process's effective user, through the real calls.
Status OpenTrusted(const std::string& path, int flags, std::string_view what, int* fd);

// Checks that `st` (from lstat or fstat of `path`) is a directory, not a symlink, owned by
// `owner`: Corrupt naming the path and why otherwise. For directories ft creates and later
// writes into or reads from (a tier's <dir>/<job> and step directories).
Status CheckOwnDirectory(const struct stat& st, const std::string& path, uid_t owner);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_FILE_OPS_H_
