#include "shm/comm_table.h"

#include <atomic>
#include <thread>

namespace ft::shm {
namespace {

constexpr int kSnapshotRetries = 64;

// Seqlock without fences (ThreadSanitizer understands it, and on x86 and arm64 release
// stores and acquire loads cost what plain ones do): the version is odd while a group is
// written; data fields are stored with release and loaded with acquire, so a reader that
// sees any new data value also sees the odd version on its second read of the version.
void BeginWrite(std::atomic<uint32_t>& version) {
  version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void EndWrite(std::atomic<uint32_t>& version) {
  version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Seqlock reader: runs `copy` (acquire loads of the group's fields) until it saw one even
// version before and after; false when every retry met a writer.
template <typename Copy>
bool ReadConsistently(const std::atomic<uint32_t>& version, Copy copy) {
  for (int i = 0; i < kSnapshotRetries; ++i) {
    uint32_t before = version.load(std::memory_order_acquire);
    if (before & 1) {
      std::this_thread::yield();  // the writer may be preempted mid-write on a busy core
      continue;
    }
    copy();
    if (version.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

}  // namespace

CommTableWriter::CommTableWriter(const Segment& segment)
    : slots_(segment.comm_slots()), count_(segment.comm_slot_count()) {}

std::optional<uint32_t> CommTableWriter::Claim(uint64_t comm_id, int32_t comm_rank,
                                               int32_t comm_size, int32_t global_rank,
                                               uint32_t flags) {
  for (uint32_t i = 0; i < count_; ++i) {
    uint64_t id = slots_[i].comm_id.load(std::memory_order_relaxed);
    if (id == comm_id) return i;
    if (id != 0) continue;
    CommSlot& slot = slots_[i];
    slot.comm_rank = comm_rank;
    slot.comm_size = comm_size;
    slot.global_rank = global_rank;
    slot.flags = flags;
    // Published last: a reader that sees the id sees the static fields.
    slot.comm_id.store(comm_id, std::memory_order_release);
    return i;
  }
  return std::nullopt;
}

void CommTableWriter::EnterOp(uint32_t index, uint64_t seq, uint32_t op, uint64_t bytes,
                              int64_t peer, uint64_t now_ns) {
  CommSlot& slot = slots_[index];
  BeginWrite(slot.enter_version);
  slot.enter_op.store(op, std::memory_order_release);
  slot.entered_seq.store(seq, std::memory_order_release);
  slot.entered_ns.store(now_ns, std::memory_order_release);
  slot.entered_bytes.store(bytes, std::memory_order_release);
  slot.entered_peer.store(peer, std::memory_order_release);
  EndWrite(slot.enter_version);
}

void CommTableWriter::Started(uint32_t index, uint64_t seq, uint64_t now_ns) {
  CommSlot& slot = slots_[index];
  BeginWrite(slot.progress_version);
  slot.started_seq.store(seq, std::memory_order_release);
  slot.started_ns.store(now_ns, std::memory_order_release);
  EndWrite(slot.progress_version);
}

void CommTableWriter::Completed(uint32_t index, uint64_t seq, uint64_t now_ns, uint64_t duration_ns) {
  CommSlot& slot = slots_[index];
  BeginWrite(slot.progress_version);
  slot.completed_seq.store(seq, std::memory_order_release);
  slot.completed_ns.store(now_ns, std::memory_order_release);
  slot.last_duration_ns.store(duration_ns, std::memory_order_release);
  EndWrite(slot.progress_version);
}

void CommTableWriter::OldestPending(uint32_t index, uint64_t seq, uint64_t entered_ns) {
  CommSlot& slot = slots_[index];
  BeginWrite(slot.progress_version);
  slot.pending_seq.store(seq, std::memory_order_release);
  slot.pending_ns.store(entered_ns, std::memory_order_release);
  EndWrite(slot.progress_version);
}

std::optional<CommProgress> SnapshotCommSlot(const Segment& segment, uint32_t index) {
  if (index >= segment.comm_slot_count()) return std::nullopt;  // the validated copy
  const CommSlot& slot = segment.comm_slots()[index];
  CommProgress p;
  p.comm_id = slot.comm_id.load(std::memory_order_acquire);
  if (p.comm_id == 0) return std::nullopt;
  p.comm_rank = slot.comm_rank;
  p.comm_size = slot.comm_size;
  p.global_rank = slot.global_rank;
  p.flags = slot.flags;

  bool entered_ok = ReadConsistently(slot.enter_version, [&] {
    p.enter_op = slot.enter_op.load(std::memory_order_acquire);
    p.entered_seq = slot.entered_seq.load(std::memory_order_acquire);
    p.entered_ns = slot.entered_ns.load(std::memory_order_acquire);
    p.entered_bytes = slot.entered_bytes.load(std::memory_order_acquire);
    p.entered_peer = slot.entered_peer.load(std::memory_order_acquire);
  });
  bool progress_ok = ReadConsistently(slot.progress_version, [&] {
    p.started_seq = slot.started_seq.load(std::memory_order_acquire);
    p.started_ns = slot.started_ns.load(std::memory_order_acquire);
    p.completed_seq = slot.completed_seq.load(std::memory_order_acquire);
    p.completed_ns = slot.completed_ns.load(std::memory_order_acquire);
    p.last_duration_ns = slot.last_duration_ns.load(std::memory_order_acquire);
    p.pending_seq = slot.pending_seq.load(std::memory_order_acquire);
    p.pending_ns = slot.pending_ns.load(std::memory_order_acquire);
  });
  if (!entered_ok || !progress_ok) return std::nullopt;
  return p;
}

}  // namespace ft::shm
