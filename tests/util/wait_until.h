// Waiting in tests: poll a condition until it holds instead of sleeping a fixed time and
// hoping the other thread or process got there. The limit only ends a test whose condition
// never comes (a broken build would otherwise hang it); it is generous because a loaded
// 2-core machine can stall a process for seconds, and a passing test never waits it out.
#ifndef FT_TESTS_UTIL_WAIT_UNTIL_H_
#define FT_TESTS_UTIL_WAIT_UNTIL_H_

#include <chrono>
#include <thread>

namespace ft::test_util {

// True as soon as `condition()` is; false if it still is not after `limit`.
template <typename Condition>
bool WaitUntil(Condition&& condition, std::chrono::milliseconds limit = std::chrono::seconds(20),
               std::chrono::milliseconds poll = std::chrono::milliseconds(1)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= end) return condition();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace ft::test_util

#endif  // FT_TESTS_UTIL_WAIT_UNTIL_H_
