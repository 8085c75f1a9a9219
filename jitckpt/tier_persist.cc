#include "jitckpt/tier_persist.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "jitckpt/file_ops.h"
#include "jitckpt/tier_files.h"
#include "jitckpt/tier_list.h"

namespace ft::ckpt {

namespace {

namespace fs = std::filesystem;

using internal::CheckTreeDir;
using internal::Exists;
using internal::IoFailure;
using internal::IsTempName;
using internal::JobDir;
using internal::kDataSuffix;
using internal::kDirectAlign;
using internal::kDirectIoBytes;
using internal::kManifestSuffix;
using internal::NamesIn;
using internal::ParseRankFileName;
using internal::ParseTempName;
using internal::RankFileName;
using internal::StepDirs;
using internal::TempSuffix;
using internal::TempTarget;
using internal::ThisHost;

// Bounce buffer for a source that is not aligned.
constexpr uint64_t kBounceBytes = 8ull << 20;
// Buffered writes (remote tier, and the local tier where O_DIRECT is refused).
constexpr uint64_t kBufferedWriteBytes = 4ull << 20;
constexpr uint64_t kWritebackWindow = 32ull << 20;
constexpr mode_t kDirMode = 0700;
constexpr mode_t kFileMode = 0600;

// A temp file another writer may still be writing: one of a live process on this host, or a
// recent one of another host (whose processes cannot be asked). Everything else — the temps
// of a dead worker, stale ones, names of another form — is left over.
constexpr auto kForeignTempAge = std::chrono::minutes(10);

bool TempMayBeLive(const std::string& path, std::string_view name) {
  std::string_view host;
  pid_t pid = 0;
  if (!ParseTempName(name, &host, &pid)) return false;
  if (host == ThisHost()) {
    return pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  const auto modified = std::chrono::system_clock::time_point(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  return std::chrono::system_clock::now() - modified < kForeignTempAge;
}

Status FsyncDir(FileOps& ops, const std::string& path) {
  int fd = ops.Open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return IoFailure(errno, "opening directory", path);
  int rc = ops.Fsync(fd);
  int err = errno;
  ops.Close(fd);
  // Some network and FUSE file systems cannot fsync a directory; the rename is then as
  // durable as that file system makes it.
  if (rc != 0 && err != EINVAL && err != ENOTSUP) return IoFailure(err, "fsync of directory", path);
  return Status::Ok();
}

// mkdir -p of a tier's directory, fsyncing each parent that gained an entry (a new directory
// is durable only once its parent is). The tier's directory itself may be reached through
// symlinks: it is the operator's setting.
Status MakeDirs(FileOps& ops, const std::string& path) {
  std::vector<std::string> missing;
  std::string cur = path;
  while (!cur.empty() && cur != "/") {
    struct stat st;
    if (::stat(cur.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return IoFailure(ENOTDIR, "creating checkpoint directory", cur);
      break;
    }
    missing.push_back(cur);
    size_t slash = cur.find_last_of('/');
    if (slash == std::string::npos) break;
    cur = slash == 0 ? "/" : cur.substr(0, slash);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (ops.Mkdir(it->c_str(), kDirMode) != 0 && errno != EEXIST) {
      return IoFailure(errno, "creating checkpoint directory", *it);
    }
    std::string parent = fs::path(*it).parent_path().native();
    if (!parent.empty()) FT_RETURN_IF_ERROR(FsyncDir(ops, parent));
  }
  return Status::Ok();
}

// A directory of the tree below the tier's directory (<dir>/<job>, a step directory):
// created when absent (its parent fsynced), and then written into only when it is a
// directory of this user — never a symlink, never another user's.
Status MakeTreeDir(FileOps& ops, const std::string& path) {
  Status s = CheckTreeDir(ops, path);
  if (s.code() == StatusCode::kNotFound) {
    if (ops.Mkdir(path.c_str(), kDirMode) != 0 && errno != EEXIST) {
      return IoFailure(errno, "creating checkpoint directory", path);
    }
    FT_RETURN_IF_ERROR(FsyncDir(ops, fs::path(path).parent_path().native()));
    s = CheckTreeDir(ops, path);
  }
  if (!s.ok()) {
    return Status::IoError(fmt::format("refusing checkpoint directory {}; remove it, or point the tier at a "
                                       "directory of this user",
                                       s.message()));
  }
  return Status::Ok();
}

void LogDirectIoRefusedOnce(std::string_view path, int err) {
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  FT_LOG(Info, Ckpt,
         "{} refuses O_DIRECT ({}); the local checkpoint tier writes through the page cache "
         "instead (said once per process)",
         fs::path(path).parent_path().native(), std::strerror(err));
}

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Buffered writes stream out instead of piling up: when `end` (a multiple of the window) has
// been written, writeback of the window just filled starts and the window before it, waited
// for, leaves the page cache. A persist then holds at most two windows of dirty pages — on a
// training node the page cache is the data loader's — and the final fsync has little left.
// Errors that mean the data did not reach the file fail the persist; a file system that
// cannot do ranges (EINVAL, ESPIPE) just writes back at fsync.
Status StreamOut(int fd, const std::string& path, uint64_t end) {
  const off64_t window = static_cast<off64_t>(kWritebackWindow);
  const off64_t filled = static_cast<off64_t>(end) - window;
  auto failed = [](int err) { return err == EIO || err == ENOSPC || err == EDQUOT; };
  if (::sync_file_range(fd, filled, window, SYNC_FILE_RANGE_WRITE) != 0 && failed(errno)) {
    return IoFailure(errno, "writing back", path);
  }
  if (filled < window) return Status::Ok();
  const off64_t previous = filled - window;
  if (::sync_file_range(fd, previous, window,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) != 0 &&
      failed(errno)) {
    return IoFailure(errno, "writing back", path);
  }
  ::posix_fadvise(fd, previous, window, POSIX_FADV_DONTNEED);
  return Status::Ok();
}

// Writes `bytes` of `data` to `fd` from offset 0. With `direct`, each write is a whole number
// of aligned blocks from an aligned address (the source itself when it is aligned, else a
// bounce buffer). *refused is set when the file system turned O_DIRECT down with EINVAL.
Status WriteData(FileOps& ops, int fd, const std::string& path, const uint8_t* data,
                 uint64_t bytes, bool direct, bool* refused) {
  *refused = false;
  const bool bounce = direct && reinterpret_cast<uintptr_t>(data) % kDirectAlign != 0;
  std::unique_ptr<uint8_t, AlignedFree> bounce_buf;
  if (bounce) {
    bounce_buf.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, kBounceBytes)));
    if (!bounce_buf) return Status::IoError(fmt::format("no memory for a bounce buffer writing {}", path));
  }
  const uint64_t piece = !direct ? kBufferedWriteBytes : bounce ? kBounceBytes : kDirectIoBytes;
  uint64_t done = 0;
  while (done < bytes) {
    uint64_t want = std::min(piece, bytes - done);
    const uint8_t* src = data + done;
    if (bounce) {
      std::memcpy(bounce_buf.get(), src, want);
      src = bounce_buf.get();
    }
    ssize_t n = ops.Write(fd, src, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (direct && errno == EINVAL) {
        *refused = true;
        return Status::Ok();
      }
      return IoFailure(errno, "writing", path);
    }
    if (n == 0) return IoFailure(EIO, "writing (no progress)", path);
    const uint64_t before = done;
    done += static_cast<uint64_t>(n);
    // A short O_DIRECT write leaves the next offset unaligned: the next write then fails
    // with EINVAL and the copy is written again through the page cache.
    if (!direct && done / kWritebackWindow != before / kWritebackWindow) {
      FT_RETURN_IF_ERROR(StreamOut(fd, path, done / kWritebackWindow * kWritebackWindow));
    }
  }
  return Status::Ok();
}

// Temp and final files of one persist, removed again unless the persist commits.
class PendingFiles {
 public:
  explicit PendingFiles(FileOps& ops) : ops_(ops) {}
  ~PendingFiles() {
    if (!committed_) Abandon();
  }
  PendingFiles(const PendingFiles&) = delete;
  PendingFiles& operator=(const PendingFiles&) = delete;
  void Abandon() {
    for (const std::string& path : paths_) ops_.Unlink(path.c_str());
    paths_.clear();
  }
  void Add(const std::string& path) { paths_.push_back(path); }
  void Forget(const std::string& path) { std::erase(paths_, path); }
  void Commit() { committed_ = true; }

