// libft.so internal: how app threads hand records to the segment's ring without a lock. Each
// app thread writes into a queue of its own (single producer: the thread; single consumer: the
// poller), and the poller, the ring's only producer, moves them into the ring once per round.
// No app thread ever waits for another thread: a full queue (the poller stalled) drops the
// record and counts it in the header's ring_dropped, so memory stays bounded. A thread's queue
// is made at its first record (outside any lock) and handed to a later thread when it exits.
#ifndef FT_PRELOAD_RECORD_QUEUE_H_
#define FT_PRELOAD_RECORD_QUEUE_H_

#include "shm/ring.h"
#include "shm/segment.h"

namespace ft::preload::internal {

inline constexpr uint32_t kThreadQueueRecords = 4096;  // 256 KiB per recording thread

// App threads (any). False when the record was dropped (and counted).
bool EnqueueRecord(const shm::Record& record) noexcept;

// The poller (or the exit path once the poller is done): every thread's queued records, each
// thread's in order, into the ring.
void DrainRecordQueues(shm::RingWriter& ring) noexcept;

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_RECORD_QUEUE_H_
