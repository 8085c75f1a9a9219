// The definitions behind runtime.h's state and runtime_state.h: g_state, the reentry guard,
// the Runtime pointer, NoteCall and the test statistics.
#include "preload/runtime_state.h"

#include <time.h>

#include <new>

#include "shm/segment.h"

namespace ft::preload {

std::atomic<int> g_state{kUninit};
thread_local bool t_in_ft = false;

namespace internal {

Runtime* g_rt = nullptr;  // set once by Init, never freed (threads may outlive exit handlers)

namespace {

AllocationTable* Allocations() {
  AllocationTable* table = g_rt->allocations.load(std::memory_order_acquire);
  if (table != nullptr) return table;
  auto* made = new (std::nothrow) AllocationTable;  // outside any lock; a loser frees its own
  if (made == nullptr) return nullptr;
  if (g_rt->allocations.compare_exchange_strong(table, made, std::memory_order_acq_rel)) return made;
  delete made;
  return table;
}

}  // namespace

bool TrackAllocation(void* ptr, uint64_t bytes) {
  AllocationTable* table = Allocations();
  return table != nullptr && table->Insert(ptr, bytes);
}

bool UntrackAllocation(void* ptr, uint64_t* bytes) {
  AllocationTable* table = g_rt->allocations.load(std::memory_order_acquire);
  return table != nullptr && table->Remove(ptr, bytes);
}

}  // namespace internal

namespace {

uint64_t CoarseNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

}  // namespace

using internal::g_rt;

void NoteCall() noexcept {
  if (g_rt == nullptr) return;
  shm::SegmentHeader* h = g_rt->segment->header();
  h->last_call_ns.store(CoarseNs(), std::memory_order_relaxed);
  h->call_count.fetch_add(1, std::memory_order_relaxed);
}

void SyncEnter() noexcept {
  if (g_rt == nullptr) return;
  shm::SegmentHeader* h = g_rt->segment->header();
  if (h->blocked_count.fetch_add(1, std::memory_order_acq_rel) == 0) {
    h->blocked_since_ns.store(internal::NowNs(), std::memory_order_release);
  }
}

void SyncExit() noexcept {
  if (g_rt == nullptr) return;
  shm::SegmentHeader* h = g_rt->segment->header();
  if (h->blocked_count.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Last one out clears the time, unless a thread entered meanwhile: it may already have
  // stored its own time (the CAS then fails) or be about to (it overwrites our 0).
  uint64_t since = h->blocked_since_ns.load(std::memory_order_acquire);
  while (since != 0 && h->blocked_count.load(std::memory_order_acquire) == 0 &&
         !h->blocked_since_ns.compare_exchange_weak(since, 0, std::memory_order_acq_rel,
                                                    std::memory_order_acquire)) {
  }
}

RuntimeStats GetRuntimeStats() noexcept {
  RuntimeStats s;
  if (g_rt == nullptr) return s;
  s.pending = g_rt->submitted.load() - g_rt->finished.load();
  s.events_created = g_rt->events_created.load();
  s.ops_entered = g_rt->ops_entered.load();
  return s;
}

}  // namespace ft::preload
