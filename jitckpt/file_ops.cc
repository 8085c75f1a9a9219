#include "jitckpt/file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

namespace ft::ckpt {

int FileOps::Open(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }

ssize_t FileOps::Write(int fd, const void* data, size_t bytes) { return ::write(fd, data, bytes); }

ssize_t FileOps::Pread(int fd, void* data, size_t bytes, off_t offset) {
  return ::pread(fd, data, bytes, offset);
}

int FileOps::Reserve(int fd, uint64_t bytes) {
  // fallocate(2), not posix_fallocate(3): where the file system cannot reserve, glibc's
  // emulation would write every block once more, doubling the I/O of a persist.
  return ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
}

int FileOps::Fsync(int fd) { return ::fsync(fd); }

int FileOps::Close(int fd) { return ::close(fd); }

int FileOps::Fstat(int fd, struct stat* st) { return ::fstat(fd, st); }

int FileOps::Lstat(const char* path, struct stat* st) { return ::lstat(path, st); }

int FileOps::Rename(const char* from, const char* to) { return ::rename(from, to); }

int FileOps::Unlink(const char* path) { return ::unlink(path); }

int FileOps::Mkdir(const char* path, mode_t mode) { return ::mkdir(path, mode); }

int FileOps::Rmdir(const char* path) { return ::rmdir(path); }

int FileOps::ListDir(const char* path, std::vector<std::string>* names) {
  // O_NOFOLLOW: a directory listed is never reached through a symlink in its last component.
  int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  names->clear();
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name != "." && name != "..") names->emplace_back(name);
    errno = 0;
  }
  int err = errno;
  ::closedir(d);
  errno = err;
  return err == 0 ? 0 : -1;
}

FileOps& SystemFileOps() {
  static FileOps ops;
  return ops;
}

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

}  // namespace

Status OpenTrusted(FileOps& ops, const std::string& path, int flags, std::string_view what, int* fd,
                   uid_t owner) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer, forever. O_NOFOLLOW: the
  // last component is never a symlink (ELOOP).
  int got = ops.Open(path.c_str(), flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
  if (got < 0) {
    int err = errno;
    if (err == ELOOP) {
      return Status::Corrupt(fmt::format("{} {}: a symbolic link, not a regular file: not trusted", what, path));
    }
    return Status::FromErrno(err, fmt::format("opening {} {}", what, path));
  }
  struct stat st {};
  if (ops.Fstat(got, &st) != 0) {
    int err = errno;
    ops.Close(got);
    return Status::FromErrno(err, fmt::format("stat of {} {}", what, path));
  }
  if (!S_ISREG(st.st_mode)) {
    ops.Close(got);
    const char* kind = KindOf(st.st_mode);
    return Status::Corrupt(fmt::format("{} {}: {}{}: not trusted", what, path, kind,
                                       kind[0] == 'n' ? "" : ", not a regular file"));
  }
  if (st.st_uid != owner) {
    ops.Close(got);
    return Status::Corrupt(fmt::format("{} {}: owned by uid {}, not by this user (uid {}): not trusted",
                                       what, path, st.st_uid, owner));
  }
  int fl = ::fcntl(got, F_GETFL);
  if (fl < 0 || ::fcntl(got, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int err = errno;
    ops.Close(got);
    return Status::FromErrno(err, fmt::format("clearing O_NONBLOCK of {} {}", what, path));
  }
  *fd = got;
  return Status::Ok();
}

Status OpenTrusted(const std::string& path, int flags, std::string_view what, int* fd) {
  return OpenTrusted(SystemFileOps(), path, flags, what, fd, ::geteuid());
}

Status CheckOwnDirectory(const struct stat& st, const std::string& path, uid_t owner) {
  if (!S_ISDIR(st.st_mode)) {
    return Status::Corrupt(fmt::format("{}: {}, not a directory: not trusted", path, KindOf(st.st_mode)));
  }
  if (st.st_uid != owner) {
    return Status::Corrupt(fmt::format("{}: owned by uid {}, not by this user (uid {}): not trusted", path,
                                       st.st_uid, owner));
  }
  return Status::Ok();
}

}  // namespace ft::ckpt
