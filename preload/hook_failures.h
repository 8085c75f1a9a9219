// libft.so internal: counting the failures it swallows (shm/hook_failures.h) in its own
// segment, and FT_TEST_FAIL_HOOK's injected failure. Any thread; lock-free; never throws.
#ifndef FT_PRELOAD_HOOK_FAILURES_H_
#define FT_PRELOAD_HOOK_FAILURES_H_

#include "shm/hook_failures.h"

namespace ft::preload::internal {

// Counts one swallowed failure at `place` (nothing before the segment exists).
void CountHookFailure(shm::HookPlace place) noexcept;

// FT_TEST_FAIL_HOOK: set once by Init; 0 = none.
void SetInjectedFailure(uint32_t place) noexcept;
// Throws at the place FT_TEST_FAIL_HOOK names, as a real failure there would; call it inside
// the place's try block.
void MaybeFail(shm::HookPlace place);

// Runs `body` (a hook's work); anything it throws is swallowed and counted at `place`.
template <class F>
void Swallow(shm::HookPlace place, F&& body) noexcept {
  try {
    MaybeFail(place);
    body();
  } catch (...) {
    CountHookFailure(place);
  }
}

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_HOOK_FAILURES_H_
