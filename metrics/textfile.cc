#include "metrics/textfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

namespace ft::metrics {

namespace {

Status WriteAll(int fd, std::string_view text, const std::string& what) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + what);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Status WriteTextfile(const std::string& path, std::string_view text) {
  if (path.empty()) return Status::InvalidArgument("FT_METRICS_TEXTFILE is empty");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  (void)::fchmod(fd, 0644);  // whatever the umask: node_exporter reads it
  Status status = WriteAll(fd, text, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = Status::FromErrno(errno, "fsync " + tmp);
  if (::close(fd) != 0 && status.ok()) status = Status::FromErrno(errno, "close " + tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = Status::FromErrno(errno, fmt::format("rename {} to {}", tmp, path));
  }
  if (!status.ok()) {
    (void)::unlink(tmp.c_str());
    return status;
  }
  // The rename itself is durable once the directory is synced.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace ft::metrics
