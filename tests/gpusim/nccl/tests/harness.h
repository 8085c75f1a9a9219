// Multi-process test harness: a test body runs in n forked children (one per rank); children
// report through their exit status (0 = every CHILD_CHECK held) and stderr; the parent asserts.
// Every /dev/shm segment a test makes carries a per-test prefix (GPUSIM_NCCL_SHM_PREFIX) so the
// fixture can prove none leaked and remove them even when a child was killed.
#ifndef GPUSIM_NCCL_TESTS_HARNESS_H_
#define GPUSIM_NCCL_TESTS_HARNESS_H_

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

namespace gpusim_test {

extern int g_rank;  // in a child: its rank (for messages)

#define CHILD_CHECK(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      ::gpusim_test::ChildFail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                 \
    }                                                                                       \
  } while (0)
#define CHILD_NCCL(call)                                                                     \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      ::gpusim_test::ChildFail(__FILE__, __LINE__, #call, "returned %d (%s): %s", (int)r_,   \
                               ncclGetErrorString(r_), ncclGetLastError(nullptr));           \
    }                                                                                        \
  } while (0)
#define CHILD_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      ::gpusim_test::ChildFail(__FILE__, __LINE__, #call, "returned %d (%s)", (int)e_,     \
                               cudaGetErrorString(e_));                                    \
    }                                                                                      \
  } while (0)

[[noreturn]] void ChildFail(const char* file, int line, const char* expr, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Forks n children running body(rank); waits at most timeout_s for all, kills the rest.
// Returns each child's outcome: exit code, or 128+signal, or -1 if it had to be killed.
std::vector<int> RunRanks(int n, double timeout_s, const std::function<void(int rank)>& body);

// ASSERTs that every child exited 0.
void ExpectAllOk(const std::vector<int>& outcomes);

ncclUniqueId NewId();
double NowS();
double ProcessCpuS();

// Names of the /dev/shm entries with this test process's prefix.
std::vector<std::string> OurSegments();

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  bool expect_no_leftover_segments_ = true;
};

}  // namespace gpusim_test

#endif  // GPUSIM_NCCL_TESTS_HARNESS_H_
