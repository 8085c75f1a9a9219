// The record ring of a segment: single producer (libft.so), single consumer (the attached
// reader). The producer never blocks and never waits for the reader: when the ring is full
// the new record is dropped and counted in ring_dropped. The consumer's cursor lives in the
// control page, so a restarted reader resumes where the last one stopped.
#ifndef FT_SHM_RING_H_
#define FT_SHM_RING_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "shm/segment.h"

namespace ft::shm {

// Called from one producer thread at a time (in libft.so, the poller: app threads hand it
// their records through queues of their own, preload/record_queue.h).
class RingWriter {
 public:
  explicit RingWriter(const Segment& segment);

  // Copies the record into the ring; false (and counted) when the ring is full.
  bool Push(const Record& record);

 private:
  SegmentHeader* header_;
  ControlPage* control_;
  Record* records_;
  uint64_t mask_;
  uint64_t head_;         // our own copy of header_->ring_head
  uint64_t cached_tail_;  // last tail read; refreshed only when the ring looks full
};

// Called from one consumer thread.
class RingReader {
 public:
  explicit RingReader(const Segment& segment);

  // Copies up to `max` records, oldest first, and advances the shared cursor. Returns the
  // count in *got. A head or tail the producer could not have written (foreign or corrupt
  // bytes) is kCorrupt; the cursor is then moved to the head so reading can go on.
  Status Poll(Record* out, size_t max, size_t* got);

  // Copies up to `max` of the newest unconsumed records without consuming them (ftdump looks
  // without disturbing the worker). Records the consumer passed meanwhile are left out.
  size_t Peek(Record* out, size_t max) const;

  uint64_t dropped() const;

 private:
  const SegmentHeader* header_;
  ControlPage* control_;
  const Record* records_;
  uint64_t capacity_;
};

}  // namespace ft::shm

#endif  // FT_SHM_RING_H_
