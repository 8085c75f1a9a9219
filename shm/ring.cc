#include "shm/ring.h"

#include <cstring>

namespace ft::shm {

RingWriter::RingWriter(const Segment& segment)
    : header_(segment.header()),
      control_(segment.control()),
      records_(segment.ring()),
      mask_(segment.ring_capacity() - 1),
      head_(segment.header()->ring_head.load(std::memory_order_relaxed)),
      cached_tail_(segment.control()->ring_tail.load(std::memory_order_acquire)) {}

bool RingWriter::Push(const Record& record) {
  uint64_t capacity = mask_ + 1;
  if (head_ - cached_tail_ >= capacity) {
    cached_tail_ = control_->ring_tail.load(std::memory_order_acquire);
    // A reader that wrote a tail beyond our head is broken; never trust it to make room.
    if (cached_tail_ > head_ || head_ - cached_tail_ >= capacity) {
      header_->ring_dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  std::memcpy(&records_[head_ & mask_], &record, sizeof(Record));
  ++head_;
  header_->ring_head.store(head_, std::memory_order_release);
  return true;
}

RingReader::RingReader(const Segment& segment)
    : header_(segment.header()),
      control_(segment.control()),
      records_(segment.ring()),
      capacity_(segment.ring_capacity()) {}

Status RingReader::Poll(Record* out, size_t max, size_t* got) {
  *got = 0;
  uint64_t head = header_->ring_head.load(std::memory_order_acquire);
  uint64_t tail = control_->ring_tail.load(std::memory_order_relaxed);
  if (tail > head || head - tail > capacity_) {
    control_->ring_tail.store(head, std::memory_order_release);
    return Status::Corrupt("ring cursor out of range (head " + std::to_string(head) + ", tail " +
                           std::to_string(tail) + "); skipped to the head");
  }
  uint64_t available = head - tail;
  size_t n = available < max ? static_cast<size_t>(available) : max;
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&out[i], &records_[(tail + i) & (capacity_ - 1)], sizeof(Record));
  }
  // Release: the producer may overwrite these slots only after it sees the new tail.
  control_->ring_tail.store(tail + n, std::memory_order_release);
  *got = n;
  return Status::Ok();
}

size_t RingReader::Peek(Record* out, size_t max) const {
  uint64_t head = header_->ring_head.load(std::memory_order_acquire);
  uint64_t tail = control_->ring_tail.load(std::memory_order_acquire);
  if (tail > head || head - tail > capacity_) return 0;
  uint64_t first = head - tail > max ? head - max : tail;
  size_t n = static_cast<size_t>(head - first);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&out[i], &records_[(first + i) & (capacity_ - 1)], sizeof(Record));
  }
  // Slots below the consumer's cursor may have been reused while we copied.
  uint64_t tail_after = control_->ring_tail.load(std::memory_order_acquire);
  if (tail_after <= first) return n;
  uint64_t stale = tail_after - first;
  if (stale >= n) return 0;
  std::memmove(out, out + stale, (n - stale) * sizeof(Record));
  return n - static_cast<size_t>(stale);
}

uint64_t RingReader::dropped() const { return header_->ring_dropped.load(std::memory_order_relaxed); }

}  // namespace ft::shm
