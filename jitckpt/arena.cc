// The arena file (docs/checkpoints.md, "Host arena"). The header's static fields are written
// once, before the file gets its name (temp file + rename), so a reader never sees a
// half-initialized arena; the commit words (which slot is committed; per slot its sequence,
// manifest length and commit time) are the seqlocks of arena.h, accessed only with atomics.
#include "jitckpt/arena.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "jitckpt/arena_space.h"
#include "jitckpt/populate.h"
#include "jitckpt/safe_name.h"

// The commit protocol is a seqlock over bulk bytes (gigabytes; they cannot be atomics), so
// it needs fences; ThreadSanitizer does not model fences and GCC warns about them under
// -fsanitize=thread. Readers verify chunk checksums besides, so a torn read never passes.
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif

namespace ft::ckpt {
namespace {

constexpr uint32_t kHeaderBytes = 4096;

constexpr uint32_t kNoSlot = 0xffffffffu;

// One slot's commit word, on its own cache line (the writer updates one slot while readers
// poll the other).
struct SlotWord {
  uint64_t sequence;           // odd while a write into the slot is in progress
  uint64_t manifest_bytes;     // length of the slot's manifest once committed
  uint64_t committed_unix_ns;
  uint64_t reserved[5];
};
static_assert(sizeof(SlotWord) == 64);

struct ArenaHeader {
  // Static: written before the file is published, never changed after.
  uint64_t magic;              // 0   kArenaMagic
  uint32_t version;            // 8   kArenaVersion
  uint32_t header_bytes;       // 12  4096
  uint64_t manifest_capacity;  // 16  per slot
  uint64_t data_offset;        // 24  AlignUp(4096 + slots * manifest_capacity, 2 MiB)
  uint64_t data_capacity;      // 32  per slot, a multiple of 2 MiB
  uint64_t file_bytes;         // 40  data_offset + slots * data_capacity
  uint32_t owner_uid;          // 48
  uint32_t writer_pid;         // 52  the last process that opened it for writing
  uint64_t created_unix_ns;    // 56
  uint32_t slot_count;         // 64  1 or 2
  uint32_t reserved0;          // 68
  uint64_t reserved1[7];       // 72
  // The committed slot, on its own cache line.
  uint32_t committed_slot;     // 128 kNoSlot when the arena holds no copy
  uint32_t reserved2[15];      // 132
  SlotWord slots[kArenaMaxSlots];  // 192, 256
};
static_assert(offsetof(ArenaHeader, owner_uid) == 48);
static_assert(offsetof(ArenaHeader, slot_count) == 64);
static_assert(offsetof(ArenaHeader, committed_slot) == 128);
static_assert(offsetof(ArenaHeader, slots) == 192);
static_assert(sizeof(ArenaHeader) == 320);

struct Geometry {
  int slots = 0;
  uint64_t manifest_capacity = 0;
  uint64_t data_offset = 0;
  uint64_t data_capacity = 0;
  uint64_t file_bytes = 0;
};

uint64_t AlignUp(uint64_t value, uint64_t align) { return (value + align - 1) / align * align; }

// The geometry for these sizes, or false on overflow or a slot count other than 1 or 2.
bool GeometryFor(int slots, uint64_t manifest_capacity, uint64_t data_bytes, Geometry* g) {
  constexpr uint64_t kLimit = 1ull << 56;  // far beyond any host, far from overflow
  if (slots < 1 || slots > kArenaMaxSlots) return false;
  if (manifest_capacity == 0 || manifest_capacity > kLimit || data_bytes > kLimit) return false;
  const auto n = static_cast<uint64_t>(slots);
  g->slots = slots;
  g->manifest_capacity = manifest_capacity;
  g->data_offset = AlignUp(kHeaderBytes + n * manifest_capacity, kArenaDataAlign);
  g->data_capacity = AlignUp(data_bytes, kArenaDataAlign);
  g->file_bytes = g->data_offset + n * g->data_capacity;
  return true;
}

uint64_t NowUnixNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

ArenaHeader* HeaderOf(uint8_t* base) { return reinterpret_cast<ArenaHeader*>(base); }

// The commit words, read and written only through these (other processes read them).
uint64_t LoadSequence(const ArenaHeader* h, int slot, int order = __ATOMIC_ACQUIRE) {
  return __atomic_load_n(&h->slots[slot].sequence, order);
}
void StoreSequence(ArenaHeader* h, int slot, uint64_t value, int order) {
  __atomic_store_n(&h->slots[slot].sequence, value, order);
}
uint32_t LoadCommittedSlot(const ArenaHeader* h) { return __atomic_load_n(&h->committed_slot, __ATOMIC_ACQUIRE); }
void StoreCommittedSlot(ArenaHeader* h, uint32_t slot) {
  __atomic_store_n(&h->committed_slot, slot, __ATOMIC_RELEASE);
}

// A reader's name for a committed copy: the slot's (even) sequence and the slot.
uint64_t GenerationOf(uint64_t sequence, int slot) { return sequence << 1 | static_cast<uint64_t>(slot); }
uint64_t SequenceOf(uint64_t generation) { return generation >> 1; }

// Checks the static fields of a header read from a file of `file_size` bytes owned by
// `file_uid`; fills the geometry on success.
Status ValidateHeader(const ArenaHeader& h, uint64_t file_size, uid_t file_uid, Geometry* g) {
  if (h.magic != kArenaMagic) return Status::Corrupt("not a checkpoint arena (bad magic)");
  if (h.version != kArenaVersion) {
    return Status::Unsupported(fmt::format("arena version {} is {} than this build's {}; {}", h.version,
                                           h.version > kArenaVersion ? "newer" : "older", kArenaVersion,
                                           h.version > kArenaVersion ? "upgrade ft" : "it is ignored"));
  }
  if (h.header_bytes != kHeaderBytes) return Status::Corrupt(fmt::format("header of {} bytes", h.header_bytes));
  Geometry expected;
  uint64_t data_bytes = h.data_capacity;
  if (h.slot_count < 1 || h.slot_count > kArenaMaxSlots) {
    return Status::Corrupt(fmt::format("{} slots (1 or 2 expected)", h.slot_count));
  }
  if (!GeometryFor(static_cast<int>(h.slot_count), h.manifest_capacity, data_bytes, &expected) ||
      expected.data_offset != h.data_offset ||
      expected.data_capacity != h.data_capacity || expected.file_bytes != h.file_bytes) {
    return Status::Corrupt(fmt::format("inconsistent geometry ({} slots of {} manifest bytes and {} data bytes, "
                                       "data at {}, {} in all)",
                                       h.slot_count, h.manifest_capacity, h.data_capacity, h.data_offset,
                                       h.file_bytes));
  }
  if (file_size != h.file_bytes) {
    return Status::Corrupt(fmt::format("file of {} bytes, its header says {}", file_size, h.file_bytes));
  }
  if (h.owner_uid != file_uid) {
    return Status::Corrupt(fmt::format("header names owner uid {}, the file's is {}", h.owner_uid, file_uid));
  }
  *g = expected;
  return Status::Ok();
}

// Removes temp files a writer of `path` left behind when it died between create and rename.
void RemoveStaleTemps(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = arena_space::DirOf(path);
  std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    if (name.starts_with(prefix)) unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

}  // namespace

Arena::~Arena() {
  if (base_ != nullptr) munmap(base_, mapped_);
  if (reserve_fd_ >= 0) close(reserve_fd_);
}

Arena::Arena(Arena&& other) noexcept { *this = std::move(other); }

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, mapped_);
    if (reserve_fd_ >= 0) close(reserve_fd_);
    path_ = std::move(other.path_);
    reserve_fd_ = std::exchange(other.reserve_fd_, -1);
    reserved_mask_ = std::exchange(other.reserved_mask_, 0);
    prepared_mask_ = std::exchange(other.prepared_mask_, 0);
    created_ = std::exchange(other.created_, false);
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    writable_ = std::exchange(other.writable_, false);
    writing_slot_ = std::exchange(other.writing_slot_, -1);
    slots_ = std::exchange(other.slots_, 0);
    manifest_capacity_ = std::exchange(other.manifest_capacity_, 0);
    data_offset_ = std::exchange(other.data_offset_, 0);
    data_capacity_ = std::exchange(other.data_capacity_, 0);
  }
  return *this;
}

