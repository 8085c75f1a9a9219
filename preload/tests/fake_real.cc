// A fake "real" CUDA runtime and NCCL for the forwarding test, generated from the same .def
// lists as libft.so: every function records its arguments' fingerprint and returns
// ExpectedResult. NCCL functions exist as a strong pncclX and a separate weak ncclX (as in
// the real library) so the test can tell which one libft.so forwarded to. The functions
// libft.so only calls itself (FT_CUDA_REAL) refuse with cudaErrorNotSupported, which also
// exercises libft.so's fail-open paths.
#include <map>
#include <mutex>
#include <string>

#include "preload/tests/forward_common.h"

#define FT_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Call {
  uint64_t hash = 0;
  bool via_profiling = false;
  int count = 0;
};

std::mutex g_mu;
std::map<std::string, Call>& Calls() {
  static auto* calls = new std::map<std::string, Call>;
  return *calls;
}

template <class R, class... A>
R Note(const char* name, bool via_profiling, const A&... args) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Call& c = Calls()[name];
    c.hash = ft::preload::testing::HashArgs(args...);
    c.via_profiling = via_profiling;
    ++c.count;
  }
  return ft::preload::testing::ExpectedResult<R>(name);
}

}  // namespace

FT_FAKE_EXPORT bool ft_fake_last_call(const char* name, uint64_t* hash, bool* via_profiling,
                                      int* count) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Calls().find(name);
  if (it == Calls().end()) return false;
  *hash = it->second.hash;
  *via_profiling = it->second.via_profiling;
  *count = it->second.count;
  return true;
}

// Variadic helper: `Note<ret>(#name, via, args...)` from a parenthesised argument list.
#define FT_FAKE_ARGS(...) __VA_OPT__(, ) __VA_ARGS__
#define FT_FAKE_EXPAND(x) x

#define FT_NCCL(ret, name, params, args, kind)                                          \
  FT_FAKE_EXPORT ret p##name params {                                                   \
    return Note<ret>(#name, true FT_FAKE_EXPAND(FT_FAKE_ARGS args));                    \
  }                                                                                     \
  extern "C" __attribute__((weak, visibility("default"))) ret name params {            \
    return Note<ret>(#name, false FT_FAKE_EXPAND(FT_FAKE_ARGS args));                   \
  }
#include "shm/nccl.def"
#undef FT_NCCL

#define FT_CUDA(ret, name, params, args, kind)                              \
  FT_FAKE_EXPORT ret name params {                                          \
    return Note<ret>(#name, false FT_FAKE_EXPAND(FT_FAKE_ARGS args));       \
  }
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define FT_CUDA_REAL(ret, name, params) \
  FT_FAKE_EXPORT ret name params { return cudaErrorNotSupported; }
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
