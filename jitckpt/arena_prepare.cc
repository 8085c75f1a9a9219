// Readying an arena's data regions one slot at a time (arena.h, "prepared"): a slot's blocks
// reserved in its directory before any save writes them, then its pages mapped writable. A
// writer that cannot reserve closes the arena: no save may write a page the directory could
// not back.
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>

#include "jitckpt/arena.h"
#include "jitckpt/arena_space.h"
#include "jitckpt/populate.h"

namespace ft::ckpt {

void Arena::SetPrepared(int reserve_fd) {
  reserve_fd_ = reserve_fd;
  const uint32_t all = (1u << slots_) - 1;
  reserved_mask_ = prepared_mask_ = reserve_fd < 0 ? all : 0;
}

std::pair<uint64_t, uint64_t> Arena::SlotRange(int slot) const {
  const uint64_t begin = data_offset_ + static_cast<uint64_t>(slot) * data_capacity_;
  return {begin, slot == slots_ - 1 ? mapped_ : begin + data_capacity_};
}

Status Arena::ReserveSlot(int slot) {
  if (slot < 0 || slot >= slots_) {
    return Status::InvalidArgument(fmt::format("host arena {} has no slot {}", path_, slot));
  }
  if (((reserved_mask_ >> slot) & 1u) != 0) return Status::Ok();
  if (base_ == nullptr || reserve_fd_ < 0) {
    return Status::IoError(fmt::format("host arena {} was closed: its space could not be reserved", path_));
  }
  const auto [begin, end] = SlotRange(slot);
  Status s = arena_space::ReserveRange(reserve_fd_, arena_space::DirOf(path_), path_, begin, end);
  if (!s.ok()) {
    // No save may write a page the directory could not back (SIGBUS on a full tmpfs). An arena
    // this open made holds no copy yet: its name goes too.
    close(reserve_fd_);
    reserve_fd_ = -1;
    if (created_) unlink(path_.c_str());
    munmap(base_, mapped_);
    base_ = nullptr;
    return s;
  }
  reserved_mask_ |= 1u << slot;
  if (reserved_mask_ == (1u << slots_) - 1) {
    close(reserve_fd_);
    reserve_fd_ = -1;
  }
  return Status::Ok();
}

Status Arena::PrepareSlot(int slot, int threads, const std::atomic<bool>* stop) {
  if (slot_prepared(slot)) return Status::Ok();
  FT_RETURN_IF_ERROR(ReserveSlot(slot));
  prepared_mask_ |= 1u << slot;
  // In pieces, so a process that begins to exit meanwhile waits for one piece at most.
  constexpr uint64_t kPiece = 1ull << 30;
  const auto [begin, end] = SlotRange(slot);
  for (uint64_t at = begin; at < end; at += kPiece) {
    if (stop != nullptr && stop->load(std::memory_order_acquire)) break;  // the rest faults in at first use
    PopulateForWrite(base_ + at, std::min(kPiece, end - at), threads);
  }
  return Status::Ok();
}

Status Arena::PrepareData(int threads, const std::atomic<bool>* stop) {
  for (int slot = 0; slot < slots_; ++slot) FT_RETURN_IF_ERROR(PrepareSlot(slot, threads, stop));
  return Status::Ok();
}

}  // namespace ft::ckpt
