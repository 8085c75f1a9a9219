// ft::Seqlock: one writer publishes a group of fields, any number of readers copy the group
// and learn whether their copy is consistent (all from one write). Readers never block the
// writer and the writer never waits: what libft.so's hot paths need (a reader may be another
// process, and may be stopped or dead at any moment).
//
// It lives in shared memory: one std::atomic<uint32_t> and nothing else (4 bytes, 4-aligned,
// standard layout, no pointers, lock-free), so it may be a field of a struct mapped by two
// processes built at different times (shm/layout.h's CommSlot holds two, at pinned offsets).
// All-zero bytes are a valid, unwritten Seqlock.
//
// The rules (common/tests/seqlock_test.cc hammers them, also under `make tsan`):
//  - The protected fields are std::atomic<T> (lock-free T): a reader racing the writer reads
//    them while they change, which is a data race, undefined, for plain fields.
//  - One writer per Seqlock at a time, ever: the owner (a thread) is the caller's rule; two
//    writers interleaving their BeginWrite/EndWrite break the version's parity.
//  - The writer changes the fields only between BeginWrite and EndWrite, with Seqlock::Store.
//    It may read them back with relaxed loads (it is their only writer).
//  - A reader loads the fields only inside Read's `copy` (or between ReadBegin and
//    ReadValidate), with Seqlock::Load, and uses what it copied only when Read returned true.
//    The copy must not act on the values (follow a pointer, index an array without a bound)
//    before then: a torn copy may hold any mix of old and new values.
//  - A reader whose Read returned true for version v sees every effect the writer had before
//    the EndWrite that made v (an event recorded, a buffer filled), as after a mutex.
//
// Memory orders, without fences (H.-J. Boehm, "Can seqlocks get along with programming
// language memory models?", 2012; ThreadSanitizer does not model fences, and it understands
// this form): BeginWrite makes the version odd (relaxed); every field is stored with release;
// EndWrite makes it even again with release. A reader loads the version with acquire, the
// fields with acquire, then the version again (relaxed). Why it holds: a reader that loads any
// value a write stored synchronises with that release store, which BeginWrite's odd version
// precedes in the writer's order, so its second version load sees that odd version or a later
// one and the copy is refused; a reader that saw no new value copied only the previous write's
// values, which the first acquire load (of that write's even EndWrite) made visible. On x86
// and arm64 release stores and acquire loads cost what plain ones do.
#ifndef FT_COMMON_SEQLOCK_H_
#define FT_COMMON_SEQLOCK_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>

namespace ft {

class Seqlock {
 public:
  // Writer side (the owner thread only).
  void BeginWrite() noexcept {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void EndWrite() noexcept {
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // A protected field's store, between BeginWrite and EndWrite.
  template <typename T>
  static void Store(std::atomic<T>& field, std::type_identity_t<T> value) noexcept {
    field.store(value, std::memory_order_release);
  }

  // Reader side. A protected field's load, inside a read.
  template <typename T>
  static T Load(const std::atomic<T>& field) noexcept {
    return field.load(std::memory_order_acquire);
  }
  // One read, step by step: the version before the copy; odd means a write is in progress
  // (do not copy, try again).
  uint32_t ReadBegin() const noexcept { return version_.load(std::memory_order_acquire); }
  // After the copy: true when no write began since ReadBegin returned `begin` (even).
  bool ReadValidate(uint32_t begin) const noexcept {
    return (begin & 1) == 0 && version_.load(std::memory_order_relaxed) == begin;
  }
  // Runs `copy` (Seqlock::Load of the fields into the caller's variables) until one run saw
  // the same even version before and after, at most `attempts` times; false when a writer was
  // busy every time (the caller reads again later). `version`, when given, receives the
  // version of the consistent copy. A busy writer may be preempted mid-write on a loaded
  // core: a reader that finds it so yields the processor before trying again.
  template <typename Copy>
  bool Read(int attempts, Copy&& copy, uint32_t* version = nullptr) const {
    for (int i = 0; i < attempts; ++i) {
      uint32_t begin = ReadBegin();
      if (begin & 1) {
        std::this_thread::yield();
        continue;
      }
      copy();
      if (ReadValidate(begin)) {
        if (version != nullptr) *version = begin;
        return true;
      }
    }
    return false;
  }

  // The version now (relaxed): a hint that something changed since a version read before,
  // never evidence that a copy is consistent.
  uint32_t version() const noexcept { return version_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> version_{0};
};

static_assert(sizeof(Seqlock) == 4 && alignof(Seqlock) == 4);
static_assert(std::is_standard_layout_v<Seqlock>);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace ft

#endif  // FT_COMMON_SEQLOCK_H_
