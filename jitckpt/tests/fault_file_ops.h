// FaultFileOps: the real system calls on a real directory, plus a power cut (LevelDB's
// FaultInjectionTestEnv, db/fault_injection_test.cc). It remembers what a crash of the machine
// could still take away and, on DropUnsynced(), takes it away:
//   - a file's bytes beyond what its last fsync covered (a file never fsynced loses them all);
//   - a new directory entry — a file created, a directory made, a rename's new name — until
//     its directory is fsynced: undone newest first (a rename goes back to its old name, and a
//     file it replaced comes back).
// Removals (unlink, rmdir) are taken as durable at once: the tiers never need one undone to
// stay consistent, and a removal that comes back only leaves an older copy behind.
// CutPowerAfter(n) lets n more mutating calls through; from then on every mutating call fails
// with EIO and does nothing, as on a machine that lost its power mid-persist. Reads still work.
// Single-threaded, like the tiers' writer.
#ifndef FT_JITCKPT_TESTS_FAULT_FILE_OPS_H_
#define FT_JITCKPT_TESTS_FAULT_FILE_OPS_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "jitckpt/file_ops.h"

namespace ft::ckpt::testing {

class FaultFileOps : public FileOps {
 public:
  // n more mutating calls succeed; -1: never cut.
  void CutPowerAfter(int n) { budget_ = n; }
  bool power_cut() const { return budget_ == 0; }
  int mutations() const { return mutations_; }

  int Open(const char* path, int flags, mode_t mode) override {
    const bool creates = (flags & O_CREAT) != 0;
    bool existed = true;
    if (creates) {
      if (!Spend()) return Fail();
      struct stat st;
      existed = ::lstat(path, &st) == 0;
    }
    int fd = FileOps::Open(path, flags, mode);
    if (fd < 0) return fd;
    fd_path_[fd] = path;
    if ((flags & O_DIRECTORY) != 0) fd_dir_[fd] = true;
    if (creates && !existed) {
      Record(Op{Op::kCreate, path, "", ""});
      synced_bytes_[path] = 0;
    }
    return fd;
  }
  ssize_t Write(int fd, const void* data, size_t bytes) override {
    if (!Spend()) return Fail();
    return FileOps::Write(fd, data, bytes);
  }
  int Reserve(int fd, uint64_t bytes) override {
    if (!Spend()) return Fail();
    return FileOps::Reserve(fd, bytes);
  }
  int Fsync(int fd) override {
    if (!Spend()) return Fail();
    int rc = FileOps::Fsync(fd);
    if (rc != 0) return rc;
    const std::string& path = fd_path_[fd];
    if (fd_dir_.contains(fd)) {
      // Every entry of this directory is durable now.
      std::erase_if(ops_, [&](const Op& op) { return Parent(op.path) == path; });
    } else if (synced_bytes_.contains(path)) {
      struct stat st;
      if (::fstat(fd, &st) == 0) synced_bytes_[path] = static_cast<uint64_t>(st.st_size);
    }
    return 0;
  }
  int Close(int fd) override {
    fd_path_.erase(fd);
    fd_dir_.erase(fd);
    return FileOps::Close(fd);
  }
  int Rename(const char* from, const char* to) override {
    if (!Spend()) return Fail();
    std::string backup;
    struct stat st;
    if (::lstat(to, &st) == 0 && S_ISREG(st.st_mode)) {
      backup = std::string(to) + ".fault-backup." + std::to_string(++backups_);
      if (::link(to, backup.c_str()) != 0) backup.clear();
    }
    int rc = FileOps::Rename(from, to);
    if (rc != 0) {
      if (!backup.empty()) ::unlink(backup.c_str());
      return rc;
    }
    Record(Op{Op::kRename, to, from, backup});
    MoveSynced(from, to);
    return 0;
  }
  int Unlink(const char* path) override {
    if (!Spend()) return Fail();
    int rc = FileOps::Unlink(path);
    if (rc == 0) synced_bytes_.erase(path);
    return rc;
  }
  int Mkdir(const char* path, mode_t mode) override {
    if (!Spend()) return Fail();
    int rc = FileOps::Mkdir(path, mode);
    if (rc == 0) Record(Op{Op::kMkdir, path, "", ""});
    return rc;
  }
  int Rmdir(const char* path) override {
    if (!Spend()) return Fail();
    return FileOps::Rmdir(path);
  }

  // The crash: what was never made durable goes, then the power comes back.
  void DropUnsynced() {
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      std::error_code ec;
      switch (it->kind) {
        case Op::kRename:
          if (::rename(it->path.c_str(), it->from.c_str()) == 0) MoveSynced(it->path, it->from);
          if (!it->backup.empty()) ::rename(it->backup.c_str(), it->path.c_str());
          break;
        case Op::kCreate:
          ::unlink(it->path.c_str());
          synced_bytes_.erase(it->path);
          break;
        case Op::kMkdir:
          std::filesystem::remove_all(it->path, ec);
          break;
      }
    }
    for (const auto& [path, bytes] : synced_bytes_) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > bytes) {
        ::truncate(path.c_str(), static_cast<off_t>(bytes));
      }
    }
    ops_.clear();
    synced_bytes_.clear();
    budget_ = -1;
  }

 private:
  struct Op {
    enum Kind { kCreate, kRename, kMkdir } kind;
    std::string path;    // the new entry
    std::string from;    // kRename: its old name
    std::string backup;  // kRename: a link to the file it replaced, if any
  };

  static std::string Parent(const std::string& path) { return std::filesystem::path(path).parent_path().native(); }
  bool Spend() {
    if (budget_ == 0) return false;
    if (budget_ > 0) --budget_;
    ++mutations_;
    return true;
  }
  static int Fail() {
    errno = EIO;
    return -1;
  }
  void Record(Op op) { ops_.push_back(std::move(op)); }
  void MoveSynced(const std::string& from, const std::string& to) {
    auto it = synced_bytes_.find(from);
    if (it == synced_bytes_.end()) {
      synced_bytes_.erase(to);  // a file that existed before the test: durable as it is
      return;
    }
    synced_bytes_[to] = it->second;
    synced_bytes_.erase(from);
  }

  int budget_ = -1;
  int mutations_ = 0;
  int backups_ = 0;
  std::vector<Op> ops_;                          // unsynced new entries, oldest first
  std::map<std::string, uint64_t> synced_bytes_; // files created here: bytes their last fsync held
  std::map<int, std::string> fd_path_;
  std::map<int, bool> fd_dir_;
};

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_FAULT_FILE_OPS_H_
