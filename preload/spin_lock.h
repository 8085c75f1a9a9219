// A spinlock for app threads (libft.so internal): in-flight table slot claims. Never taken by
// the poller: an app thread must never wait on it.
#ifndef FT_PRELOAD_SPIN_LOCK_H_
#define FT_PRELOAD_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>

#include "common/thread_annotations.h"

namespace ft::preload::internal {

// A lock held for a few instructions; never across a call into CUDA, NCCL or the kernel, never
// around an allocation.
class CAPABILITY("spinlock") SpinLock {
 public:
  void lock() noexcept ACQUIRE() {
    int spins = 0;
    while (flag_.test_and_set(std::memory_order_acquire)) {
      if (++spins > 64) sched_yield();
    }
  }
  void unlock() noexcept RELEASE() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

class SCOPED_CAPABILITY SpinGuard {
 public:
  explicit SpinGuard(SpinLock& lock) ACQUIRE(lock) : lock_(lock) { lock_.lock(); }
  ~SpinGuard() RELEASE() { lock_.unlock(); }

 private:
  SpinLock& lock_;
};

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_SPIN_LOCK_H_
