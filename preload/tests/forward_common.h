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

#include "common/hash.h"

namespace ft::preload::testing {

// The bytes of every argument, in order.
template <class... A>
uint64_t HashArgs(const A&... args) {
  uint64_t h = kFnv1a64Basis;
  ((h = Fnv1a64Bytes(&args, sizeof(A), h)), ...);
  return h;
}

// Each fake returns a value that depends on its name, half of them failures, so the test
// sees both the success and the error path pass through unchanged. Never ncclInProgress.
template <class R>
R ExpectedResult(std::string_view name) {
  bool fail = Fnv1a64(name) % 2 == 1;
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
