#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "common/job_name.h"
#include "shm/records.h"

namespace ft::shm {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t RoundUp(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

void CopyName(char (&dst)[kNameBytes], std::string_view src) {
  size_t n = std::min(src.size(), kNameBytes - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// The one job-name rule (common/job_name.h): no '.', at most 48 characters.
std::string SafeJob(std::string_view job) { return JobToken(job); }

uint64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Closes a descriptor on every return path.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

std::string Bounded(const char (&field)[kNameBytes]) { return std::string(field, strnlen(field, kNameBytes)); }

// From the reader's private copy of the header, never from the mapping.
HeaderCopy CopyOf(const SegmentHeader& h) {
  return HeaderCopy{.layout_version = h.layout_version, .segment_bytes = h.segment_bytes,
                    .control_offset = h.control_offset, .comm_table_offset = h.comm_table_offset,
                    .comm_slot_count = h.comm_slot_count, .ring_offset = h.ring_offset,
                    .ring_capacity = h.ring_capacity, .global_rank = h.global_rank,
                    .local_rank = h.local_rank, .world_size = h.world_size, .pid = h.pid,
                    .incarnation = h.incarnation, .created_unix_ns = h.created_unix_ns,
                    .record_version = RecordVersionOf(h), .job = Bounded(h.job),
                    .node = Bounded(h.node), .host = Bounded(h.host)};
}

}  // namespace

std::string SegmentPrefix(std::string_view job) { return "/ft." + SafeJob(job) + "."; }

std::string SegmentName(std::string_view job, int rank, int pid) {
  std::string rank_text = rank >= 0 ? std::to_string(rank) : "x";
  return SegmentPrefix(job) + "r" + rank_text + ".p" + std::to_string(pid);
}

bool ParseSegmentName(std::string_view name, int* rank, int* pid) {
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (!name.starts_with("ft.")) return false;
  // The job holds no '.' (SafeJob), so the last two dots separate rank and pid.
  size_t p_dot = name.rfind('.');
  if (p_dot == std::string_view::npos || p_dot < 3) return false;
  size_t r_dot = name.rfind('.', p_dot - 1);
  if (r_dot == std::string_view::npos || r_dot < 3) return false;
  std::string_view rank_text = name.substr(r_dot + 1, p_dot - r_dot - 1);
  std::string_view pid_text = name.substr(p_dot + 1);
  if (rank_text.size() < 2 || rank_text[0] != 'r' || pid_text.size() < 2 || pid_text[0] != 'p') return false;
  auto number = [](std::string_view text, int* out) {
    if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return false;
    int64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    if (value > INT32_MAX) return false;
    *out = static_cast<int>(value);
    return true;
  };
  int parsed_rank = -1, parsed_pid = 0;
  if (rank_text != "rx" && !number(rank_text.substr(1), &parsed_rank)) return false;
  if (!number(pid_text.substr(1), &parsed_pid) || parsed_pid <= 0) return false;
  *rank = parsed_rank;
  *pid = parsed_pid;
  return true;
}

uint64_t SegmentBytes(const SegmentOptions& options) {
  uint64_t ring_offset =
      RoundUp(kHeaderBytes + kControlBytes + uint64_t{options.comm_slots} * kCommSlotBytes, kPage);
  return RoundUp(ring_offset + uint64_t{options.ring_capacity} * kRecordBytes, kPage);
}

std::string GpuBusIdOf(const SegmentHeader& header) {
  if (header.gpu_bus_id_ready.load(std::memory_order_acquire) != 1) return {};
  char id[sizeof(header.gpu_bus_id)];
  std::memcpy(id, header.gpu_bus_id, sizeof(id));
  const size_t n = strnlen(id, sizeof(id));
  if (n == 0 || n == sizeof(id)) return {};
  for (size_t i = 0; i < n; ++i) {
    const char c = id[i];
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return {};
  }
  return std::string(id, n);
}

Status ValidateHeader(const void* bytes, uint64_t size, HeaderCopy* copy) {
  if (size < kHeaderBytes) {
    return Status::Corrupt("segment is " + std::to_string(size) + " bytes, smaller than its " +
                           std::to_string(kHeaderBytes) + "-byte header");
  }
  SegmentHeader h;
  std::memcpy(static_cast<void*>(&h), bytes, kHeaderBytes);  // a private copy: the producer may be writing
  if (h.magic != kMagic) return Status::Corrupt("bad magic: not an ft segment");
  if (h.layout_version < kOldestReadableLayoutVersion || h.layout_version > kLayoutVersion) {
    return Status::Unsupported("segment layout version " + std::to_string(h.layout_version) +
                               ", this reader understands " + std::to_string(kOldestReadableLayoutVersion) +
                               " to " + std::to_string(kLayoutVersion) +
                               ": run an ftworker of the same ft release as libft.so, or a newer one");
  }
  if (h.record_version > kRecordVersion) {
    return Status::Unsupported(
        "segment record format version " + std::to_string(h.record_version) +
        ", this reader understands up to " + std::to_string(kRecordVersion) +
        ": run an ftworker built with the same ft release as libft.so, or a newer one");
  }
  if (h.header_bytes != kHeaderBytes || h.record_bytes != kRecordBytes ||
      h.comm_slot_bytes != kCommSlotBytes) {
    return Status::Corrupt("header, record or slot size does not match layout version " +
                           std::to_string(h.layout_version));
  }
  if (h.segment_bytes != size) {
    return Status::Corrupt("header says " + std::to_string(h.segment_bytes) +
                           " bytes, the segment has " + std::to_string(size));
  }
  if (h.control_offset != kHeaderBytes) return Status::Corrupt("control page is not at 4096");
  if (h.ring_capacity == 0 || (h.ring_capacity & (h.ring_capacity - 1)) != 0) {
    return Status::Corrupt("ring capacity " + std::to_string(h.ring_capacity) + " is not a power of two");
  }
  uint64_t table_end = uint64_t{h.comm_table_offset} + uint64_t{h.comm_slot_count} * kCommSlotBytes;
  uint64_t ring_end = h.ring_offset + uint64_t{h.ring_capacity} * kRecordBytes;
  if (h.comm_table_offset < kHeaderBytes + kControlBytes || table_end > h.ring_offset ||
      h.ring_offset % 64 != 0 || h.comm_table_offset % 64 != 0 || ring_end > size ||
      ring_end < h.ring_offset) {
    return Status::Corrupt("comm table or ring lies outside the segment or overlaps");
  }
  uint32_t state = reinterpret_cast<const SegmentHeader*>(bytes)->state.load(std::memory_order_acquire);
  if (state > static_cast<uint32_t>(ProcessState::kDisabled)) {
    return Status::Corrupt("unknown process state " + std::to_string(state));
  }
  if (copy != nullptr) *copy = CopyOf(h);
  return Status::Ok();
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, size_);
}

Status Segment::Create(std::string_view name, const Identity& identity, int pid,
                       const SegmentOptions& options, std::unique_ptr<Segment>* out) {
  if (options.ring_capacity == 0 || (options.ring_capacity & (options.ring_capacity - 1)) != 0) {
    return Status::InvalidArgument("ring capacity must be a power of two");
  }
  std::string segment_name(name);
  uint64_t size = SegmentBytes(options);
  int fd = shm_open(segment_name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "shm_open " + segment_name);
  FdCloser closer{fd};
  auto fail = [&](int err, const char* what) {
    shm_unlink(segment_name.c_str());
    return Status::FromErrno(err, std::string(what) + " " + segment_name);
  };
  // umask may have widened nothing, but make the mode explicit: only the owner reads it.
  if (fchmod(fd, 0600) != 0) return fail(errno, "fchmod");
  // tmpfs allocates lazily: reserve now, so a full /dev/shm is an error here, not a SIGBUS.
  int err = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err != 0) return fail(err, "posix_fallocate");
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(errno, "mmap");

  auto* h = static_cast<SegmentHeader*>(base);
  h->magic = kMagic;
  h->layout_version = kLayoutVersion;
  h->header_bytes = kHeaderBytes;
  h->segment_bytes = size;
  h->control_offset = kHeaderBytes;
  h->comm_table_offset = kHeaderBytes + kControlBytes;
  h->comm_slot_count = options.comm_slots;
  h->comm_slot_bytes = kCommSlotBytes;
  h->ring_offset = RoundUp(h->comm_table_offset + uint64_t{options.comm_slots} * kCommSlotBytes, kPage);
  h->ring_capacity = options.ring_capacity;
  h->record_bytes = kRecordBytes;
  h->record_version = kRecordVersion;
  h->global_rank = identity.global_rank;
  h->local_rank = identity.local_rank;
  h->world_size = identity.world_size;
  h->pid = pid;
  h->incarnation = RealtimeNs();
  h->created_unix_ns = h->incarnation;
  CopyName(h->job, identity.job);
  CopyName(h->node, identity.node);
  CopyName(h->host, identity.host);
  h->state.store(static_cast<uint32_t>(ProcessState::kRunning), std::memory_order_release);

  struct stat st;
  bool have_stat = fstat(fd, &st) == 0;
  out->reset(new Segment(segment_name, static_cast<uint8_t*>(base), size, /*writable=*/true, CopyOf(*h)));
  if (have_stat) {
    (*out)->owner_uid_ = st.st_uid;
    (*out)->mode_ = st.st_mode & 07777;
    (*out)->inode_ = st.st_ino;
  }
  return Status::Ok();
}

Status Segment::Attach(std::string_view name, std::unique_ptr<Segment>* out) {
  std::string segment_name(name);
  int fd = shm_open(segment_name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "shm_open " + segment_name);
  FdCloser closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::FromErrno(errno, "fstat " + segment_name);
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes + kControlBytes) {
    return Status::Corrupt(segment_name + " is " + std::to_string(size) + " bytes, too small for a segment");
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::FromErrno(errno, "mmap " + segment_name);
  HeaderCopy info;
  Status valid = ValidateHeader(base, size, &info);
  if (valid.ok() &&
      static_cast<const SegmentHeader*>(base)->state.load(std::memory_order_acquire) ==
          static_cast<uint32_t>(ProcessState::kInitializing)) {
    valid = Status::NotReady(segment_name + " is still being initialized");
  }
  if (!valid.ok()) {
    munmap(base, size);
    return valid.WithContext(segment_name);
  }
  // The control page is the one part a reader writes (ring cursor, commands).
  void* control = mmap(static_cast<uint8_t*>(base) + kHeaderBytes, kControlBytes,
                       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, kHeaderBytes);
  if (control == MAP_FAILED) {
    int err = errno;
    munmap(base, size);
    return Status::FromErrno(err, "mmap control page of " + segment_name);
  }
  out->reset(new Segment(segment_name, static_cast<uint8_t*>(base), size, /*writable=*/false, std::move(info)));
  (*out)->owner_uid_ = st.st_uid;
  (*out)->mode_ = st.st_mode & 07777;
  (*out)->inode_ = st.st_ino;
  return Status::Ok();
}

Status Segment::Remove() {
  if (shm_unlink(name_.c_str()) != 0) return Status::FromErrno(errno, "shm_unlink " + name_);
  return Status::Ok();
}

}  // namespace ft::shm
