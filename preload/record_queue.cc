#include "preload/record_queue.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <new>

#include "preload/runtime_state.h"

namespace ft::preload::internal {

namespace {

struct alignas(64) ThreadQueue {
  // The producer's line.
  alignas(64) std::atomic<uint64_t> head{0};  // records ever written
  uint64_t cached_tail = 0;                    // producer: the tail last read
  // The consumer's line.
  alignas(64) std::atomic<uint64_t> tail{0};  // records ever moved to the ring
  // Rarely written.
  alignas(64) std::atomic<bool> owned{true};  // a live thread produces into it
  ThreadQueue* all_next = nullptr;             // every queue ever made (never freed)
  shm::Record records[kThreadQueueRecords];
};

std::atomic<ThreadQueue*> g_queues{nullptr};
pthread_key_t g_queue_key;
pthread_once_t g_queue_key_once = PTHREAD_ONCE_INIT;
bool g_queue_key_ok = false;
// constinit: no TLS init wrapper (see t_group_depth).
constinit thread_local ThreadQueue* t_queue = nullptr;

// At thread exit: the queue goes to a later thread (its records still drain in order).
void ReleaseQueue(void* queue) {
  static_cast<ThreadQueue*>(queue)->owned.store(false, std::memory_order_release);
}

void MakeKey() { g_queue_key_ok = pthread_key_create(&g_queue_key, ReleaseQueue) == 0; }

ThreadQueue* ClaimQueue() {
  pthread_once(&g_queue_key_once, MakeKey);
  ThreadQueue* queue = nullptr;
  for (ThreadQueue* q = g_queues.load(std::memory_order_acquire); q != nullptr; q = q->all_next) {
    bool owned = false;
    if (!q->owned.load(std::memory_order_relaxed) &&
        q->owned.compare_exchange_strong(owned, true, std::memory_order_acquire)) {
      queue = q;
      break;
    }
  }
  if (queue == nullptr) {
    queue = new (std::nothrow) ThreadQueue;
    if (queue == nullptr) return nullptr;
    ThreadQueue* head = g_queues.load(std::memory_order_relaxed);
    do {
      queue->all_next = head;
    } while (!g_queues.compare_exchange_weak(head, queue, std::memory_order_release,
                                              std::memory_order_relaxed));
  }
  // Without the key the queue is never handed on (the thread's exit leaks it, bounded).
  if (g_queue_key_ok) (void)pthread_setspecific(g_queue_key, queue);
  return queue;
}

void CountDropped() {
  if (g_rt != nullptr && g_rt->segment) {
    g_rt->segment->header()->ring_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

bool EnqueueRecord(const shm::Record& record) noexcept {
  ThreadQueue* q = t_queue;
  if (q == nullptr) {
    q = t_queue = ClaimQueue();
    if (q == nullptr) {
      CountDropped();
      return false;
    }
  }
  uint64_t head = q->head.load(std::memory_order_relaxed);
  if (head - q->cached_tail >= kThreadQueueRecords) {
    q->cached_tail = q->tail.load(std::memory_order_acquire);
    if (head - q->cached_tail >= kThreadQueueRecords) {
      CountDropped();
      return false;
    }
  }
  std::memcpy(&q->records[head % kThreadQueueRecords], &record, sizeof(record));
  q->head.store(head + 1, std::memory_order_release);
  return true;
}

void DrainRecordQueues(shm::RingWriter& ring) noexcept {
  for (ThreadQueue* q = g_queues.load(std::memory_order_acquire); q != nullptr; q = q->all_next) {
    uint64_t tail = q->tail.load(std::memory_order_relaxed);
    uint64_t head = q->head.load(std::memory_order_acquire);
    if (tail == head) continue;
    for (; tail != head; ++tail) ring.Push(q->records[tail % kThreadQueueRecords]);
    q->tail.store(tail, std::memory_order_release);
  }
}

}  // namespace ft::preload::internal
