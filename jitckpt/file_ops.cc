#include "jitckpt/file_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace ft::ckpt {

int FileOps::Open(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }

ssize_t FileOps::Write(int fd, const void* data, size_t bytes) { return ::write(fd, data, bytes); }

int FileOps::Reserve(int fd, uint64_t bytes) {
  // fallocate(2), not posix_fallocate(3): where the file system cannot reserve, glibc's
  // emulation would write every block once more, doubling the I/O of a persist.
  return ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
}

int FileOps::Fsync(int fd) { return ::fsync(fd); }

int FileOps::Close(int fd) { return ::close(fd); }

int FileOps::Rename(const char* from, const char* to) { return ::rename(from, to); }

int FileOps::Unlink(const char* path) { return ::unlink(path); }

int FileOps::Mkdir(const char* path, mode_t mode) { return ::mkdir(path, mode); }

FileOps& SystemFileOps() {
  static FileOps ops;
  return ops;
}

}  // namespace ft::ckpt
