// ft::ckpt::FileOps: the system calls the checkpoint tiers write files with, behind a small
// interface (LevelDB's Env), so a test can make the n-th write fail with ENOSPC — a full disk —
// or refuse O_DIRECT with EINVAL — tmpfs — without filling a disk or mounting anything.
//
// Every method does what the system call of its name does, returns what it returns and leaves
// errno set on failure; the defaults are the real calls. A fake overrides what it needs and
// calls the base for the rest. Thread-safety is the implementation's: the defaults are
// thread-safe.
#ifndef FT_JITCKPT_FILE_OPS_H_
#define FT_JITCKPT_FILE_OPS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ft::ckpt {

class FileOps {
 public:
  virtual ~FileOps() = default;

  virtual int Open(const char* path, int flags, mode_t mode);
  virtual ssize_t Write(int fd, const void* data, size_t bytes);
  // fallocate(fd, 0, 0, bytes): reserves the file's blocks up front (EOPNOTSUPP where the
  // file system cannot; callers ignore that).
  virtual int Reserve(int fd, uint64_t bytes);
  virtual int Fsync(int fd);
  virtual int Close(int fd);
  virtual int Rename(const char* from, const char* to);
  virtual int Unlink(const char* path);
  virtual int Mkdir(const char* path, mode_t mode);
};

// The real system calls (a process-wide instance with no state).
FileOps& SystemFileOps();

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_FILE_OPS_H_
