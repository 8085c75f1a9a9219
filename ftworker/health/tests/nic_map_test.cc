#include "ftworker/health/nic_map.h"

#include <gtest/gtest.h>

#include "ftworker/health/rank_devices.h"
#include "ftworker/health/tests/sysfs_tree.h"

namespace ft::worker::health {
namespace {

using testing::SysfsTree;

// Two switches: GPUs 18 and 2a with mlx5_0 under one, GPU 3a with mlx5_1 under the other.
void TwoSwitches(SysfsTree* t) {
  t->AddPort("mlx5_0", 1, "pci0000:00/0000:00:01.0", "0000:05:00.0");
  t->AddPort("mlx5_1", 1, "pci0000:00/0000:00:02.0", "0000:85:00.0");
  t->AddPci("0000:18:00.0", "pci0000:00/0000:00:01.0");
  t->AddPci("0000:2a:00.0", "pci0000:00/0000:00:01.0");
  t->AddPci("0000:3a:00.0", "pci0000:00/0000:00:02.0");
}

TEST(NicMapTest, TheNicUnderTheGpusSwitchIsNearest) {
  SysfsTree t;
  TwoSwitches(&t);
  EXPECT_EQ(NearestNic(t.root(), "0000:2A:00.0"), "mlx5_0/1");
  EXPECT_EQ(NearestNic(t.root(), "00000000:3a:00.0"), "mlx5_1/1");
  EXPECT_EQ(NearestNic(t.root(), "0000:99:00.0"), "") << "a GPU not in the tree";
  EXPECT_EQ(NearestNic(t.root(), "not a bus id"), "");
}

TEST(NicMapTest, TheSameSwitchBeatsTheSameRootComplex) {
  SysfsTree t;
  // Root complex 00: a switch (01.0 -> 02:00.0 -> 03:08.0) holding GPU 18 and mlx5_2; mlx5_0
  // hangs off the root port beside it; mlx5_1 is on another root complex.
  t.AddPort("mlx5_0", 1, "pci0000:00/0000:00:02.0", "0000:0a:00.0");
  t.AddPort("mlx5_1", 1, "pci0000:80/0000:80:01.0", "0000:85:00.0");
  t.AddPort("mlx5_2", 1, "pci0000:00/0000:00:01.0/0000:02:00.0/0000:03:08.0", "0000:19:00.0");
  t.AddPci("0000:18:00.0", "pci0000:00/0000:00:01.0/0000:02:00.0/0000:03:08.0");
  t.AddPci("0000:81:00.0", "pci0000:80/0000:80:03.0");
  t.AddPci("0000:2a:00.0", "pci0000:00/0000:00:03.0");
  EXPECT_EQ(NearestNic(t.root(), "0000:18:00.0"), "mlx5_2/1");
  EXPECT_EQ(NearestNic(t.root(), "0000:81:00.0"), "mlx5_1/1") << "the same root complex";
  // 2a shares only root complex 00 with mlx5_0 and mlx5_2: a tie, the first by name.
  EXPECT_EQ(NearestNic(t.root(), "0000:2a:00.0"), "mlx5_0/1");
}

TEST(NicMapTest, TheFirstActivePortElsePortOne) {
  SysfsTree t;
  t.AddPort("mlx5_0", 1, "pci0000:00/0000:00:01.0", "0000:05:00.0");
  t.Write("class/infiniband/mlx5_0/ports/2/state", "4: ACTIVE\n");
  t.Write("class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  t.AddPci("0000:18:00.0", "pci0000:00/0000:00:01.0");
  EXPECT_EQ(NearestNic(t.root(), "0000:18:00.0"), "mlx5_0/2");
  t.Write("class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n");
  EXPECT_EQ(NearestNic(t.root(), "0000:18:00.0"), "mlx5_0/1") << "none active: port 1";
}

TEST(NicMapTest, NoRdmaDeviceIsNoNic) {
  SysfsTree t;
  t.AddPci("0000:18:00.0", "pci0000:00/0000:00:01.0");
  EXPECT_EQ(NearestNic(t.root(), "0000:18:00.0"), "");
}

TEST(RankDevicesTest, SignalsGoToTheRanksOfTheirGpuNicOrPid) {
  SysfsTree t;
  TwoSwitches(&t);
  RankDevices devices(t.root());
  devices.Update({{4, 1004, "0000:18:00.0"}, {5, 1005, "0000:2A:00.0"}, {6, 1006, "0000:3a:00.0"}, {7, 1007, ""}});
  EXPECT_EQ(devices.NicOf(5), "mlx5_0/1");
  EXPECT_EQ(devices.GpuOf(7), "");
  proto::HwSignal xid;
  xid.source = "nvml";
  xid.kind = "xid";
  xid.device = "0000:2a:00.0";
  devices.Attach(&xid);
  EXPECT_EQ(xid.ranks, (std::vector<int>{5}));
  proto::HwSignal link;
  link.source = "rdma";
  link.kind = "link-downed";
  link.device = "mlx5_0/1";
  devices.Attach(&link);
  EXPECT_EQ(link.ranks, (std::vector<int>{4, 5}));
  proto::HwSignal oom;
  oom.source = "kmsg";
  oom.kind = "oom-kill";
  oom.device = "host";
  oom.pid = 1006;
  devices.Attach(&oom);
  EXPECT_EQ(oom.ranks, (std::vector<int>{6}));
  proto::HwSignal mce;
  mce.source = "kmsg";
  mce.kind = "mce";
  mce.device = "host";
  devices.Attach(&mce);
  EXPECT_TRUE(mce.ranks.empty()) << "the host's: every rank's";
}

}  // namespace
}  // namespace ft::worker::health