 private:
  FileOps& ops_;
  std::vector<std::string> paths_;
  bool committed_ = false;
};

// Creates `path` (which must not exist: a stale temp of an earlier incarnation with the same
// pid is removed once), writes, fsyncs and closes it. *used_direct says whether O_DIRECT did.
Status WriteFile(FileOps& ops, const std::string& path, const uint8_t* data, uint64_t bytes,
                 bool try_direct, PendingFiles* pending, bool* used_direct) {
  bool direct = try_direct;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int flags = O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | (direct ? O_DIRECT : 0);
    int fd = ops.Open(path.c_str(), flags, kFileMode);
    if (fd < 0 && errno == EEXIST) {
      ops.Unlink(path.c_str());
      fd = ops.Open(path.c_str(), flags, kFileMode);
    }
    if (fd < 0 && direct && errno == EINVAL) {
      LogDirectIoRefusedOnce(path, EINVAL);
      direct = false;
      continue;
    }
    if (fd < 0) return IoFailure(errno, "creating", path);
    pending->Add(path);
    // Reserving the blocks up front finds a full disk before gigabytes are written and keeps
    // the file contiguous; file systems that cannot reserve just skip it.
    if (bytes > 0 && ops.Reserve(fd, bytes) != 0 && errno != EOPNOTSUPP && errno != ENOSYS &&
        errno != EINVAL) {
      int err = errno;
      ops.Close(fd);
      return IoFailure(err, "reserving space for", path);
    }
    bool refused = false;
    Status written = WriteData(ops, fd, path, data, bytes, direct, &refused);
    if (written.ok() && refused) {
      ops.Close(fd);
      ops.Unlink(path.c_str());
      pending->Forget(path);
      LogDirectIoRefusedOnce(path, EINVAL);
      direct = false;
      continue;
    }
    if (!written.ok()) {
      ops.Close(fd);
      return written;
    }
    if (ops.Fsync(fd) != 0) {
      int err = errno;
      ops.Close(fd);
      return IoFailure(err, "fsync of", path);
    }
    // close can report a deferred write error (NFS): it fails the persist like any other.
    if (ops.Close(fd) != 0) return IoFailure(errno, "closing", path);
    *used_direct = direct;
    return Status::Ok();
  }
  return Status::Internal(fmt::format("writing {}: O_DIRECT fallback did not settle", path));
}

Status RenameInto(FileOps& ops, const std::string& from, const std::string& to) {
  if (ops.Rename(from.c_str(), to.c_str()) != 0) {
    return IoFailure(errno, fmt::format("renaming {} to", from), to);
  }
  return Status::Ok();
}

}  // namespace

