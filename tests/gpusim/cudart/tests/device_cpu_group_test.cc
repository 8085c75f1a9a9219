// GPUSIM_DEVICE_CPU_GROUP: every stream worker (the threads that run kernels and collectives)
// writes its thread id into the named file, as into a cgroup v1 `tasks` file, so that the
// simulated devices keep a CPU share of their own while their process is starved. The variable
// is read once per process: ctest runs each case in its own process with it set
// (gpusim.device_cpu_group, gpusim.device_cpu_group_unwritable).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace gpusim_test {
namespace {

void NoOp(void*) {}

// `n` new streams, each given work (which starts its worker) and waited for; their workers live
// until the streams are destroyed.
std::vector<cudaStream_t> RunOnNewStreams(int n) {
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (cudaStream_t& s : streams) {
    EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(s, NoOp, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  return streams;
}

void Destroy(const std::vector<cudaStream_t>& streams) {
  for (cudaStream_t s : streams) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

std::string ThreadName(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(DeviceCpuGroup, EveryStreamWorkerMovesItselfThere) {
  const char* path = std::getenv("GPUSIM_DEVICE_CPU_GROUP");
  ASSERT_NE(path, nullptr) << "run by ctest as gpusim.device_cpu_group";
  std::ofstream(path, std::ios::trunc).close();
  const std::vector<cudaStream_t> streams = RunOnNewStreams(3);
  std::ifstream in(path);
  std::set<std::string> tids;
  for (std::string tid; std::getline(in, tid);) tids.insert(tid);
  ASSERT_EQ(tids.size(), 3u) << "one line per stream worker";
  for (const std::string& tid : tids) {
    EXPECT_EQ(ThreadName(tid).rfind("gpusim-s", 0), 0u) << "thread " << tid << " is " << ThreadName(tid);
  }
  Destroy(streams);
}

// A file a worker cannot write: the work runs all the same, and the failure is said once.
TEST(DeviceCpuGroupUnwritable, WorkRunsAndTheFailureIsSaidOnce) {
  ASSERT_NE(std::getenv("GPUSIM_DEVICE_CPU_GROUP"), nullptr) << "run by ctest as gpusim.device_cpu_group_unwritable";
  testing::internal::CaptureStderr();
  Destroy(RunOnNewStreams(2));
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string said = "cannot move a stream worker there";
  const size_t first = err.find(said);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(said, first + 1), std::string::npos) << "said more than once:\n" << err;
}

}  // namespace
}  // namespace gpusim_test