Status Arena::OpenForWrite(std::string_view arena_dir, std::string_view job, int rank,
                           uint64_t manifest_capacity, uint64_t data_bytes, int slots, Arena* out, ArenaPrep prep) {
  if (rank < 0) return Status::InvalidArgument(fmt::format("host arena for rank {}: no such rank", rank));
  return OpenForWriteAt(PathFor(arena_dir, job, rank), manifest_capacity, data_bytes, slots, out, prep);
}

Status Arena::OpenForWriteAt(const std::string& path, uint64_t manifest_capacity, uint64_t data_bytes,
                             int slots, Arena* out, ArenaPrep prep) {
  Geometry g;
  if (!GeometryFor(slots, manifest_capacity, data_bytes, &g)) {
    return Status::InvalidArgument(fmt::format(
        "host arena of {} slot(s) of {} manifest bytes and {} data bytes: out of range", slots,
        manifest_capacity, data_bytes));
  }
  const std::string dir = arena_space::DirOf(path);
  const uid_t uid = geteuid();
  // Deferred: the header and manifests now, the data regions by PrepareData.
  const bool deferred = prep == ArenaPrep::kByWriter;
  const uint64_t reserve_now = deferred ? g.data_offset : g.file_bytes;

  // An arena of exactly this geometry keeps its committed copy: a restarted rank restores it.
  // O_NONBLOCK: a FIFO planted under the name must not hang the open (it is then refused).
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    struct stat st {};
    ArenaHeader h {};
    Geometry found;
    bool reusable = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid &&
                    pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)) &&
                    ValidateHeader(h, static_cast<uint64_t>(st.st_size), st.st_uid, &found).ok() &&
                    found.slots == g.slots && found.manifest_capacity == g.manifest_capacity &&
                    found.data_capacity == g.data_capacity;
    if (reusable) {
      if ((st.st_mode & 07777) != 0600) fchmod(fd, 0600);
      uint8_t* base = nullptr;
      Status s = arena_space::Reserve(fd, dir, path, g.file_bytes, reserve_now);
      if (s.ok()) s = arena_space::MapWritable(fd, path, g.file_bytes, g.data_offset, &base);
      if (!s.ok() || !deferred) close(fd);
      FT_RETURN_IF_ERROR(s);
      if (!deferred) PopulateForWrite(base, g.file_bytes);
      ArenaHeader* live = HeaderOf(base);
      const uint32_t committed = LoadCommittedSlot(live);
      if (committed != kNoSlot && committed >= static_cast<uint32_t>(g.slots)) StoreCommittedSlot(live, kNoSlot);
      for (int slot = 0; slot < g.slots; ++slot) {
        const uint64_t seq = LoadSequence(live, slot);
        if (seq % 2 == 0) continue;
        // The previous writer died inside a save: that slot holds no copy. With two slots it
        // is the other one than the committed copy's, which stays.
        if (LoadCommittedSlot(live) == static_cast<uint32_t>(slot)) StoreCommittedSlot(live, kNoSlot);
        __atomic_store_n(&live->slots[slot].manifest_bytes, uint64_t{0}, __ATOMIC_RELAXED);
        StoreSequence(live, slot, seq + 1, __ATOMIC_RELEASE);
      }
      live->writer_pid = static_cast<uint32_t>(getpid());
      *out = Arena(path, base, true, g.file_bytes, g.slots, g.manifest_capacity, g.data_offset, g.data_capacity);
      out->SetPrepared(deferred ? fd : -1);
      return Status::Ok();
    }
    close(fd);
    // Any other file under that name is reset: unlinked, never truncated, so a reader that
    // still maps it keeps valid pages (and its copy) until it lets go.
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno(errno, fmt::format("removing the outdated host arena {}", path));
    }
  } else if (errno != ENOENT) {
    return Status::FromErrno(errno, fmt::format("opening host arena {}", path));
  }

  RemoveStaleTemps(path);
  const std::string temp = fmt::format("{}.tmp.{}", path, getpid());
  fd = open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("creating host arena {}", temp));
  auto fail = [&](Status s, uint8_t* base) {
    if (base != nullptr) munmap(base, g.file_bytes);
    if (fd >= 0) close(fd);
    unlink(temp.c_str());
    return s;
  };
  if (fchmod(fd, 0600) != 0) return fail(Status::FromErrno(errno, fmt::format("chmod {}", temp)), nullptr);
  Status s = arena_space::Reserve(fd, dir, path, g.file_bytes, reserve_now);
  if (!s.ok()) return fail(s, nullptr);
  uint8_t* base = nullptr;
  s = arena_space::MapWritable(fd, temp, g.file_bytes, g.data_offset, &base);
  if (!s.ok()) return fail(s, nullptr);
  // The pages are mapped now, at open, so a save runs at copy bandwidth (deferred: PrepareData).
  if (!deferred) PopulateForWrite(base, g.file_bytes);
  ArenaHeader* h = HeaderOf(base);
  h->magic = kArenaMagic;
  h->version = kArenaVersion;
  h->header_bytes = kHeaderBytes;
  h->manifest_capacity = g.manifest_capacity;
  h->data_offset = g.data_offset;
  h->data_capacity = g.data_capacity;
  h->file_bytes = g.file_bytes;
  h->owner_uid = static_cast<uint32_t>(uid);
  h->writer_pid = static_cast<uint32_t>(getpid());
  h->created_unix_ns = NowUnixNs();
  h->slot_count = static_cast<uint32_t>(g.slots);
  h->committed_slot = kNoSlot;  // the slot words are zero: sequence 0, nothing written
  if (rename(temp.c_str(), path.c_str()) != 0) {
    return fail(Status::FromErrno(errno, fmt::format("renaming {} to {}", temp, path)), base);
  }
  if (!deferred) close(fd);
  *out = Arena(path, base, true, g.file_bytes, g.slots, g.manifest_capacity, g.data_offset, g.data_capacity);
  out->SetPrepared(deferred ? fd : -1);
  out->created_ = true;
  return Status::Ok();
}

