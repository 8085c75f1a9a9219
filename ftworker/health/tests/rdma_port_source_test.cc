#include "ftworker/health/rdma_port_source.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "ftworker/health/tests/sysfs_tree.h"
#include "tests/util/log_capture.h"

namespace ft::worker::health {
namespace {

using testing::SysfsTree;

TEST(RdmaPortSourceTest, ACounterRiseIsOneSignalAndAResetIsABaseline) {
  SysfsTree t;
  t.AddPort("mlx5_1", 1);
  RdmaPortSource source(t.root());
  EXPECT_TRUE(source.Poll(1000).empty()) << "the first poll is the baseline";
  t.Write("class/infiniband/mlx5_1/ports/1/counters/link_downed", "2\n");
  t.Write("class/infiniband/mlx5_1/ports/1/counters/port_xmit_wait", "12345\n");
  std::vector<proto::HwSignal> s = source.Poll(2000);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].kind, "link-downed");
  EXPECT_EQ(s[0].device, "mlx5_1/1");
  EXPECT_EQ(s[0].value, 2);
  EXPECT_EQ(s[0].total, 2);
  EXPECT_TRUE(s[0].critical);
  EXPECT_EQ(s[0].source, "rdma");
  EXPECT_EQ(s[1].kind, "port-xmit-wait");
  EXPECT_FALSE(s[1].critical) << "congestion is not a failure";
  EXPECT_TRUE(source.Poll(3000).empty());
  t.Write("class/infiniband/mlx5_1/ports/1/counters/link_downed", "0\n");  // reset
  EXPECT_TRUE(source.Poll(4000).empty());
  t.Write("class/infiniband/mlx5_1/ports/1/counters/link_downed", "1\n");
  ASSERT_EQ(source.Poll(5000).size(), 1u);
}

TEST(RdmaPortSourceTest, APortLeavingActiveIsSaidOnceUntilItIsBack) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  RdmaPortSource source(t.root());
  (void)source.Poll(1000);
  t.Write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  std::vector<proto::HwSignal> s = source.Poll(2000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kind, "port-down");
  EXPECT_EQ(s[0].value, 1);
  EXPECT_EQ(s[0].device, "mlx5_0/1");
  EXPECT_NE(s[0].detail.find("1: DOWN"), std::string::npos) << s[0].detail;
  EXPECT_TRUE(s[0].critical);
  EXPECT_TRUE(source.Poll(3000).empty());
  t.Write("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  EXPECT_TRUE(source.Poll(4000).empty());
  t.Write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  EXPECT_EQ(source.Poll(5000).size(), 1u);
}

TEST(RdmaPortSourceTest, APortDownAtStartIsReported) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  t.Write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  RdmaPortSource source(t.root());
  EXPECT_EQ(source.Poll(1000).size(), 1u);
  EXPECT_TRUE(source.Poll(2000).empty()) << "once";
}

TEST(RdmaPortSourceTest, GarbledAndUnreadableCountersAreSkipped) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  RdmaPortSource source(t.root());
  (void)source.Poll(1000);
  t.Write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "garbage\n");
  t.Write("class/infiniband/mlx5_0/ports/1/counters/link_downed", "\n");
  std::filesystem::remove(t.root() + "/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors");
  t.Write("class/infiniband/mlx5_0/ports/1/counters/link_error_recovery", "3\n");
  test_util::LogCapture logs;
  std::vector<proto::HwSignal> s = source.Poll(2000);
  ASSERT_EQ(s.size(), 1u) << "only the readable counter that rose";
  EXPECT_EQ(s[0].kind, "link-error-recovery");
  for (int64_t t = 3000; t < 6000; t += 1000) EXPECT_TRUE(source.Poll(t).empty());
  EXPECT_EQ(logs.Count({"counters/symbol_error", "not a number"}), 1u) << "said once";
  EXPECT_EQ(logs.Count({"counters/link_downed", "not a number"}), 1u);
  EXPECT_EQ(logs.Count({"counters/port_rcv_errors"}), 0u) << "a missing counter is normal";
}

