#include "jitckpt/tier.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "common/log.h"
#include "jitckpt/checksum.h"
#include "jitckpt/file_ops.h"
#include "jitckpt/safe_name.h"

namespace ft::ckpt {

namespace {

namespace fs = std::filesystem;

// O_DIRECT needs offset, length and buffer aligned to the device's logical block size; 4 KiB
// covers every block size in use (512 and 4096).
constexpr uint64_t kDirectAlign = 4096;
// One O_DIRECT write (or read) is synchronous to the device: large ones let the block layer
// keep many requests in flight. Bounce buffer for a source that is not aligned.
constexpr uint64_t kDirectWriteBytes = 64ull << 20;
constexpr uint64_t kBounceBytes = 8ull << 20;
// Buffered writes (remote tier, and the local tier where O_DIRECT is refused).
constexpr uint64_t kBufferedWriteBytes = 4ull << 20;
constexpr uint64_t kWritebackWindow = 32ull << 20;
// A manifest is a few MiB at most (one checksum per chunk); anything larger is not one.
constexpr uint64_t kMaxManifestFileBytes = 1ull << 30;
constexpr mode_t kDirMode = 0700;
constexpr mode_t kFileMode = 0600;

// The job spelled as in the arenas' file names: one path component that never climbs out.
std::string JobDir(std::string_view dir, std::string_view job) {
  return JoinPath(dir, SafeJobName(job));
}

// Parses the decimal number that follows `prefix` and precedes `suffix` in `name`, accepting
// only the exact spelling this file writes (zero-padded to `width`), so stray files such as
// "step-5" or "rank-1.data.bak" are never mistaken for copies.
bool ParseNumberedName(std::string_view name, std::string_view prefix, std::string_view suffix,
                       int width, int64_t* out) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  if (name.size() < prefix.size() + suffix.size()) return false;
  std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18) return false;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (fmt::format("{:0{}}", value, width) != digits) return false;
  *out = value;
  return true;
}

bool ParseStepDirName(std::string_view name, int64_t* step) {
  return ParseNumberedName(name, "step-", "", 12, step);
}

bool ParseRankFileName(std::string_view name, std::string_view suffix, int* rank) {
  int64_t value = 0;
  if (!ParseNumberedName(name, "rank-", suffix, 6, &value) || value > INT32_MAX) return false;
  *rank = static_cast<int>(value);
  return true;
}

// This host as temp file names carry it: a pid means something only on its own host, and the
// remote tier's directory is shared by every node's worker.
const std::string& ThisHost() {
  static const std::string host = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0) return std::string("unknown-host");
    return SafeNodeName(name);
  }();
  return host;
}

// A temp file another writer may still be writing: one of a live process on this host, or a
// recent one of another host (whose processes cannot be asked). Everything else — the temps
// of a dead worker, stale ones, names of another form — is left over.
constexpr auto kForeignTempAge = std::chrono::minutes(10);

bool IsTempName(std::string_view name) { return name.find(".tmp.") != std::string_view::npos; }

