// The shared-memory segment of one communicator: every member process maps it; all data of
// the communicator's collectives and point-to-point messages moves through it.
//
// Layout (offsets in Header, computed by ComputeLayout from nranks and the chunk size, so every
// member computes the same and checks the creator's):
//   Header                      identity, rendezvous counters, abort flags, doorbell
//   RankArea[nranks]            per member: pid, collective arrival step, split exchange
//   coll data [2][nranks][chunk] double-buffered collective slots (buffer = step & 1)
//   P2pChannel[nranks*nranks]   per ordered (sender, receiver) pair: head/tail and slot headers
//   p2p data [nranks*nranks][kP2pSlots][p2p_slot_bytes]
//
// Waiting: every state change is followed by Ring() (doorbell++, futex wake if anyone sleeps);
// waiters read the doorbell, test their condition, then sleep on the doorbell value (futex, so
// no wake-up is lost). Cross-process: non-private futexes on the shared mapping.
#ifndef GPUSIM_NCCL_SEGMENT_H_
#define GPUSIM_NCCL_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gpusim::nccl {

inline constexpr uint64_t kSegmentMagic = 0x314d49534c43434eull;  // "NCCLSIM1"
inline constexpr uint32_t kLayoutVersion = 2;
inline constexpr uint32_t kReadyMagic = 0x59444552;  // "REDY"
inline constexpr int kP2pSlots = 4;
inline constexpr uint64_t kNoStall = ~0ull;

struct CtrlEntry {  // one member's contribution to a split exchange
  int64_t ordinal;
  int32_t color;
  int32_t key;
};

struct alignas(64) RankArea {
  std::atomic<uint32_t> pid;          // 0: free; else the attached member's pid
  std::atomic<uint32_t> reserved;
  std::atomic<uint64_t> coll_arrive;  // last collective step this member has filled its slot for
  std::atomic<uint64_t> ctrl_arrive;  // split exchanges this member has posted
  CtrlEntry ctrl[2];                  // double-buffered by exchange ordinal
};

struct P2pSlotHeader {
  uint64_t msg_bytes;    // size of the whole message this chunk belongs to
  uint64_t chunk_bytes;  // bytes in this slot
};

struct alignas(64) P2pChannel {
  std::atomic<uint64_t> head;  // chunks posted by the sender
  char pad0[56];
  std::atomic<uint64_t> tail;  // chunks consumed by the receiver
  char pad1[56];
  P2pSlotHeader slot[kP2pSlots];
  // Messages the receiver has begun to receive: a slowed sender (GPUSIM_NCCL_SLOW) starts its
  // transfer only once its receiver is there, as a link's transfer starts once both ends are.
  std::atomic<uint64_t> recvs_begun;
  std::atomic<uint64_t> sends_begun;  // messages the sender has begun, counted by the sender
};

struct alignas(64) Header {
  uint64_t magic;
  uint32_t version;
  uint32_t nranks;
  uint64_t total_bytes;
  uint64_t chunk_bytes;     // per member per buffer
  uint64_t p2p_slot_bytes;
  uint64_t ranks_off, coll_off, chan_off, p2p_off;
  std::atomic<uint32_t> ready;       // kReadyMagic once the creator has filled the header
  std::atomic<uint32_t> attached;    // members attached; == nranks: rendezvous complete
  std::atomic<uint32_t> aborted_by;  // rank+1 of the first member that aborted, else 0
  std::atomic<uint32_t> revoked_by;  // rank+1 of the first member that revoked, else 0
  std::atomic<uint64_t> stall_at;    // collective sequence number that never completes
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;
};

struct Layout {
  uint32_t nranks = 0;
  uint64_t chunk_bytes = 0, p2p_slot_bytes = 0;
  uint64_t ranks_off = 0, coll_off = 0, chan_off = 0, p2p_off = 0, total_bytes = 0;
};
Layout ComputeLayout(int nranks, uint64_t requested_chunk_bytes);

// One mapping of a communicator's segment. Thread-safe after Join returns: members only touch
// atomics and their own slots.
class Segment {
 public:
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates or opens the segment `name`, claims `rank`, and waits until all nranks members
  // have attached or until `timeout_s`/`*cancel`. The member whose arrival completes the
  // rendezvous unlinks the name (the mapping lives on); a member that gives up detaches, and the
  // last one to leave an incomplete segment unlinks it. `stall_at` (kNoStall: none) is published
  // into the header before attaching (the minimum over members wins).
  // Returns 0 on success, else an errno-like code with *err set.
  static int Join(const std::string& name, const Layout& layout, int rank, double timeout_s,
                  uint64_t stall_at, const std::atomic<bool>* cancel,
                  std::unique_ptr<Segment>* out, std::string* err);

  Header* header() const { return hdr_; }
  int nranks() const { return static_cast<int>(layout_.nranks); }
  const Layout& layout() const { return layout_; }
  RankArea* rank_area(int r) const {
    return reinterpret_cast<RankArea*>(base_ + layout_.ranks_off) + r;
  }
  char* coll_slot(int buf, int r) const {
    return base_ + layout_.coll_off +
           (static_cast<uint64_t>(buf) * layout_.nranks + static_cast<uint64_t>(r)) *
               layout_.chunk_bytes;
  }
  P2pChannel* channel(int src, int dst) const {
    return reinterpret_cast<P2pChannel*>(base_ + layout_.chan_off) +
           (static_cast<uint64_t>(src) * layout_.nranks + static_cast<uint64_t>(dst));
  }
  char* p2p_slot(int src, int dst, int slot) const {
    return base_ + layout_.p2p_off +
           ((static_cast<uint64_t>(src) * layout_.nranks + static_cast<uint64_t>(dst)) *
                kP2pSlots +
            static_cast<uint64_t>(slot)) *
               layout_.p2p_slot_bytes;
  }

  // The doorbell protocol (see the file comment).
  uint32_t Bell() const { return hdr_->doorbell.load(std::memory_order_seq_cst); }
  void Ring() const;
  // Sleeps until the doorbell differs from `seen` or timeout_ns passes.
  void Sleep(uint32_t seen, int64_t timeout_ns) const;

 private:
  Segment() = default;
  char* base_ = nullptr;
  Header* hdr_ = nullptr;
  Layout layout_;
};

int64_t NowNs();  // CLOCK_MONOTONIC

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_SEGMENT_H_