TEST(RdmaPortSourceTest, ADeviceAddedLaterIsFoundAtTheNextRescan) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  RdmaPortSource source(t.root(), std::chrono::milliseconds(5000));
  (void)source.Poll(1000);
  EXPECT_EQ(source.ports(), 1u);
  t.AddPort("mlx5_1", 1, "pci0000:00/0000:00:02.0", "0000:85:00.0");
  (void)source.Poll(2000);
  EXPECT_EQ(source.ports(), 1u) << "before the rescan period";
  (void)source.Poll(6000);  // its baseline
  EXPECT_EQ(source.ports(), 2u);
  t.Write("class/infiniband/mlx5_1/ports/1/counters/link_downed", "1\n");
  std::vector<proto::HwSignal> s = source.Poll(7000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].device, "mlx5_1/1");
}

TEST(RdmaPortSourceTest, ACounterThatCannotBeReadIsSkippedAndReadAgainLater) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1);
  RdmaPortSource source(t.root());
  (void)source.Poll(1000);
  test_util::LogCapture logs;
  // A directory where the file was: open succeeds, read fails (EISDIR) -- unreadable even as root.
  const std::string file = t.root() + "/class/infiniband/mlx5_0/ports/1/counters/symbol_error";
  std::filesystem::remove(file);
  std::filesystem::create_directory(file);
  t.Write("class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors", "4\n");
  std::vector<proto::HwSignal> s = source.Poll(2000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kind, "port-rcv-errors");
  EXPECT_EQ(s[0].value, 4);
  EXPECT_EQ(s[0].detail, "counters/port_rcv_errors 0 -> 4");
  EXPECT_TRUE(source.Poll(3000).empty());
  EXPECT_EQ(logs.Count({"counters/symbol_error", "skipped"}), 1u) << "unreadable: said once";
  std::filesystem::remove(file);
  t.Write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "7\n");
  s = source.Poll(4000);
  ASSERT_EQ(s.size(), 1u) << "the last value read stays its baseline";
  EXPECT_EQ(s[0].kind, "symbol-error");
  EXPECT_EQ(s[0].value, 7);
}

TEST(RdmaPortSourceTest, HwCountersAndTheirKinds) {
  SysfsTree t;
  t.AddPort("mlx5_3", 2);
  RdmaPortSource source(t.root());
  (void)source.Poll(1000);
  t.Write("class/infiniband/mlx5_3/ports/2/hw_counters/local_ack_timeout_err", "10\n");
  t.Write("class/infiniband/mlx5_3/ports/2/hw_counters/out_of_sequence", "3\n");
  std::vector<proto::HwSignal> s = source.Poll(2000);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].kind, "local-ack-timeout-err");
  EXPECT_EQ(s[0].device, "mlx5_3/2");
  EXPECT_EQ(s[0].unix_ms, 2000);
  EXPECT_EQ(s[1].kind, "out-of-sequence");
  EXPECT_EQ(s[1].detail, "hw_counters/out_of_sequence 0 -> 3");
  // A driver without hw_counters: nothing, and nothing else breaks.
  std::filesystem::remove_all(t.root() + "/class/infiniband/mlx5_3/ports/2/hw_counters");
  t.Write("class/infiniband/mlx5_3/ports/2/counters/link_downed", "1\n");
  s = source.Poll(3000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].kind, "link-downed");
}

TEST(RdmaPortSourceTest, AWallClockSetBackDoesNotPostponeTheRescan) {
  SysfsTree t;
  RdmaPortSource source(t.root(), std::chrono::milliseconds(10000));
  (void)source.Poll(1'000'000'000);
  t.AddPort("mlx5_0", 1);
  (void)source.Poll(1'000'000'000 - 3'600'000);  // an hour back
  EXPECT_EQ(source.ports(), 1u);
}

TEST(RdmaPortSourceTest, NoInfinibandDirectoryIsNoSignal) {
  SysfsTree t;
  RdmaPortSource source(t.root());
  EXPECT_TRUE(source.Poll(1000).empty());
  EXPECT_EQ(source.ports(), 0u);
}

}  // namespace
}  // namespace ft::worker::health
