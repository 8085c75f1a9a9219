// Table-driven: for every symbol in nccl.def and cudart.def, libft.so exports it, and a call
// through it reaches the real library (here the fake, loaded after libft.so) exactly once with
// the same argument bytes, NCCL through its pnccl* alias; the app gets the real return value.
// Runs twice under CTest: FT_ENABLE=1 (hooks active, segment created) and FT_ENABLE=0.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>

#include "preload/tests/forward_common.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/segment.h"

// Declarations of the symbols the headers do not declare (_ptsz variants, nvcc's internals).
#define FT_NCCL(ret, name, params, args, kind) extern "C" ret name params;
#include "shm/nccl.def"
#undef FT_NCCL
#define FT_CUDA(ret, name, params, args, kind) extern "C" ret name params;
#include "shm/cudart.def"
#undef FT_CUDA

namespace ft::preload::testing {
namespace {

using shm::RecordType;

// Arguments that are valid to look at: pointers point into a zeroed arena (libft.so reads
// through some, e.g. *comm after an init), integers are small (counts of ids or devices).
alignas(64) uint8_t g_arena[16][4096];

template <class T>
T MakeArg(size_t index) {
  using U = std::remove_cv_t<T>;
  U value;
  if constexpr (std::is_pointer_v<U>) {
    void* p = g_arena[index % 16];
    std::memcpy(&value, &p, sizeof(value));
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U>) {
    value = static_cast<U>(index % 3 + 1);
  } else {
    std::memset(static_cast<void*>(&value), static_cast<int>(0x41 + index), sizeof(value));
  }
  return value;
}

template <class R, class... A, size_t... I>
std::tuple<std::decay_t<A>...> MakeArgs(R (*)(A...), std::index_sequence<I...>) {
  return std::tuple<std::decay_t<A>...>(MakeArg<std::decay_t<A>>(I)...);
}

template <class R, class... A>
void CheckForwarding(const char* name, R (*fn)(A...), bool nccl) {
  void* self = dlopen("libft.so", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(self, nullptr) << "libft.so is not loaded";
  void* exported = dlsym(self, name);
  dlclose(self);
  ASSERT_NE(exported, nullptr) << name << " is not exported by libft.so";
  Dl_info info{};
  ASSERT_NE(dladdr(exported, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libft.so"), std::string::npos)
      << name << " resolves to " << info.dli_fname;
  // The program's own reference binds to libft.so too (it comes first).
  EXPECT_EQ(reinterpret_cast<void*>(fn), exported) << name;

  auto args = MakeArgs(fn, std::index_sequence_for<A...>{});
  uint64_t before_hash = 0;
  bool before_via = false;
  int before = 0;
  ft_fake_last_call(name, &before_hash, &before_via, &before);
  if constexpr (std::is_void_v<R>) {
    std::apply(fn, args);
  } else {
    R got = std::apply(fn, args);
    EXPECT_EQ(got, ExpectedResult<R>(name)) << name << " changed the real result";
  }
  uint64_t hash = 0;
  bool via = false;
  int count = 0;
  ASSERT_TRUE(ft_fake_last_call(name, &hash, &via, &count)) << name << " never reached the fake";
  EXPECT_EQ(count, before + 1) << name << " reached the real function " << count - before << " times";
  EXPECT_EQ(hash, std::apply([](const auto&... a) { return HashArgs(a...); }, args))
      << name << " forwarded different arguments";
  if (nccl) {
    EXPECT_TRUE(via) << name << " did not forward through p" << name;
  }
}

#define FT_NCCL(ret, name, params, args, kind) \
  TEST(ForwardNccl, name) { CheckForwarding(#name, static_cast<ret(*) params>(&::name), true); }
#include "shm/nccl.def"
#undef FT_NCCL

#define FT_CUDA(ret, name, params, args, kind) \
  TEST(ForwardCuda, name) { CheckForwarding(#name, static_cast<ret(*) params>(&::name), false); }
#include "shm/cudart.def"
#undef FT_CUDA

constexpr size_t kNcclCount = 0
#define FT_NCCL(ret, name, params, args, kind) +1
#include "shm/nccl.def"
#undef FT_NCCL
    ;

TEST(Export, OnlyTheListedSymbols) {
  // libft.so exports exactly the wrappers: its static copies of common/, shm/ and fmt stay
  // hidden, and the functions it only calls (FT_CUDA_REAL) are not interposed.
  void* self = dlopen("libft.so", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(self, nullptr);
  for (const char* hidden : {"cudaEventRecord", "cudaEventQuery", "cudaStreamIsCapturing",
                             "_ZN2ft6Status2OkEv", "pncclAllReduce"}) {
    void* p = dlsym(self, hidden);
    Dl_info info{};
    if (p != nullptr && dladdr(p, &info) != 0) {
      EXPECT_EQ(std::string(info.dli_fname).find("libft.so"), std::string::npos)
          << hidden << " is exported by libft.so";
    }
  }
  dlclose(self);
  EXPECT_EQ(kNcclCount, 27u);
}

std::string OwnSegment() {
  // FT_JOB is set by the test's CTest entry; rank unknown.
  return shm::SegmentName("preload_forward_test", -1, getpid());
}

// FT_ENABLE=1: the calls above went through the hooks, which wrote the segment.
TEST(SegmentActive, CountsCallsAndRecordsErrors) {
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommCount(comm, nullptr), ExpectedResult<ncclResult_t>("ncclCommCount"));
  std::unique_ptr<shm::Segment> segment;
  ASSERT_TRUE(shm::Segment::Attach(OwnSegment(), &segment).ok());
  EXPECT_GT(segment->header()->call_count.load(), 0u);
  EXPECT_EQ(segment->header()->state.load(), static_cast<uint32_t>(shm::ProcessState::kRunning));
  // App threads' records reach the ring at the poller's next round (record_queue.h).
  std::array<shm::Record, 4096> records;
  size_t errors = 0;
  for (int attempt = 0; attempt < 500 && errors == 0; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    size_t n = shm::RingReader(*segment).Peek(records.data(), records.size());
    for (size_t i = 0; i < n; ++i) {
      errors += records[i].type == static_cast<uint16_t>(RecordType::kApiError);
    }
  }
  EXPECT_GT(errors, 0u) << "fake failures produced no error record";
}

// FT_ENABLE=0: pure pass-through, no segment.
TEST(SegmentAbsent, NoSegmentWhenDisabled) {
  EXPECT_EQ(ncclCommCount(nullptr, nullptr), ExpectedResult<ncclResult_t>("ncclCommCount"));
  std::unique_ptr<shm::Segment> segment;
  EXPECT_FALSE(shm::Segment::Attach(OwnSegment(), &segment).ok());
}

}  // namespace
}  // namespace ft::preload::testing