bool TempMayBeLive(const std::string& path, std::string_view name) {
  std::string_view tag = name.substr(name.rfind(".tmp.") + 5);  // "<host>.<pid>"
  size_t dot = tag.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  std::string_view host = tag.substr(0, dot), pid_text = tag.substr(dot + 1);
  int64_t pid = 0;
  if (pid_text.empty() || pid_text.size() > 9) return false;
  for (char c : pid_text) {
    if (c < '0' || c > '9') return false;
    pid = pid * 10 + (c - '0');
  }
  if (pid <= 0) return false;
  if (host == ThisHost()) {
    return pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  const auto modified = std::chrono::system_clock::time_point(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  return std::chrono::system_clock::now() - modified < kForeignTempAge;
}

// The entries of a directory (none when it cannot be read). A directory that changes or
// vanishes while it is listed (another node's Retain) just ends the listing; *err (when
// asked) gets the errno of a listing that failed, 0 otherwise.
std::vector<std::string> NamesIn(FileOps& ops, const std::string& dir, int* err = nullptr) {
  std::vector<std::string> names;
  int rc = ops.ListDir(dir.c_str(), &names);
  if (err != nullptr) *err = rc == 0 ? 0 : errno;
  if (rc != 0) names.clear();
  return names;
}

// A directory of the tree under a tier's directory (<dir>/<job>, its step directories) is
// used only when it is a directory of this user, not a symlink: on a shared file system
// another user could have created the name first. NotFound when absent.
Status CheckTreeDir(FileOps& ops, const std::string& path) {
  struct stat st {};
  if (ops.Lstat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("no checkpoint directory {}", path));
    return Status::FromErrno(err, fmt::format("stat of checkpoint directory {}", path));
  }
  return CheckOwnDirectory(st, path, ::geteuid());
}

// The job's directory and, for step >= 0, the step's: both checked before a file in them
// is opened or listed.
Status CheckTree(FileOps& ops, std::string_view dir, std::string_view job, int64_t step) {
  FT_RETURN_IF_ERROR(CheckTreeDir(ops, JobDir(dir, job)));
  if (step >= 0) FT_RETURN_IF_ERROR(CheckTreeDir(ops, StepDir(dir, job, step)));
  return Status::Ok();
}

// Steps of `job` in `dir` that have a step directory of this user, with its path. NotFound
// when the job has no directory; Corrupt when its directory is not trusted.
Status StepDirs(FileOps& ops, std::string_view dir, std::string_view job,
                std::vector<std::pair<int64_t, std::string>>* out) {
  out->clear();
  FT_RETURN_IF_ERROR(CheckTree(ops, dir, job, -1));
  const std::string job_dir = JobDir(dir, job);
  for (const std::string& name : NamesIn(ops, job_dir)) {
    int64_t step = 0;
    if (!ParseStepDirName(name, &step)) continue;
    std::string path = JoinPath(job_dir, name);
    if (!CheckTreeDir(ops, path).ok()) continue;  // no symlinks, nobody else's
    out->emplace_back(step, std::move(path));
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

bool Exists(FileOps& ops, const std::string& path) {
  struct stat st {};
  return ops.Lstat(path.c_str(), &st) == 0;
}

// A regular file of this user (lstat: a symlink is not one).
bool IsOwnRegularFile(FileOps& ops, const std::string& path) {
  struct stat st {};
  return ops.Lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
}

// An IoError that names the operation, the path and errno's words, whatever errno it is:
// a persist that fails is an I/O failure to its caller even when errno is ENOENT or EINVAL.
Status IoFailure(int err, std::string_view what, std::string_view path) {
  return Status::IoError(fmt::format("{} {}: {}", what, path, std::strerror(err)));
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
  const uint64_t piece = !direct ? kBufferedWriteBytes : bounce ? kBounceBytes : kDirectWriteBytes;
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

const char* TierName(TierKind kind) {
  switch (kind) {
    case TierKind::kLocal: return "local";
    case TierKind::kRemote: return "remote";
  }
  return "unknown";
}

std::string StepDir(std::string_view dir, std::string_view job, int64_t step) {
  return fmt::format("{}/step-{:012}", JobDir(dir, job), step);
}

std::string DataPath(std::string_view dir, std::string_view job, CopyId id) {
  return fmt::format("{}/rank-{:06}.data", StepDir(dir, job, id.step), id.rank);
}

std::string ManifestPath(std::string_view dir, std::string_view job, CopyId id) {
  return fmt::format("{}/rank-{:06}.manifest", StepDir(dir, job, id.step), id.rank);
}

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
  const std::string temp_suffix = fmt::format(".tmp.{}.{}", ThisHost(), ::getpid());
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
                uint64_t dest_capacity) {
  return ReadData(SystemFileOps(), dir, job, m, dest, dest_capacity);
}

Status ReadData(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity) {
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
    const uint64_t want = std::min(kDirectWriteBytes, m.data_bytes - done);
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
    const uint64_t want = std::min(kDirectWriteBytes, len - done);
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

std::vector<CopyId> ListCommitted(std::string_view dir, std::string_view job) {
  std::vector<CopyId> out;
  return ListCommitted(SystemFileOps(), dir, job, &out).ok() ? out : std::vector<CopyId>();
}

Status ListCommitted(FileOps& ops, std::string_view dir, std::string_view job, std::vector<CopyId>* out) {
  std::vector<std::pair<int64_t, std::string>> steps;
  Status s = StepDirs(ops, dir, job, &steps);
  if (s.code() == StatusCode::kNotFound) {
    out->clear();
    return Status::Ok();
  }
  FT_RETURN_IF_ERROR(s);
  std::vector<CopyId> found;
  for (const auto& [step, step_dir] : steps) {
    for (const std::string& name : NamesIn(ops, step_dir)) {
      int rank = -1;
      if (!ParseRankFileName(name, ".manifest", &rank)) continue;
      // Committed: the manifest is in place, and so is the data it describes.
      CopyId id{step, rank};
      if (IsOwnRegularFile(ops, step_dir + "/" + name) && IsOwnRegularFile(ops, DataPath(dir, job, id))) {
        found.push_back(id);
      }
    }
  }
  std::sort(found.begin(), found.end());
  *out = std::move(found);
  return Status::Ok();
}

Status Retain(std::string_view dir, std::string_view job, const RetentionRule& rule, RetentionResult* result) {
  return Retain(SystemFileOps(), dir, job, rule, result);
}

Status Retain(FileOps& ops, std::string_view dir, std::string_view job, const RetentionRule& rule,
              RetentionResult* result) {
  if (rule.keep_steps < 1) {
    return Status::InvalidArgument(
        fmt::format("keeping {} checkpoint steps: at least 1 must be kept", rule.keep_steps));
  }
  RetentionResult out;
  std::vector<CopyId> copies;
  FT_RETURN_IF_ERROR(ListCommitted(ops, dir, job, &copies));
  std::map<int64_t, std::set<int>> ranks_of;
  for (const CopyId& id : copies) ranks_of[id.step].insert(id.rank);
  // Complete: every expected rank has its copy here. Only those count towards keep_steps: a
  // newer step some rank lacks (its node's persist failed, or is still running) must not push
  // out the last step every rank can restore from.
  for (const auto& [step, ranks] : ranks_of) {
    bool complete = !rule.expected_ranks.empty();
    for (int rank : rule.expected_ranks) complete = complete && ranks.contains(rank);
    if (complete) out.complete_steps.push_back(step);
  }
  const size_t keep = static_cast<size_t>(rule.keep_steps);
  if (out.complete_steps.size() >= keep) {
    const int64_t oldest_kept = out.complete_steps[out.complete_steps.size() - keep];
    const std::set<int64_t> also(rule.keep_also.begin(), rule.keep_also.end());
    std::vector<std::pair<int64_t, std::string>> steps;
    FT_RETURN_IF_ERROR(StepDirs(ops, dir, job, &steps));
    for (const auto& [step, step_dir] : steps) {
      if (step >= oldest_kept || also.contains(step)) continue;
      for (int rank : rule.own_ranks) {
        const CopyId id{step, rank};
        const std::string manifest = ManifestPath(dir, job, id), data = DataPath(dir, job, id);
        struct stat st;
        if (ops.Lstat(manifest.c_str(), &st) != 0) continue;  // none of this rank here
        // The manifest names its job: a copy of another job in this job's directory (two jobs
        // whose names were once spelled alike) is never this job's to remove.
        Manifest m;
        Status read = ReadManifest(ops, dir, job, id, &m);
        if (!read.ok()) {
          out.left.push_back(fmt::format("{} (not removed: {})", manifest, read.message()));
          continue;
        }
        if (ops.Unlink(manifest.c_str()) != 0 && errno != ENOENT) {
          return IoFailure(errno, "removing old checkpoint manifest", manifest);
        }
        if (ops.Unlink(data.c_str()) != 0 && errno != ENOENT) {
          return IoFailure(errno, "removing old checkpoint data", data);
        }
        out.removed.push_back(id);
      }
      ops.Rmdir(step_dir.c_str());  // only once every node's worker removed its ranks' copies
    }
  }
  std::sort(out.removed.begin(), out.removed.end());
  if (result != nullptr) *result = std::move(out);
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
          ParseRankFileName(std::string_view(name).substr(0, name.rfind(".tmp.")), ".manifest", &rank)) {
        committing.insert(rank);
      }
    }
    for (const std::string& name : names) {
      const std::string path = step_dir + "/" + name;
      int rank = -1;
      bool drop = false;
      if (IsTempName(name)) {
        drop = !TempMayBeLive(path, name);
      } else if (ParseRankFileName(name, ".data", &rank)) {
        // Data without its manifest: a persist killed between the two renames.
        drop = !present.contains(fmt::format("rank-{:06}.manifest", rank)) && !committing.contains(rank) &&
               !Exists(ops, ManifestPath(dir, job, {step, rank}));
      } else if (ParseRankFileName(name, ".manifest", &rank)) {
        // A manifest without its data describes nothing readable. Asked again before it goes: a
        // listing made while another writer renames its files may show its manifest, renamed
        // last, and miss its data (readdir is no snapshot).
        drop = !present.contains(fmt::format("rank-{:06}.data", rank)) && !Exists(ops, DataPath(dir, job, {step, rank}));
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
