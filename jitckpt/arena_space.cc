#include "jitckpt/arena_space.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace ft::ckpt::arena_space {
namespace {

// Fails fast when `dir` cannot hold `needed` more bytes: fallocate on a tmpfs would first take
// pages up to the limit (starving everyone else of /dev/shm) before it gives up.
Status CheckFreeSpace(const std::string& dir, const std::string& path, uint64_t needed) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return Status::FromErrno(errno, fmt::format("statvfs {}", dir));
  uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (needed > free_bytes) {
    return Status::IoError(fmt::format(
        "host arena {} needs {} more bytes ({}) in {}, which has {} bytes ({}) free; make room there, "
        "set FT_CKPT_ARENA_DIR to a larger tmpfs, or register less state",
        path, needed, Human(needed), dir, free_bytes, Human(free_bytes)));
  }
  return Status::Ok();
}

}  // namespace

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string Human(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
  return fmt::format("{} bytes", bytes);
}

Status Reserve(int fd, const std::string& dir, const std::string& path, uint64_t file_bytes, uint64_t reserve_end) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::FromErrno(errno, fmt::format("fstat {}", path));
  uint64_t allocated = static_cast<uint64_t>(st.st_blocks) * 512;
  FT_RETURN_IF_ERROR(CheckFreeSpace(dir, path, file_bytes > allocated ? file_bytes - allocated : 0));
  if (static_cast<uint64_t>(st.st_size) != file_bytes && ftruncate(fd, static_cast<off_t>(file_bytes)) != 0) {
    return Status::FromErrno(errno, fmt::format("sizing host arena {} to {} bytes", path, file_bytes));
  }
  return ReserveRange(fd, dir, path, 0, reserve_end);
}

Status ReserveRange(int fd, const std::string& dir, const std::string& path, uint64_t begin, uint64_t end) {
  if (end <= begin) return Status::Ok();
  int err = posix_fallocate(fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin));
  if (err != 0) {
    return Status::IoError(fmt::format("reserving {} bytes ({}) for host arena {} in {}: {}", end - begin,
                                       Human(end - begin), path, dir, std::strerror(err)));
  }
  return Status::Ok();
}

Status MapWritable(int fd, const std::string& path, uint64_t file_bytes, uint64_t data_offset, uint8_t** base) {
  void* p = mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, fmt::format("mmap {}", path));
  *base = static_cast<uint8_t*>(p);
  // Best effort: the data region on huge pages where the tmpfs offers them.
  if (madvise(*base + data_offset, file_bytes - data_offset, MADV_HUGEPAGE) != 0) {
    FT_LOG(Debug, Ckpt, "madvise(MADV_HUGEPAGE) on {}: {} (huge pages not offered)", path, std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace ft::ckpt::arena_space
