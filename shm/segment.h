// ft::shm::Segment: one process's shared-memory segment (layout in shm/layout.h).
//
// The producer (libft.so inside a training process) Create()s it: mode 0600, space reserved
// up front so a too-small /dev/shm fails here and not later with SIGBUS, header written, then
// state set to kRunning. A reader (ftworker, ftdump) Attach()es: the header is validated
// before anything else is trusted, and everything but the control page is mapped read-only.
//
// A Segment owns its mapping; the segment itself (the /dev/shm file) lives until Remove().
// Not thread-safe as an object; the memory it maps is designed for concurrent access.
#ifndef FT_SHM_SEGMENT_H_
#define FT_SHM_SEGMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "shm/layout.h"

namespace ft::shm {

struct Identity {
  std::string job;
  std::string node;
  std::string host;
  int global_rank = -1;
  int local_rank = -1;
  int world_size = -1;
};

struct SegmentOptions {
  uint32_t ring_capacity = 16384;  // records (64 B each): 1 MiB
  uint32_t comm_slots = 64;
};

// "/ft.<job>.r<rank>.p<pid>": job restricted to [A-Za-z0-9_-] (others become '_'), so a
// reader can list one job's segments by prefix. Rank -1 is written "rx".
std::string SegmentName(std::string_view job, int rank, int pid);
std::string SegmentPrefix(std::string_view job);

// Checks foreign bytes claiming to be a segment of `size` bytes: magic, layout version, record
// format version (older ones pass: readers know them), sizes, offsets in bounds and not
// overlapping, capacity a power of two. Unknown versions are kUnsupported with both versions
// named; anything else wrong is kCorrupt. Reads only the first kHeaderBytes of `bytes` (size
// may be smaller: then it is kCorrupt).
Status ValidateHeader(const void* bytes, uint64_t size);

// Bytes a segment with these options occupies.
uint64_t SegmentBytes(const SegmentOptions& options);

class Segment {
 public:
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  static Status Create(std::string_view name, const Identity& identity, int pid,
                       const SegmentOptions& options, std::unique_ptr<Segment>* out);
  static Status Attach(std::string_view name, std::unique_ptr<Segment>* out);

  // shm_unlink; the mapping stays valid until destruction.
  Status Remove();

  const std::string& name() const { return name_; }
  bool writable() const { return writable_; }
  uint64_t size() const { return size_; }

  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  ControlPage* control() const { return reinterpret_cast<ControlPage*>(base_ + header()->control_offset); }
  CommSlot* comm_slots() const { return reinterpret_cast<CommSlot*>(base_ + header()->comm_table_offset); }
  Record* ring() const { return reinterpret_cast<Record*>(base_ + header()->ring_offset); }

 private:
  Segment(std::string name, uint8_t* base, uint64_t size, bool writable)
      : name_(std::move(name)), base_(base), size_(size), writable_(writable) {}

  std::string name_;
  uint8_t* base_;
  uint64_t size_;
  bool writable_;
};

}  // namespace ft::shm

#endif  // FT_SHM_SEGMENT_H_