Status PersistCopy(TierKind kind, std::string_view dir, const Manifest& m, const uint8_t* data,
                   const std::function<bool()>& still_valid, PersistStats* stats) {
  return PersistCopy(SystemFileOps(), kind, dir, m, data, still_valid, stats);
}

Status PersistCopy(FileOps& ops, TierKind kind, std::string_view dir, const Manifest& m,
                   const uint8_t* data, const std::function<bool()>& still_valid,
                   PersistStats* stats) {
  if (dir.empty()) return Status::InvalidArgument("persisting a checkpoint copy: no directory");
  if (m.step < 0 || m.rank < 0) {
    return Status::InvalidArgument(
        fmt::format("persisting a checkpoint copy of step {} rank {}: both must be >= 0", m.step,
                    m.rank));
  }
  if (data == nullptr && m.data_bytes > 0) {
    return Status::InvalidArgument("persisting a checkpoint copy: no data");
  }
  const auto start = std::chrono::steady_clock::now();
  const CopyId id{m.step, m.rank};
  const std::string step_dir = StepDir(dir, m.job, m.step);
  const std::string data_path = DataPath(dir, m.job, id);
  const std::string manifest_path = ManifestPath(dir, m.job, id);
  const std::string temp_suffix = TempSuffix();
  const std::string manifest_bytes = EncodeManifest(m);

  FT_RETURN_IF_ERROR(MakeDirs(ops, std::string(dir)));
  FT_RETURN_IF_ERROR(MakeTreeDir(ops, JobDir(dir, m.job)));
  FT_RETURN_IF_ERROR(MakeTreeDir(ops, step_dir));
  PendingFiles pending(ops);
  bool used_direct = false;
  Status status = [&]() -> Status {
    // Local tier: O_DIRECT streams the arena to the disk without polluting the page cache
    // (which on a training node belongs to the data loader); it needs whole blocks.
    const bool try_direct = kind == TierKind::kLocal && m.data_bytes % kDirectAlign == 0;
    const std::string data_temp = data_path + temp_suffix;
    FT_RETURN_IF_ERROR(WriteFile(ops, data_temp, data, m.data_bytes, try_direct, &pending,
                                 &used_direct));
    // The manifest is not a whole number of blocks, so it goes through the page cache. It is
    // written before either rename, so that the two renames follow each other closely: a
    // data file without its manifest exists only for one directory fsync.
    const std::string manifest_temp = manifest_path + temp_suffix;
    bool manifest_direct = false;
    FT_RETURN_IF_ERROR(WriteFile(ops, manifest_temp,
                                 reinterpret_cast<const uint8_t*>(manifest_bytes.data()),
                                 manifest_bytes.size(), false, &pending, &manifest_direct));
    if (still_valid && !still_valid()) {
      return Status::NotReady(fmt::format(
          "step {} rank {} was overwritten in the arena while it was persisted to {}; copy "
          "abandoned",
          m.step, m.rank, step_dir));
    }
    // A copy of the same id committed earlier stops being one before its data is replaced,
    // so no reader ever pairs the old manifest with new data.
    if (ops.Unlink(manifest_path.c_str()) == 0) {
      FT_RETURN_IF_ERROR(FsyncDir(ops, step_dir));
    } else if (errno != ENOENT) {
      return IoFailure(errno, "removing the previous manifest", manifest_path);
    }
    pending.Add(data_path);  // from here on, whatever data file is there goes on failure
    FT_RETURN_IF_ERROR(RenameInto(ops, data_temp, data_path));
    pending.Forget(data_temp);
    // The data's rename is durable before the manifest's: the manifest, last, is what makes
    // the copy exist.
    FT_RETURN_IF_ERROR(FsyncDir(ops, step_dir));
    pending.Add(manifest_path);
    FT_RETURN_IF_ERROR(RenameInto(ops, manifest_temp, manifest_path));
    pending.Forget(manifest_temp);
    return FsyncDir(ops, step_dir);
  }();
  if (!status.ok()) {
    // PendingFiles removes what was written; a step directory this persist left empty goes too.
    pending.Abandon();
    ops.Rmdir(step_dir.c_str());
    return status;
  }
  pending.Commit();
  if (stats != nullptr) {
    stats->bytes = m.data_bytes;
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats->direct_io = used_direct;
  }
  return Status::Ok();
}

