// Shared by the fake "real" libraries (fake_real.cc) and the export/forwarding test: how a
// call's arguments are fingerprinted and what each fake returns.
#ifndef FT_PRELOAD_TESTS_FORWARD_COMMON_H_
#define FT_PRELOAD_TESTS_FORWARD_COMMON_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace ft::preload::testing {

inline uint64_t Fnv(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The bytes of every argument, in order.
template <class... A>
uint64_t HashArgs(const A&... args) {
  uint64_t h = 0xcbf29ce484222325ull;
  ((h = Fnv(&args, sizeof(A), h)), ...);
  return h;
}

// Each fake returns a value that depends on its name, half of them failures, so the test
// sees both the success and the error path pass through unchanged. Never ncclInProgress.
template <class R>
R ExpectedResult(std::string_view name) {
  bool fail = Fnv(name.data(), name.size(), 0xcbf29ce484222325ull) % 2 == 1;
  if constexpr (std::is_same_v<R, ncclResult_t>) {
    return fail ? ncclInvalidUsage : ncclSuccess;
  } else if constexpr (std::is_same_v<R, cudaError_t>) {
    return fail ? cudaErrorInvalidValue : cudaSuccess;
  } else if constexpr (std::is_void_v<R>) {
    return;
  } else {
    return R{};
  }
}

}  // namespace ft::preload::testing

// Exported by the fake library: the last call of `name` (arguments' fingerprint, whether it
// arrived through the pnccl* alias) and how many calls it had. False when never called.
extern "C" bool ft_fake_last_call(const char* name, uint64_t* hash, bool* via_profiling, int* count);

#endif  // FT_PRELOAD_TESTS_FORWARD_COMMON_H_
