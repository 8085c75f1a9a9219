// The arena's warm-up (ckpt_agent_impl.h, StartWarmUp): after its preparation, the agent thread
// touches every page of the slots (jitckpt/populate.h, TouchPages) a piece at a time, between
// requests, so that no save pays the process's first access to its pages — the termination save
// least of all, which has a grace period to fit in. A request waits for one piece at most; a
// restore asked for meanwhile is served first and touches what it reads itself.
#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "jitckpt/populate.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"

namespace ft::preload::agent {

namespace {

// 4096 pages: ~20 ms where each first access costs a hypervisor's ~5 us, well under a
// millisecond elsewhere. What a request may wait behind.
constexpr uint64_t kWarmPiece = 16ull << 20;

}  // namespace

void Agent::StartWarmUp() {
  warm_total_ = arena_.slots_bytes();
  warm_done_ = 0;
  warm_seconds_ = 0;
  // The slot the next save writes first (Arena::BeginWrite's choice): the other one than the
  // committed copy's, when there are two.
  warm_from_ = 0;
  ckpt::Manifest committed;
  uint64_t generation = 0;
  if (arena_.slot_count() == 2 && arena_.ReadCommitted(&committed, &generation).ok() &&
      arena_.data(generation) == arena_.slots_data()) {  // slot 0 holds it
    warm_from_ = arena_.data_capacity();
  }
}

bool Agent::WarmPending() const {
  return warm_done_ < warm_total_ && !stop_preparing_.load(std::memory_order_acquire);
}

void Agent::WarmNextPiece() {
  const auto start = std::chrono::steady_clock::now();
  // Through the end of the slots region, then from its start up to where it began.
  const uint64_t at = (warm_from_ + warm_done_) % warm_total_;
  const uint64_t piece = std::min({kWarmPiece, warm_total_ - warm_done_, warm_total_ - at});
  ckpt::TouchPages(arena_.slots_data() + at, piece);
  warm_done_ += piece;
  warm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (warm_done_ == warm_total_) {
    FT_LOG(Info, Ckpt, "host arena {}: every page of its {} slot bytes touched in {:.3f} s, between requests",
           arena_.path(), warm_total_, warm_seconds_);
  }
}

}  // namespace ft::preload::agent
