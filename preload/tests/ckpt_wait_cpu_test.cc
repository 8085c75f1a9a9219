// What the checkpoint agent's waits for its own copies cost the CPU. On a GPU,
// cudaEventSynchronize on an event made without cudaEventBlockingSync busy-waits, and the agent's
// events are made so; GPUSIM_SPIN_WAITS=1 makes gpusim keep that rule. ckpt_slow_copy_shim.so
// (preloaded after libft.so) slows the agent's device-to-host copies, as a busy link would, so
// the save spends most of its time waiting for them.
// CTest preload.ckpt_wait_cpu (CkptWaitCpu; FT_CKPT_CHECKSUM_THREADS=2, so the agent's thread
// only issues copies and waits: its checksums run on the helpers).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "preload/tests/ckpt_test_util.h"
#include "tests/util/thread_named.h"

namespace ft::preload::ckpt_test {
namespace {

constexpr size_t kBytes = 16u << 20;  // 16 chunks of FT_CKPT_CHUNK=1mb
constexpr long kCopyDelayUs = 5000;   // per chunk: the save waits about 80 ms for its copies

// The CPU time the agent's thread ("ft-ckpt") has run, in ns (its /proc schedstat), or nullopt
// where no such thread or no schedstat is.
std::optional<uint64_t> AgentCpuNs() {
  const pid_t tid = test_util::ThreadNamed("ft-ckpt");
  if (tid == 0) return std::nullopt;
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  uint64_t run_ns = 0;
  if (stat >> run_ns) return run_ns;
  return std::nullopt;
}

TEST(CkptWaitCpu, AJustInTimeSaveWaitsForItsCopiesAsleep) {
  auto delay_us = reinterpret_cast<void (*)(long)>(dlsym(RTLD_DEFAULT, "gpusim_shim_delay_d2h_us"));
  ASSERT_NE(delay_us, nullptr) << "ckpt_slow_copy_shim.so is not preloaded";
  ASSERT_EQ(Env("GPUSIM_SPIN_WAITS"), "1") << "without gpusim's spin rule this test proves nothing";
  unlink(ArenaPath().c_str());
  void* param = nullptr;
  ASSERT_EQ(cudaMalloc(&param, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(param, 7, kBytes), cudaSuccess);
  ASSERT_EQ(ft_register("param", param, kBytes), FT_OK) << ft_last_error();
  ASSERT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  // A first save starts the agent's thread and its CUDA stream and events.
  auto first = WaitAck(Post(shm::CommandType::kSave, "warm"));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->result, static_cast<int32_t>(StatusCode::kOk)) << first->message;
  std::optional<uint64_t> before = AgentCpuNs();
  if (!before) GTEST_SKIP() << "no schedstat for the agent's thread on this kernel";

  delay_us(kCopyDelayUs);
  const auto t0 = std::chrono::steady_clock::now();
  auto ack = WaitAck(Post(shm::CommandType::kSave, "slow-link"));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  delay_us(0);
  std::optional<uint64_t> after = AgentCpuNs();
  ASSERT_TRUE(ack);
  ASSERT_EQ(ack->result, static_cast<int32_t>(StatusCode::kOk)) << ack->message;
  ASSERT_TRUE(after);
  const double cpu_s = static_cast<double>(*after - *before) / 1e9;
  std::printf("the agent's thread ran %.4f s of a %.4f s save\n", cpu_s, wall_s);
  // Spinning, the agent's thread runs for the whole wait (about the save's time); asleep
  // between polls it runs for a few milliseconds (0.009 s of 0.083 s idle here; 0.028 s of
  // 0.102 s once, at 50 us polls). Half leaves room for a loaded machine, where each wake-up
  // costs more (and a spinning thread gets less than all of its wall time).
  EXPECT_LT(cpu_s, wall_s / 2) << "the agent's thread ran " << cpu_s << " s of a " << wall_s
                               << " s save that waited on its copies: it spins";
  EXPECT_GE(wall_s, 16 * kCopyDelayUs / 1e6) << "the copies were not slowed: the shim is not in the path";
}

}  // namespace
}  // namespace ft::preload::ckpt_test
