#include "shm/comm_table.h"

#include <atomic>

#include "common/seqlock.h"

namespace ft::shm {
namespace {

// A reader gives up on a group after this many busy copies (the next poll reads it again).
constexpr int kSnapshotRetries = 64;

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
  slot.enter_version.BeginWrite();
  Seqlock::Store(slot.enter_op, op);
  Seqlock::Store(slot.entered_seq, seq);
  Seqlock::Store(slot.entered_ns, now_ns);
  Seqlock::Store(slot.entered_bytes, bytes);
  Seqlock::Store(slot.entered_peer, peer);
  slot.enter_version.EndWrite();
}

void CommTableWriter::Started(uint32_t index, uint64_t seq, uint64_t now_ns) {
  CommSlot& slot = slots_[index];
  slot.progress_version.BeginWrite();
  Seqlock::Store(slot.started_seq, seq);
  Seqlock::Store(slot.started_ns, now_ns);
  slot.progress_version.EndWrite();
}

void CommTableWriter::Completed(uint32_t index, uint64_t seq, uint64_t now_ns, uint64_t duration_ns) {
  CommSlot& slot = slots_[index];
  slot.progress_version.BeginWrite();
  Seqlock::Store(slot.completed_seq, seq);
  Seqlock::Store(slot.completed_ns, now_ns);
  Seqlock::Store(slot.last_duration_ns, duration_ns);
  slot.progress_version.EndWrite();
}

void CommTableWriter::OldestPending(uint32_t index, uint64_t seq, uint64_t entered_ns) {
  CommSlot& slot = slots_[index];
  slot.progress_version.BeginWrite();
  Seqlock::Store(slot.pending_seq, seq);
  Seqlock::Store(slot.pending_ns, entered_ns);
  slot.progress_version.EndWrite();
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

  bool entered_ok = slot.enter_version.Read(kSnapshotRetries, [&] {
    p.enter_op = Seqlock::Load(slot.enter_op);
    p.entered_seq = Seqlock::Load(slot.entered_seq);
    p.entered_ns = Seqlock::Load(slot.entered_ns);
    p.entered_bytes = Seqlock::Load(slot.entered_bytes);
    p.entered_peer = Seqlock::Load(slot.entered_peer);
  });
  bool progress_ok = slot.progress_version.Read(kSnapshotRetries, [&] {
    p.started_seq = Seqlock::Load(slot.started_seq);
    p.started_ns = Seqlock::Load(slot.started_ns);
    p.completed_seq = Seqlock::Load(slot.completed_seq);
    p.completed_ns = Seqlock::Load(slot.completed_ns);
    p.last_duration_ns = Seqlock::Load(slot.last_duration_ns);
    p.pending_seq = Seqlock::Load(slot.pending_seq);
    p.pending_ns = Seqlock::Load(slot.pending_ns);
  });
  if (!entered_ok || !progress_ok) return std::nullopt;
  return p;
}

}  // namespace ft::shm
