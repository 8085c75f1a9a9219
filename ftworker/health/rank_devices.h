// ft::worker::health::RankDevices: which of the node's ranks a hardware signal concerns — the
// ranks on its GPU (by the PCI bus id libft.so wrote into each segment), on its NIC port (the
// port nearest to each rank's GPU in the PCI tree, nic_map.h), or the process the OOM killer
// chose. A signal of the host (an MCE) concerns every rank: its ranks stay empty.
//
// Used on the worker's loop thread only.
#ifndef FT_FTWORKER_HEALTH_RANK_DEVICES_H_
#define FT_FTWORKER_HEALTH_RANK_DEVICES_H_

#include <map>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::worker::health {

struct RankDevice {
  int rank = -1;
  int pid = 0;
  std::string gpu_bus_id;  // as the segment holds it ("" not known yet)
};

class RankDevices {
 public:
  // `sysfs_root`: where the nearest NIC is looked up (FT_SYSFS_ROOT); "": NICs not mapped.
  explicit RankDevices(std::string sysfs_root) : sysfs_root_(std::move(sysfs_root)) {}

  // The node's ranks now, replacing the last set. A GPU's nearest NIC is looked up once.
  void Update(const std::vector<RankDevice>& ranks);
  // Fills signal->ranks (sorted) from its device, or its pid for an OOM kill.
  void Attach(proto::HwSignal* signal) const;
  // The rank's GPU (normalized) and NIC port, "" when not known.
  std::string GpuOf(int rank) const;
  std::string NicOf(int rank) const;

 private:
  struct Known {
    int pid = 0;
    std::string gpu;  // normalized
    std::string nic;
  };
  const std::string sysfs_root_;
  std::map<int, Known> ranks_;
  std::map<std::string, std::string> nic_of_gpu_;  // cache: the PCI tree does not change
};

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_RANK_DEVICES_H_
