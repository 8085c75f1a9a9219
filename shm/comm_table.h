// The in-flight table: per communicator, what this process entered and what its GPU started
// and completed, readable by another process at any moment. This is what makes hang
// detection work without the ring: a reader sees "rank 5 entered allreduce #812 on comm X
// 40 s ago and it has not started" even if every record was dropped.
#ifndef FT_SHM_COMM_TABLE_H_
#define FT_SHM_COMM_TABLE_H_

#include <cstdint>
#include <optional>

#include "shm/segment.h"

namespace ft::shm {

// A consistent copy of one slot.
struct CommProgress {
  uint64_t comm_id = 0;
  int32_t comm_rank = -1;
  int32_t comm_size = 0;
  int32_t global_rank = -1;
  uint32_t flags = 0;  // kCommSlot* (layout.h)
  uint32_t enter_op = 0;
  uint64_t entered_seq = 0;
  uint64_t entered_ns = 0;
  uint64_t entered_bytes = 0;
  int64_t entered_peer = -1;
  uint64_t started_seq = 0;
  uint64_t started_ns = 0;
  uint64_t completed_seq = 0;
  uint64_t completed_ns = 0;
  uint64_t last_duration_ns = 0;
  uint64_t pending_seq = 0;  // layout.h: the oldest op known pending, 0 none known
  uint64_t pending_ns = 0;   // its entered time
};

// Producer side. Slot claiming happens on the app thread at communicator creation;
// EnterOp on the thread issuing the op; Progress on the poller thread.
class CommTableWriter {
 public:
  explicit CommTableWriter(const Segment& segment);

  // The slot for comm_id, claimed if new (with `flags`, kCommSlot* bits, written before the
  // id is published); nullopt when the table is full (the comm is then tracked by ring
  // records only). A slot already holding comm_id keeps its flags.
  std::optional<uint32_t> Claim(uint64_t comm_id, int32_t comm_rank, int32_t comm_size,
                                int32_t global_rank, uint32_t flags = 0);
  void EnterOp(uint32_t slot, uint64_t seq, uint32_t op, uint64_t bytes, int64_t peer, uint64_t now_ns);
  void Started(uint32_t slot, uint64_t seq, uint64_t now_ns);
  void Completed(uint32_t slot, uint64_t seq, uint64_t now_ns, uint64_t duration_ns);
  // The oldest op known pending (seq 0: none known). Same writer as Started/Completed.
  void OldestPending(uint32_t slot, uint64_t seq, uint64_t entered_ns);

 private:
  CommSlot* slots_;
  uint32_t count_;
};

// Reader side: a consistent snapshot of slot `index`, or nullopt when free or when a writer
// kept it busy for every retry (it is then read again on the next poll).
std::optional<CommProgress> SnapshotCommSlot(const Segment& segment, uint32_t index);

}  // namespace ft::shm

#endif  // FT_SHM_COMM_TABLE_H_
