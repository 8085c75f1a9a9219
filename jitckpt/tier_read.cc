#include "jitckpt/tier_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <span>
#include <string>

#include "jitckpt/checksum.h"
#include "jitckpt/file_ops.h"
#include "jitckpt/tier_files.h"

namespace ft::ckpt {

namespace {

using internal::CheckTree;
using internal::IoFailure;
using internal::kDirectAlign;
using internal::kDirectIoBytes;

// A manifest is a few MiB at most (one checksum per chunk); anything larger is not one.
constexpr uint64_t kMaxManifestFileBytes = 1ull << 30;

// Reads a whole small file of this user (OpenTrusted: never blocks on a FIFO). NotFound when
// absent; Corrupt when it is not a regular file of this user or larger than max_bytes;
// IoError otherwise.
Status ReadSmallFile(FileOps& ops, const std::string& path, uint64_t max_bytes, std::string* out) {
  int fd = -1;
  Status opened = OpenTrusted(ops, path, O_RDONLY, "checkpoint manifest", &fd, ::geteuid());
  if (opened.code() == StatusCode::kNotFound) {
    return Status::NotFound(fmt::format("no checkpoint manifest {}", path));
  }
  if (!opened.ok() && opened.code() != StatusCode::kCorrupt) return Status::IoError(opened.message());
  FT_RETURN_IF_ERROR(opened);
  struct FdCloser {
    FileOps& ops;
    int fd;
    ~FdCloser() { ops.Close(fd); }
  } closer{ops, fd};
  struct stat st;
  if (ops.Fstat(fd, &st) != 0) return IoFailure(errno, "stat of", path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::Corrupt(fmt::format("{} is not a checkpoint manifest ({} bytes)", path,
                                       static_cast<int64_t>(st.st_size)));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ops.Pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoFailure(errno, "reading", path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  *out = std::move(bytes);
  return Status::Ok();
}

// Opens a copy's data file for reading (O_DIRECT when asked and the file system takes it;
// *direct says whether it did) and checks it holds m.data_bytes. NotFound without a data file;
// Corrupt for anything but a regular file of this user of the right size.
Status OpenDataFile(FileOps& ops, const std::string& path, const Manifest& m, bool* direct, int* fd) {
  Status s = Status::InvalidArgument("");
  if (*direct) s = OpenTrusted(ops, path, O_RDONLY | O_DIRECT, "checkpoint data file", fd, ::geteuid());
  if (s.code() == StatusCode::kInvalidArgument) {  // not asked for, or O_DIRECT refused (EINVAL)
    *direct = false;
    s = OpenTrusted(ops, path, O_RDONLY, "checkpoint data file", fd, ::geteuid());
  }
  if (s.code() == StatusCode::kNotFound) return Status::NotFound(fmt::format("no checkpoint data file {}", path));
  if (!s.ok() && s.code() != StatusCode::kCorrupt) return Status::IoError(s.message());
  FT_RETURN_IF_ERROR(s);
  struct stat st;
  if (ops.Fstat(*fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != m.data_bytes) {
    const int64_t size = ops.Fstat(*fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
    ops.Close(*fd);
    *fd = -1;
    return Status::Corrupt(fmt::format("{} holds {} bytes, its manifest says {} (truncated?)", path, size,
                                       m.data_bytes));
  }
  return Status::Ok();
}

}  // namespace

Status ReadManifest(std::string_view dir, std::string_view job, CopyId id, Manifest* m) {
  return ReadManifest(SystemFileOps(), dir, job, id, m);
}

Status ReadManifest(FileOps& ops, std::string_view dir, std::string_view job, CopyId id, Manifest* m) {
  const std::string path = ManifestPath(dir, job, id);
  Status tree = CheckTree(ops, dir, job, id.step);
  if (tree.code() == StatusCode::kNotFound) return Status::NotFound(fmt::format("no checkpoint manifest {}", path));
  FT_RETURN_IF_ERROR(tree);
  std::string bytes;
  FT_RETURN_IF_ERROR(ReadSmallFile(ops, path, kMaxManifestFileBytes, &bytes));
  Manifest parsed;
  Status st = ParseManifest(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      &parsed);
  if (!st.ok()) return st.WithContext(path);
  if (parsed.job != job || parsed.step != id.step || parsed.rank != id.rank) {
    return Status::Corrupt(fmt::format(
        "{}: the manifest is of job '{}' step {} rank {}, its path says job '{}' step {} rank {}",
        path, parsed.job, parsed.step, parsed.rank, job, id.step, id.rank));
  }
  *m = std::move(parsed);
  return Status::Ok();
}

Status ReadData(std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity, const std::function<void(size_t)>& verified) {
  return ReadData(SystemFileOps(), dir, job, m, dest, dest_capacity, verified);
}

Status ReadData(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity, const std::function<void(size_t)>& verified) {
  const std::string path = DataPath(dir, job, {m.step, m.rank});
  if (dest == nullptr || dest_capacity < m.data_bytes) {
    return Status::InvalidArgument(fmt::format("reading {}: {} bytes do not fit in {}", path,
                                               m.data_bytes, dest == nullptr ? 0 : dest_capacity));
  }
  Status tree = CheckTree(ops, dir, job, m.step);
  if (tree.code() == StatusCode::kNotFound) return Status::NotFound(fmt::format("no checkpoint data file {}", path));
  FT_RETURN_IF_ERROR(tree);
  // Into an arena (2 MiB-aligned), O_DIRECT reads straight from the disk: one copy fewer and
  // a restore does not evict the data loader's page cache. Elsewhere, or where the file
  // system refuses it, buffered reads.
  bool direct = reinterpret_cast<uintptr_t>(dest) % kDirectAlign == 0 &&
                m.data_bytes % kDirectAlign == 0;
  int fd = -1;
  FT_RETURN_IF_ERROR(OpenDataFile(ops, path, m, &direct, &fd));
  struct FdCloser {
    FileOps& ops;
    int* fd;
    ~FdCloser() { ops.Close(*fd); }
  } closer{ops, &fd};
  if (!direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  uint64_t done = 0;
  size_t next_chunk = 0;
  while (done < m.data_bytes) {
    const uint64_t want = std::min(kDirectIoBytes, m.data_bytes - done);
    ssize_t n = ops.Pread(fd, dest + done, want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && direct && errno == EINVAL) {
      // Refused at read time (some FUSE), or a short read left the offset unaligned.
      int buffered = -1;
      bool again = false;
      FT_RETURN_IF_ERROR(OpenDataFile(ops, path, m, &again, &buffered));
      ops.Close(fd);
      fd = buffered;
      direct = false;
      continue;
    }
    if (n < 0) return IoFailure(errno, "reading", path);
    if (n == 0) {
      return Status::IoError(fmt::format("reading {}: the file ended at byte {} of {}", path,
                                         done, m.data_bytes));
    }
    done += static_cast<uint64_t>(n);
    // Each chunk is verified as soon as all of it has landed.
    for (; next_chunk < m.chunk_count() && m.chunk_end(next_chunk) <= done; ++next_chunk) {
      if (!ChunkVerifies(m, next_chunk, dest)) {
        return Status::Corrupt(fmt::format("{}: chunk {} (bytes {}..{}) does not match its checksum",
                                           path, next_chunk, m.chunk_begin(next_chunk),
                                           m.chunk_end(next_chunk)));
      }
      if (verified) verified(next_chunk);
    }
  }
  return Status::Ok();
}

Status ReadDataRange(std::string_view dir, std::string_view job, const Manifest& m, uint64_t offset,
                     uint64_t len, uint8_t* dest) {
  return ReadDataRange(SystemFileOps(), dir, job, m, offset, len, dest);
}

Status ReadDataRange(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m,
                     uint64_t offset, uint64_t len, uint8_t* dest) {
  const std::string path = DataPath(dir, job, {m.step, m.rank});
  const uint64_t chunk = m.chunk_bytes;
  const bool aligned = chunk > 0 && offset % chunk == 0 && (len % chunk == 0 || offset + len == m.data_bytes);
  if (dest == nullptr || len == 0 || offset > m.data_bytes || len > m.data_bytes - offset || !aligned) {
    return Status::InvalidArgument(fmt::format(
        "reading bytes {}..{} of {}: not whole chunks of {} bytes within its {} bytes", offset,
        offset + len, path, chunk, m.data_bytes));
  }
  Status tree = CheckTree(ops, dir, job, m.step);
  if (tree.code() == StatusCode::kNotFound) return Status::NotFound(fmt::format("no checkpoint data file {}", path));
  FT_RETURN_IF_ERROR(tree);
  int fd = -1;
  bool direct = false;
  FT_RETURN_IF_ERROR(OpenDataFile(ops, path, m, &direct, &fd));
  struct FdCloser {
    FileOps& ops;
    int fd;
    ~FdCloser() { ops.Close(fd); }
  } closer{ops, fd};
  uint64_t done = 0;
  while (done < len) {
    const uint64_t want = std::min(kDirectIoBytes, len - done);
    ssize_t n = ops.Pread(fd, dest + done, want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoFailure(errno, "reading", path);
    if (n == 0) {
      return Status::IoError(fmt::format("reading {}: the file ended at byte {} of {}", path,
                                         offset + done, m.data_bytes));
    }
    done += static_cast<uint64_t>(n);
  }
  for (size_t i = offset / chunk; i < m.chunk_count() && m.chunk_begin(i) < offset + len; ++i) {
    const uint64_t begin = m.chunk_begin(i), end = m.chunk_end(i);
    if (Checksum(dest + (begin - offset), end - begin) != m.chunk_checksums[i]) {
      return Status::Corrupt(fmt::format("{}: chunk {} (bytes {}..{}) does not match its checksum",
                                         path, i, begin, end));
    }
  }
  return Status::Ok();
}

}  // namespace ft::ckpt
