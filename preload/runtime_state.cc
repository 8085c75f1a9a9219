// The definitions behind runtime.h's state and runtime_state.h: g_state, the reentry guard,
// the Runtime pointer, NoteCall and the test statistics.
#include "preload/runtime_state.h"

#include <time.h>

#include "shm/segment.h"

namespace ft::preload {

std::atomic<int> g_state{kUninit};
thread_local bool t_in_ft = false;

namespace internal {

Runtime* g_rt = nullptr;  // set once by Init, never freed (threads may outlive exit handlers)

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

RuntimeStats GetRuntimeStats() noexcept {
  RuntimeStats s;
  if (g_rt == nullptr) return s;
  s.pending = g_rt->pending_count.load();
  s.events_created = g_rt->events_created.load();
  s.ops_entered = g_rt->ops_entered.load();
  return s;
}

}  // namespace ft::preload
