// Clang's thread-safety analysis (-Wthread-safety, `make lint`): which mutex guards which field,
// which functions need it held or not held. The macros expand to clang's attributes under
// clang and to nothing under other compilers, so they cost nothing and change no code.
//
//   ft::Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;      // read or written only with mu_ held
//   void BumpLocked() REQUIRES(mu_);     // called with mu_ held
//   void Flush() EXCLUDES(mu_);          // takes mu_ itself: must not be called with it held
//
// libstdc++'s std::mutex carries no capability attribute, so annotated code locks an ft::Mutex
// (common/mutex.h) with ft::MutexLock. Where the analysis cannot follow (a lock taken in one
// function and released in another), a function opts out with NO_THREAD_SAFETY_ANALYSIS and a
// comment saying why. Modelled on LevelDB's port/thread_annotations.h and clang's
// ThreadSafetyAnalysis documentation (the capability spelling).
#ifndef FT_COMMON_THREAD_ANNOTATIONS_H_
#define FT_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define FT_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define FT_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are locks (a mutex) named `x` in diagnostics.
#ifndef CAPABILITY
#define CAPABILITY(x) FT_THREAD_ANNOTATION_(capability(x))
#endif
// On a class: an RAII holder of a lock (ft::MutexLock).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY FT_THREAD_ANNOTATION_(scoped_lockable)
#endif
// On a field: read or written only with `x` held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) FT_THREAD_ANNOTATION_(guarded_by(x))
#endif
// On a pointer field: what it points to is read or written only with `x` held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) FT_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif
// On a lock field: the order in which locks are taken.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) FT_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) FT_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
// On a function: called with the locks held (exclusively / shared), and they stay held.
#ifndef REQUIRES
#define REQUIRES(...) FT_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) FT_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif
// On a function: takes the locks itself, so the caller must not hold them.
#ifndef EXCLUDES
#define EXCLUDES(...) FT_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif
// On a function: acquires / releases the locks (no argument: `this`).
#ifndef ACQUIRE
#define ACQUIRE(...) FT_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) FT_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
// On a function: acquires the locks when it returns `result` (a try-lock).
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) FT_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif
// On a function: the analysis may assume the lock is held after it returns.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) FT_THREAD_ANNOTATION_(assert_capability(x))
#endif
// On a function: returns a reference to lock `x` (an accessor).
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) FT_THREAD_ANNOTATION_(lock_returned(x))
#endif
// On a function: not analysed (say why beside it).
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS FT_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif

#endif  // FT_COMMON_THREAD_ANNOTATIONS_H_
