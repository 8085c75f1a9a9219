// libft.so with a CUDA runtime it cannot find by name: a library loaded with RTLD_LOCAL links
// the runtime under another soname (foreign_user.cc). Its calls reach libft.so's wrappers,
// which must find the real functions among the loaded objects and behave as without
// libft.so; they used to answer an invented error instead. This program links no CUDA.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/status.h"
#include "shm/hook_failures.h"
#include "shm/segment.h"

namespace {

TEST(ForeignRuntime, CudaCallsThroughLibftReachARuntimeLoadedLocallyUnderAnotherName) {
  ASSERT_EQ(dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD), nullptr)
      << "the usual runtime must not be loaded here, or the test proves nothing";
  void* user = dlopen(FT_FOREIGN_USER, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(user, nullptr) << dlerror();
  auto run = reinterpret_cast<int (*)()>(dlsym(user, "ft_foreign_run"));
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run(), 0) << "a CUDA call failed (cudaError_t), or -1: wrong data";
  EXPECT_EQ(run(), 0) << "second run";

  // The calls went through libft.so (it made its segment at the first one) and it found every
  // real function it needed.
  std::unique_ptr<ft::shm::Segment> segment;
  ft::Status st = ft::shm::Segment::Attach(
      ft::shm::SegmentName("preload_foreign_runtime_test", -1, getpid()), &segment);
  ASSERT_TRUE(st.ok()) << st.ToString() << " (is LD_PRELOAD=libft.so set?)";
  EXPECT_GT(segment->header()->call_count.load(), 0u);
  for (const auto& f : ft::shm::SnapshotHookFailures(segment->header())) {
    ADD_FAILURE() << "hook failure at " << ft::shm::HookPlaceName(f.place) << " x" << f.count;
  }
}

// The same for NCCL: pncclX found in libnccl-ftrenamed.so.2 (the CUDA runtime it needs is the
// usual one, found by soname).
TEST(ForeignRuntime, NcclCallsThroughLibftReachALibraryLoadedLocallyUnderAnotherName) {
  ASSERT_EQ(dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD), nullptr)
      << "the usual NCCL must not be loaded here, or the test proves nothing";
  void* user = dlopen(FT_FOREIGN_NCCL_USER, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(user, nullptr) << dlerror();
  auto run = reinterpret_cast<int (*)()>(dlsym(user, "ft_foreign_nccl_run"));
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run(), 0) << "1000 + ncclResult_t, a cudaError_t, or -1: wrong data";
  std::unique_ptr<ft::shm::Segment> segment;
  ft::Status st = ft::shm::Segment::Attach(
      ft::shm::SegmentName("preload_foreign_runtime_test", -1, getpid()), &segment);
  ASSERT_TRUE(st.ok()) << st.ToString() << " (is LD_PRELOAD=libft.so set?)";
  EXPECT_GT(segment->header()->call_count.load(), 0u);
  for (const auto& f : ft::shm::SnapshotHookFailures(segment->header())) {
    ADD_FAILURE() << "hook failure at " << ft::shm::HookPlaceName(f.place) << " x" << f.count;
  }
}

}  // namespace
