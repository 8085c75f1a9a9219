// ft::Mutex, ft::MutexLock, ft::CondVar: std::mutex and std::condition_variable with clang's
// capability attributes (common/thread_annotations.h), so `make lint` checks every GUARDED_BY
// field against the locks really held. libstdc++'s std::mutex carries none, and std::lock_guard
// or std::unique_lock over it are invisible to the analysis. Same costs and semantics as the
// std types (non-recursive, not fork-safe); as LevelDB's port::Mutex and port::CondVar.
#ifndef FT_COMMON_MUTEX_H_
#define FT_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace ft {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (where it cannot see that); checks nothing.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard); Unlock and Lock let a scope drop it around a
// slow call and take it again (std::unique_lock), and the analysis follows both.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable over an ft::Mutex the caller holds (std::condition_variable). Waits
// without a predicate may wake spuriously: callers wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held, by the caller
  }
  // False when `deadline` passed (the caller re-checks its condition either way).
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool woke = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  // The same, until `pred()` holds (checked under the lock; true at return unless the
  // deadline passed first). `pred` runs with the lock held: a lambda reading guarded fields
  // says so, `[&]() REQUIRES(mu_) { return done_; }`, and the analysis checks its body. (Only
  // the bodies of Wait and WaitUntil are not analysed: std::condition_variable is not annotated.)
  template <typename Pred>
  void Wait(Mutex* mu, Pred pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();
  }
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline, Pred pred)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool ok = cv_.wait_until(lock, deadline, pred);
    lock.release();
    return ok;
  }
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Pred pred) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout, pred);  // as wait_for is defined
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ft

#endif  // FT_COMMON_MUTEX_H_