Status CleanUncommitted(std::string_view dir, std::string_view job, int* removed) {
  return CleanUncommitted(SystemFileOps(), dir, job, removed);
}

Status CleanUncommitted(FileOps& ops, std::string_view dir, std::string_view job, int* removed) {
  int count = 0;
  std::vector<std::pair<int64_t, std::string>> steps;
  Status listed = StepDirs(ops, dir, job, &steps);
  if (listed.code() == StatusCode::kNotFound) {
    if (removed != nullptr) *removed = 0;
    return Status::Ok();
  }
  FT_RETURN_IF_ERROR(listed);
  for (const auto& [step, step_dir] : steps) {
    int err = 0;
    const std::vector<std::string> names = NamesIn(ops, step_dir, &err);
    if (err == ENOENT) continue;  // another worker's Retain
    if (err != 0) return IoFailure(err, "listing", step_dir);
    std::set<std::string> present(names.begin(), names.end());
    // Another writer between its two renames: its data is in place, its manifest still a temp.
    std::set<int> committing;
    for (const std::string& name : names) {
      int rank = -1;
      if (IsTempName(name) && TempMayBeLive(step_dir + "/" + name, name) &&
          ParseRankFileName(TempTarget(name), kManifestSuffix, &rank)) {
        committing.insert(rank);
      }
    }
    for (const std::string& name : names) {
      const std::string path = step_dir + "/" + name;
      int rank = -1;
      bool drop = false;
      if (IsTempName(name)) {
        drop = !TempMayBeLive(path, name);
      } else if (ParseRankFileName(name, kDataSuffix, &rank)) {
        // Data without its manifest: a persist killed between the two renames.
        drop = !present.contains(RankFileName(rank, kManifestSuffix)) && !committing.contains(rank) &&
               !Exists(ops, ManifestPath(dir, job, {step, rank}));
      } else if (ParseRankFileName(name, kManifestSuffix, &rank)) {
        // A manifest without its data describes nothing readable. Asked again before it goes: a
        // listing made while another writer renames its files may show its manifest, renamed
        // last, and miss its data (readdir is no snapshot).
        drop = !present.contains(RankFileName(rank, kDataSuffix)) && !Exists(ops, DataPath(dir, job, {step, rank}));
      }
      if (!drop) continue;
      if (ops.Unlink(path.c_str()) != 0 && errno != ENOENT) {
        return IoFailure(errno, "removing uncommitted checkpoint file", path);
      }
      ++count;
    }
    ops.Rmdir(step_dir.c_str());  // only succeeds when nothing is left in it
  }
  if (removed != nullptr) *removed = count;
  return Status::Ok();
}

}  // namespace ft::ckpt
