#include "preload/hook_failures.h"

#include <atomic>
#include <stdexcept>

#include "preload/runtime_state.h"

namespace ft::preload::internal {
namespace {

std::atomic<uint32_t> g_injected{0};

}  // namespace

void CountHookFailure(shm::HookPlace place) noexcept {
  Runtime* rt = g_rt;
  if (rt == nullptr || !rt->segment) return;
  shm::CountHookFailure(rt->segment->header(), static_cast<uint32_t>(place));
}

void SetInjectedFailure(uint32_t place) noexcept { g_injected.store(place, std::memory_order_release); }

void MaybeFail(shm::HookPlace place) {
  if (g_injected.load(std::memory_order_relaxed) == static_cast<uint32_t>(place)) {
    throw std::runtime_error("FT_TEST_FAIL_HOOK");
  }
}

}  // namespace ft::preload::internal

namespace ft::preload {

void NoteMissingReal() noexcept { internal::CountHookFailure(shm::HookPlace::kMissingSymbol); }

}  // namespace ft::preload
