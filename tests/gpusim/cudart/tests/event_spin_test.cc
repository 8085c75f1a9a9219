// The driver's rule for cudaEventSynchronize, kept under GPUSIM_SPIN_WAITS=1 (CTest
// gpusim.event_spin sets it; elsewhere these tests skip): a thread waiting for an event made
// without cudaEventBlockingSync busy-waits; with the flag, or on a device told
// cudaDeviceScheduleBlockingSync, it sleeps.
#include <time.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_util.h"

namespace gpusim_test {
namespace {

void CUDART_CB Sleep100ms(void*) { std::this_thread::sleep_for(100ms); }

double ThreadCpuS() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// This thread's CPU seconds in cudaEventSynchronize on an event with `flags` behind 100 ms of
// stream work.
double CpuOfAWait(unsigned flags) {
  cudaStream_t s = nullptr;
  cudaEvent_t ev = nullptr;
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaEventCreateWithFlags(&ev, flags), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(s, Sleep100ms, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  const double before = ThreadCpuS();
  EXPECT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  const double cpu = ThreadCpuS() - before;
  EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  return cpu;
}

bool SpinRuleOn() {
  const char* v = getenv("GPUSIM_SPIN_WAITS");
  return v != nullptr && std::string(v) == "1";
}

// A spinning wait runs for most of its 100 ms (at least 10 ms even at a load of 8 on 2 cores);
// a sleeping one for microseconds.
constexpr double kSpinAtLeastS = 0.010;
constexpr double kSleepAtMostS = 0.005;

TEST(EventSpin, SynchronizeSpinsUnlessTheEventBlocks) {
  if (!SpinRuleOn()) GTEST_SKIP() << "run by gpusim.event_spin (GPUSIM_SPIN_WAITS=1)";
  EXPECT_GT(CpuOfAWait(cudaEventDefault), kSpinAtLeastS);
  EXPECT_GT(CpuOfAWait(cudaEventDisableTiming), kSpinAtLeastS);
  EXPECT_LT(CpuOfAWait(cudaEventBlockingSync), kSleepAtMostS);
  EXPECT_LT(CpuOfAWait(cudaEventBlockingSync | cudaEventDisableTiming), kSleepAtMostS);
}

TEST(EventSpin, ADeviceToldToBlockSleepsInEveryWait) {
  if (!SpinRuleOn()) GTEST_SKIP() << "run by gpusim.event_spin (GPUSIM_SPIN_WAITS=1)";
  unsigned before = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&before), cudaSuccess);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
  EXPECT_LT(CpuOfAWait(cudaEventDefault), kSleepAtMostS);
  ASSERT_EQ(cudaSetDeviceFlags(before & ~cudaDeviceMapHost), cudaSuccess);
  EXPECT_GT(CpuOfAWait(cudaEventDefault), kSpinAtLeastS);
}

}  // namespace
}  // namespace gpusim_test