int Arena::committed_slot() const {
  Manifest m;
  uint64_t generation = 0;
  return ReadCommitted(&m, &generation).ok() ? SlotOf(generation) : -1;
}

Status Arena::OpenForRead(const std::string& path, Arena* out) {
  // O_NONBLOCK: opening a FIFO planted under the name would otherwise wait for a writer
  // forever; it is refused below as not a regular file.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("opening host arena {}", path));
  auto fail = [&](const Status& s) {
    close(fd);
    return s.WithContext(fmt::format("host arena {}", path));
  };
  struct stat st {};
  if (fstat(fd, &st) != 0) return fail(Status::FromErrno(errno, "fstat"));
  if (!S_ISREG(st.st_mode)) return fail(Status::Corrupt("not a regular file"));
  if (st.st_uid != geteuid()) {
    return fail(Status::Corrupt(fmt::format("owned by uid {}, not by this user (uid {}): not trusted", st.st_uid,
                                            geteuid())));
  }
  if (static_cast<uint64_t>(st.st_size) < kHeaderBytes) {
    return fail(Status::Corrupt(fmt::format("{} bytes, shorter than an arena header", st.st_size)));
  }
  ArenaHeader h {};
  if (pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) {
    return fail(Status::Corrupt("header unreadable"));
  }
  Geometry g;
  Status valid = ValidateHeader(h, static_cast<uint64_t>(st.st_size), st.st_uid, &g);
  if (!valid.ok()) return fail(valid);
  void* p = mmap(nullptr, g.file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(Status::FromErrno(errno, "mmap"));
  close(fd);
  *out = Arena(path, static_cast<uint8_t*>(p), false, g.file_bytes, g.slots, g.manifest_capacity, g.data_offset,
               g.data_capacity);
  return Status::Ok();
}

uint8_t* Arena::BeginWrite() {
  if (!writable_ || base_ == nullptr) return nullptr;
  if (writing_slot_ >= 0) return write_data();  // already writing
  ArenaHeader* h = HeaderOf(base_);
  // Two slots: the one not holding the committed copy. One: the only one (its copy is lost).
  const uint32_t committed = LoadCommittedSlot(h);
  const int slot = slots_ == 1 || committed != 0 ? 0 : 1;
  if (!ReserveSlot(slot).ok()) return nullptr;  // the arena is closed now (ReserveSlot)
  const uint64_t seq = LoadSequence(h, slot, __ATOMIC_RELAXED);
  StoreSequence(h, slot, seq + 1 + (seq % 2), __ATOMIC_RELAXED);  // odd
  // The odd sequence is visible before any byte of the new copy.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  // The slot's old manifest no longer describes its data: a write given up leaves no copy there.
  __atomic_store_n(&h->slots[slot].manifest_bytes, uint64_t{0}, __ATOMIC_RELAXED);
  writing_slot_ = slot;
  return write_data();
}

uint8_t* Arena::write_data() const {
  if (writing_slot_ < 0) return nullptr;
  return base_ + data_offset_ + static_cast<uint64_t>(writing_slot_) * data_capacity_;
}

Status Arena::Commit(const Manifest& m) {
  if (!writable_) return Status::InvalidArgument(fmt::format("host arena {} is open read-only", path_));
  if (m.data_bytes > data_capacity_) {
    return Status::InvalidArgument(fmt::format("manifest of {} data bytes, host arena {} holds {}", m.data_bytes,
                                               path_, data_capacity_));
  }
  std::string bytes = EncodeManifest(m);
  if (bytes.size() > manifest_capacity_) {
    return Status::InvalidArgument(fmt::format("manifest of {} bytes, host arena {} reserves {}", bytes.size(),
                                               path_, manifest_capacity_));
  }
  BeginWrite();  // no-op when the caller already did; the slot's manifest region is overwritten next
  const int slot = writing_slot_;
  ArenaHeader* h = HeaderOf(base_);
  SlotWord* word = &h->slots[slot];
  std::memcpy(base_ + kHeaderBytes + static_cast<uint64_t>(slot) * manifest_capacity_, bytes.data(), bytes.size());
  __atomic_store_n(&word->manifest_bytes, static_cast<uint64_t>(bytes.size()), __ATOMIC_RELAXED);
  __atomic_store_n(&word->committed_unix_ns, NowUnixNs(), __ATOMIC_RELAXED);
  // A torn copy never replaces a whole one as the committed copy: with two slots it stays in
  // its own (readable by ReadSlot, and the next save's slot), the whole copy committed.
  const bool keep_whole = m.torn && slots_ > 1 && CommittedIsWhole();
  StoreSequence(h, slot, LoadSequence(h, slot, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);  // even
  if (!keep_whole) StoreCommittedSlot(h, static_cast<uint32_t>(slot));
  writing_slot_ = -1;
  return Status::Ok();
}

bool Arena::CommittedIsWhole() const {
  Manifest committed;
  uint64_t generation = 0;
  return ReadCommitted(&committed, &generation).ok() && !committed.torn;
}

void Arena::AbandonWrite() {
  if (!writable_ || writing_slot_ < 0) return;
  ArenaHeader* h = HeaderOf(base_);
  // With one slot the committed copy was being overwritten: none is left.
  if (LoadCommittedSlot(h) == static_cast<uint32_t>(writing_slot_)) StoreCommittedSlot(h, kNoSlot);
  StoreSequence(h, writing_slot_, LoadSequence(h, writing_slot_, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
  writing_slot_ = -1;
}

int Arena::writer_pid() const {
  if (base_ == nullptr) return 0;
  return static_cast<int>(__atomic_load_n(&HeaderOf(base_)->writer_pid, __ATOMIC_RELAXED));
}

Status Arena::ReadSlotOnce(int slot, bool committed, SlotBusy* busy, Manifest* m, uint64_t* generation) const {
  const ArenaHeader* h = HeaderOf(base_);
  *busy = SlotBusy::kNo;
  const uint64_t before = LoadSequence(h, slot);
  if (before % 2 != 0) {
    *busy = SlotBusy::kWriting;
    return Status::NotFound(fmt::format("host arena {} slot {}: a save is writing it", path_, slot));
  }
  const uint64_t length = __atomic_load_n(&h->slots[slot].manifest_bytes, __ATOMIC_RELAXED);
  // An uncommitted slot without a manifest holds no copy; the committed one must have one.
  if (length == 0 && !committed) return Status::NotFound(fmt::format("host arena {} slot {}: no copy", path_, slot));
  if (length > manifest_capacity_) {
    return Status::Corrupt(fmt::format("host arena {}: manifest of {} bytes in a region of {}", path_, length,
                                       manifest_capacity_));
  }
  const uint8_t* region = base_ + kHeaderBytes + static_cast<uint64_t>(slot) * manifest_capacity_;
  std::vector<uint8_t> bytes(region, region + length);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (LoadSequence(h, slot, __ATOMIC_RELAXED) != before) {  // a save began in that slot
    *busy = SlotBusy::kBegan;
    return Status::NotFound(fmt::format("host arena {} slot {}: a save began while its manifest was read", path_, slot));
  }
  Manifest parsed;
  Status s = ParseManifest(bytes, &parsed);
  if (!s.ok()) return s.WithContext(fmt::format("host arena {}", path_));
  if (parsed.data_bytes > data_capacity_) {
    return Status::Corrupt(fmt::format("host arena {}: manifest of {} data bytes, the arena holds {}", path_,
                                       parsed.data_bytes, data_capacity_));
  }
  *m = std::move(parsed);
  *generation = GenerationOf(before, slot);
  return Status::Ok();
}

Status Arena::ReadSlot(int slot, Manifest* m, uint64_t* generation) const {
  if (base_ == nullptr) return Status::InvalidArgument("host arena not open");
  if (slot < 0 || slot >= slots_) {
    return Status::InvalidArgument(fmt::format("host arena {} has {} slot(s), not slot {}", path_, slots_, slot));
  }
  SlotBusy busy = SlotBusy::kNo;
  return ReadSlotOnce(slot, /*committed=*/false, &busy, m, generation);
}

Status Arena::ReadCommitted(Manifest* m, uint64_t* generation) const {
  if (base_ == nullptr) return Status::InvalidArgument("host arena not open");
  const ArenaHeader* h = HeaderOf(base_);
  // A few tries: with two slots a reader can meet the writer flipping the committed slot and
  // starting the next save in the slot it just left.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint32_t committed = LoadCommittedSlot(h);
    if (committed == kNoSlot) {
      if (slots_ == 1 && LoadSequence(h, 0) % 2 != 0) {
        return Status::NotFound(fmt::format("host arena {}: a save is in progress", path_));
      }
      return Status::NotFound(fmt::format("host arena {} holds no committed copy", path_));
    }
    if (committed >= static_cast<uint32_t>(slots_)) {
      return Status::Corrupt(fmt::format("host arena {}: committed slot {} of {}", path_, committed, slots_));
    }
    SlotBusy busy = SlotBusy::kNo;
    Status s = ReadSlotOnce(static_cast<int>(committed), /*committed=*/true, &busy, m, generation);
    if (busy == SlotBusy::kNo) return s;
    // Being written with one slot: the save overwrites the only copy. Otherwise the committed
    // slot moves on: read again.
    if (busy == SlotBusy::kWriting && slots_ == 1) {
      return Status::NotFound(fmt::format("host arena {}: a save is in progress", path_));
    }
  }
  return Status::NotFound(fmt::format("host arena {}: saves began while its manifest was read", path_));
}

Status Arena::ReadStep(int64_t step, Manifest* m, uint64_t* generation) const {
  Status committed = ReadCommitted(m, generation);
  if (committed.ok() && m->step == step && !m->torn) return committed;
  if (committed.code() == StatusCode::kCorrupt) return committed;
  const int committed_slot = committed.ok() ? SlotOf(*generation) : -1;
  for (int slot = 0; slot < slots_; ++slot) {
    if (slot == committed_slot) continue;
    Manifest other;
    uint64_t other_generation = 0;
    if (!ReadSlot(slot, &other, &other_generation).ok() || other.step != step || other.torn) continue;
    *m = std::move(other);
    *generation = other_generation;
    return Status::Ok();
  }
  return Status::NotFound(fmt::format("host arena {} holds no whole copy of step {}", path_, step));
}

Status Arena::MakeCommitted(uint64_t generation) {
  if (!writable_ || writing_slot_ >= 0) {
    return Status::InvalidArgument(fmt::format("host arena {}: not its writer, or a write is open", path_));
  }
  const int slot = SlotOf(generation);
  ArenaHeader* h = HeaderOf(base_);
  if (slot >= slots_ || LoadSequence(h, slot, __ATOMIC_RELAXED) != SequenceOf(generation) ||
      __atomic_load_n(&h->slots[slot].manifest_bytes, __ATOMIC_RELAXED) == 0) {
    return Status::NotReady(fmt::format("host arena {} slot {}: no longer the copy read", path_, slot));
  }
  StoreCommittedSlot(h, static_cast<uint32_t>(slot));
  return Status::Ok();
}

Status Arena::RecommitOlderSlot() {
  Manifest now;
  uint64_t now_generation = 0;
  Status committed = ReadCommitted(&now, &now_generation);
  if (!committed.ok()) return committed;
  if (slots_ < 2) return Status::NotFound(fmt::format("host arena {} has one slot", path_));
  Manifest older;
  uint64_t older_generation = 0;
  const int other = 1 - SlotOf(now_generation);
  if (!ReadSlot(other, &older, &older_generation).ok() || older.torn || older.step >= now.step) {
    return Status::NotFound(fmt::format("host arena {}: no whole copy older than step {} in the other slot", path_,
                                        now.step));
  }
  return MakeCommitted(older_generation);
}

const uint8_t* Arena::data(uint64_t generation) const {
  if (base_ == nullptr || SlotOf(generation) >= slots_) return nullptr;
  return base_ + data_offset_ + static_cast<uint64_t>(SlotOf(generation)) * data_capacity_;
}

bool Arena::StillCommitted(uint64_t generation) const {
  if (base_ == nullptr || SlotOf(generation) >= slots_) return false;
  // Orders the caller's reads of the data before the check (the reader half of the seqlock).
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return LoadSequence(HeaderOf(base_), SlotOf(generation), __ATOMIC_RELAXED) == SequenceOf(generation);
}

}  // namespace ft::ckpt
