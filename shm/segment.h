// ft::shm::Segment: one process's shared-memory segment (layout in shm/layout.h).
//
// The producer (libft.so inside a training process) Create()s it: mode 0600, space reserved
// up front so a too-small /dev/shm fails here and not later with SIGBUS, header written, then
// state set to kRunning. A reader (ftworker, ftdump) Attach()es: the header is copied once,
// the copy validated, and from then on the reader uses only its copy (HeaderCopy) for sizes,
// offsets and identity: the live header stays writable by whoever owns the file, and bytes
// that changed after validation must never move a pointer. Everything but the control page is
// mapped read-only. Attach also records the file's owner, mode and inode (fstat of the
// descriptor it mapped) so the caller can decide whether to trust who wrote it.
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

// "/ft.<job>.r<rank>.p<pid>": the job as common/job_name.h's JobToken spells it ([A-Za-z0-9_-],
// at most 48 characters, a digest suffix for any other name), so a reader can list one job's
// segments by prefix and never another's. Rank -1 is written "rx".
std::string SegmentName(std::string_view job, int rank, int pid);
std::string SegmentPrefix(std::string_view job);

// Parses "/ft.<job>.r<rank>.p<pid>" (the leading '/' optional): the rank (-1 for "rx") and
// pid the name claims. false for any other shape.
bool ParseSegmentName(std::string_view name, int* rank, int* pid);

// The static part of a header as a reader copied it, once, before validating the copy.
struct HeaderCopy {
  uint32_t layout_version = 0;  // kOldestReadableLayoutVersion..kLayoutVersion
  uint64_t segment_bytes = 0;
  uint32_t control_offset = 0;
  uint32_t comm_table_offset = 0;
  uint32_t comm_slot_count = 0;
  uint64_t ring_offset = 0;
  uint32_t ring_capacity = 0;  // a power of two
  int32_t global_rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = -1;
  int32_t pid = 0;
  uint64_t incarnation = 0;
  uint64_t created_unix_ns = 0;
  uint32_t record_version = 1;  // RecordVersionOf: 0 in the header reads as 1
  std::string job, node, host;  // bounded by their fields, NUL or not
};

// The rank's GPU PCI bus id as libft.so wrote it (SegmentHeader::gpu_bus_id), "" while not
// written or when the bytes are not a printable bus id (foreign bytes: bounded, checked).
std::string GpuBusIdOf(const SegmentHeader& header);

// Checks foreign bytes claiming to be a segment of `size` bytes: magic, layout version (older
// ones down to kOldestReadableLayoutVersion pass: shm/layout_v1.h), record format version
// (older ones pass: readers know them), sizes, offsets in bounds and not overlapping, capacity a power of two. Unknown versions are
// kUnsupported with both versions named; anything else wrong is kCorrupt. Reads only the
// first kHeaderBytes of `bytes` (size may be smaller: then it is kCorrupt), once: what it
// checked is what it returns in *copy (when not null, and only on success).
Status ValidateHeader(const void* bytes, uint64_t size, HeaderCopy* copy = nullptr);

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

  // The validated copy of the static header: geometry and identity. Readers take sizes,
  // offsets, rank and pid from here, never from header().
  const HeaderCopy& info() const { return info_; }
  uint32_t comm_slot_count() const { return info_.comm_slot_count; }
  uint32_t ring_capacity() const { return info_.ring_capacity; }
  // Of the file as mapped (fstat of the same descriptor); the creator's for Create().
  uint32_t owner_uid() const { return owner_uid_; }
  uint32_t mode() const { return mode_; }  // permission bits
  uint64_t inode() const { return inode_; }

  // The live header: only its live fields (state, heartbeat, counters) mean anything to a
  // reader, and they may hold anything.
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  ControlPage* control() const { return reinterpret_cast<ControlPage*>(base_ + info_.control_offset); }
  CommSlot* comm_slots() const { return reinterpret_cast<CommSlot*>(base_ + info_.comm_table_offset); }
  Record* ring() const { return reinterpret_cast<Record*>(base_ + info_.ring_offset); }

 private:
  Segment(std::string name, uint8_t* base, uint64_t size, bool writable, HeaderCopy info)
      : name_(std::move(name)), base_(base), size_(size), writable_(writable), info_(std::move(info)) {}

  std::string name_;
  uint8_t* base_;
  uint64_t size_;
  bool writable_;
  HeaderCopy info_;
  uint32_t owner_uid_ = 0;
  uint32_t mode_ = 0;
  uint64_t inode_ = 0;
};

}  // namespace ft::shm

#endif  // FT_SHM_SEGMENT_H_
