#include "ftworker/monitor/segment_discovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "common/log.h"

namespace ft::worker {

namespace {

// A segment its process never finished making (shm::Segment::Create: shm_open, reserve, then the
// header, its magic first and its state last): too small for a header, a magic never written,
// or a header still initializing. What a process killed in those microseconds leaves behind.
bool NeverFinished(const std::string& path, const struct stat& st, const Status& attached) {
  if (attached.code() == StatusCode::kNotReady) return true;
  if (static_cast<uint64_t>(st.st_size) < uint64_t{shm::kHeaderBytes} + shm::kControlBytes) return true;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  uint64_t magic = 1;
  const bool read = pread(fd, &magic, sizeof(magic), 0) == static_cast<ssize_t>(sizeof(magic));
  close(fd);
  return read && magic == 0;
}

}  // namespace

SegmentDiscovery::SegmentDiscovery(DiscoveryOptions options)
    : options_(std::move(options)),
      owner_uid_(options_.owner_uid >= 0 ? static_cast<uint32_t>(options_.owner_uid) : geteuid()),
      prefix_(shm::SegmentPrefix(options_.job).substr(1)) {
  if (options_.probe == nullptr) options_.probe = SystemProcessProbe();
}

Status SegmentDiscovery::CheckTrust(const std::string& file, const shm::Segment& segment, AttachedSegment* out) {
  if (segment.owner_uid() != owner_uid_) {
    return Status::Corrupt(fmt::format(
        "the file belongs to uid {}, and this worker reads only segments of uid {} (set "
        "FT_SEGMENT_UID when the ranks run as another user than ftworker)",
        segment.owner_uid(), owner_uid_));
  }
  if ((segment.mode() & 022) != 0) {
    return Status::Corrupt(fmt::format(
        "the file is writable by other users (mode {:04o}; libft.so makes it 0600)", segment.mode()));
  }
  int name_rank = -1, name_pid = 0;
  if (!shm::ParseSegmentName(file, &name_rank, &name_pid)) {
    return Status::Corrupt("the name is not ft.<job>.r<rank>.p<pid>");
  }
  const shm::HeaderCopy& h = segment.info();
  if (h.pid != name_pid || h.global_rank != name_rank) {
    return Status::Corrupt(fmt::format("its header claims rank {} pid {}, its name rank {} pid {}",
                                       h.global_rank, h.pid, name_rank, name_pid));
  }
  ProcessClaim claim{h.pid, segment.owner_uid(), h.incarnation, file, segment.inode()};
  Status verified = options_.probe->Verify(claim, &out->process);
  if (verified.code() == StatusCode::kNotFound) {
    out->unverified = std::string(verified.message());  // read, never signalled
    return Status::Ok();
  }
  return verified;
}

std::vector<AttachedSegment> SegmentDiscovery::Scan(uint64_t now_ns, bool force) {
  std::vector<AttachedSegment> out;
  if (!force && scanned_ && now_ns - last_scan_ns_ < options_.scan_interval_ns) return out;
  scanned_ = true;
  last_scan_ns_ = now_ns;

  DIR* dir = opendir(options_.dir.c_str());
  if (dir == nullptr) {
    FT_LOG(Warn, Worker, "cannot list {}: {}; no segment can be found until it can", options_.dir,
           strerror(errno));
    return out;
  }
  std::set<std::string> listed;
  std::vector<std::pair<std::string, uint64_t>> files;
  while (dirent* entry = readdir(dir)) {
    std::string file = entry->d_name;
    if (file.compare(0, prefix_.size(), prefix_) != 0) continue;
    files.emplace_back(file, static_cast<uint64_t>(entry->d_ino));
  }
  closedir(dir);

  for (const auto& [file, dir_inode] : files) {
    listed.insert(file);
    uint64_t inode = dir_inode;
    struct stat st;
    std::string path = options_.dir + "/" + file;
    if (stat(path.c_str(), &st) == 0) inode = static_cast<uint64_t>(st.st_ino);
    auto it = known_.find(file);
    if (it != known_.end() && it->second.inode == inode) {
      Known& k = it->second;
      // An ignored file may be one whose maker was not reaped yet when it was judged.
      if (k.kind == Known::Kind::kInvalid && RemoveIfAbandoned(file, path, Status::Corrupt("ignored before"))) {
        known_.erase(it);
        listed.erase(file);
        continue;
      }
      if (k.kind != Known::Kind::kSettling) continue;  // attached, foreign or ignored: unchanged
    } else {
      if (it != known_.end()) {
        FT_LOG(Info, Worker, "segment {} was replaced (a new process reused the name)", file);
      }
      it = known_.insert_or_assign(file, Known{inode, Known::Kind::kSettling, now_ns}).first;
    }
    Known& k = it->second;
    std::string name = "/" + file;
    std::unique_ptr<shm::Segment> segment;
    Status s = shm::Segment::Attach(name, &segment);
    if (s.ok()) {
      const std::string& job = segment->info().job;
      const std::string& node = segment->info().node;
      bool job_matches = options_.job.size() >= shm::kNameBytes || job == options_.job;
      if (!job_matches || (!options_.node.empty() && node != options_.node)) {
        FT_LOG(Debug, Worker, "segment {} belongs to job '{}' node '{}', not to this worker", file, job, node);
        k.kind = Known::Kind::kForeign;
        continue;
      }
      AttachedSegment attached;
      Status trusted = CheckTrust(file, *segment, &attached);
      if (!trusted.ok()) {
        k.kind = Known::Kind::kInvalid;
        FT_LOG(Warn, Worker,
               "segment {}/{} ignored: {}. Its rank is not monitored. If no process of job '{}' "
               "made it, remove the file and find out who did",
               options_.dir, file, trusted.message(), options_.job);
        continue;
      }
      k.kind = Known::Kind::kAttached;
      attached.segment = std::move(segment);
      attached.inode = inode;
      out.push_back(std::move(attached));
      continue;
    }
    if (s.code() == StatusCode::kNotFound) {
      known_.erase(it);  // gone between listing and opening
      listed.erase(file);
      continue;
    }
    if (now_ns - k.first_seen_ns < options_.settle_ns) continue;  // being created, perhaps
    if (RemoveIfAbandoned(file, path, s)) {
      known_.erase(it);
      listed.erase(file);
      continue;
    }
    if (s.code() == StatusCode::kNotReady) {
      // Looked at again at every scan: attached as soon as its process finishes the header.
      if (!k.logged) {
        FT_LOG(Warn, Worker,
               "segment {}/{} not monitored yet: still being initialized after {:.0f} s. If no "
               "process of job '{}' owns it, remove the file",
               options_.dir, file, static_cast<double>(now_ns - k.first_seen_ns) / 1e9, options_.job);
        k.logged = true;
      }
      continue;
    }
    k.kind = Known::Kind::kInvalid;
    if (s.code() == StatusCode::kUnsupported) {
      FT_LOG(Warn, Worker, "segment {}/{} ignored: {}", options_.dir, file, s.message());
    } else {
      FT_LOG(Warn, Worker,
             "segment {}/{} ignored: not a valid ft segment ({}). Its rank is not monitored. If "
             "no process of job '{}' owns it, remove the file; if one does, its libft.so is "
             "broken or another program wrote into the file",
             options_.dir, file, s.ToString(), options_.job);
    }
  }
  // Forget files that are gone: a name that comes back is a new file.
  for (auto it = known_.begin(); it != known_.end();) {
    it = listed.count(it->first) == 0 ? known_.erase(it) : std::next(it);
  }
  return out;
}

bool SegmentDiscovery::RemoveIfAbandoned(const std::string& file, const std::string& path, const Status& attached) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || st.st_uid != owner_uid_ || !NeverFinished(path, st, attached)) return false;
  int rank = -1, pid = 0;
  // Only a creator that is gone: a live one (even one this worker cannot see, in another pid
  // namespace) finishes its segment within microseconds, long before settle_ns.
  if (!shm::ParseSegmentName(file, &rank, &pid) || options_.probe->PidExists(pid)) return false;
  if (shm_unlink(("/" + file).c_str()) != 0 && errno != ENOENT) return false;
  FT_LOG(Info, Worker, "removed segment {} that process {} (rank {}) never finished making: it is gone (killed "
         "while libft.so made it)", path, pid, rank);
  return true;
}

Status SegmentDiscovery::Reclaim(const std::string& name, uint64_t inode) {
  std::string file = name.size() > 0 && name[0] == '/' ? name.substr(1) : name;
  std::string path = options_.dir + "/" + file;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FromErrno(errno, "stat " + path);
  }
  if (inode != 0 && static_cast<uint64_t>(st.st_ino) != inode) {
    return Status::Ok();  // a new process owns the name now
  }
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    return Status::FromErrno(errno, "shm_unlink " + name);
  }
  FT_LOG(Info, Worker, "reclaimed segment {} of a process that is gone", path);
  return Status::Ok();
}

size_t SegmentDiscovery::ignored() const {
  size_t n = 0;
  for (const auto& [file, k] : known_) n += k.kind == Known::Kind::kInvalid ? 1 : 0;
  return n;
}

}  // namespace ft::worker
