#include "ftworker/health/health_sampler.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "ftworker/health/tests/sysfs_tree.h"

namespace ft::worker::health {
namespace {

using testing::SysfsTree;

// The sampler's thread reads while the owner's thread takes (run under ThreadSanitizer by
// `make tsan`); a source that cannot open is left out, the others still run.
TEST(HealthSamplerTest, SignalsReadOnItsThreadReachTheOwner) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  HealthSampler sampler({.nvml_library = "/nonexistent/libnvidia-ml.so.1",
                         .sysfs_root = t.root(),
                         .kmsg_path = "/nonexistent/kmsg",
                         .interval = std::chrono::milliseconds(20)});
  sampler.Start();
  EXPECT_EQ(sampler.sources(), (std::vector<std::string>{"rdma"}));
  // Its baseline first: wait for a few polls before the counter moves.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sampler.cost().polls < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(sampler.cost().polls, 3u);
  t.Write("class/infiniband/mlx5_0/ports/1/counters/link_downed", "1\n");
  std::vector<proto::HwSignal> got;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    got = sampler.Take();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, "link-downed");
  EXPECT_EQ(sampler.dropped(), 0u);
}

TEST(HealthSamplerTest, NothingOpenIsNoSourceAndNoSignal) {
  HealthSampler sampler({.nvml_library = "", .sysfs_root = "", .kmsg_path = "", .interval = std::chrono::milliseconds(10)});
  sampler.OpenSources();
  EXPECT_TRUE(sampler.sources().empty());
  EXPECT_TRUE(sampler.PollOnce(1000).empty());
}

}  // namespace
}  // namespace ft::worker::health
