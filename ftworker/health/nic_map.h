// Which RDMA NIC port is nearest to a GPU: the one whose PCI device shares the longest path
// with the GPU's in the sysfs PCI tree (same PCIe switch beats same root complex), as NCCL
// picks a GPU's NIC. A rank's NIC signals (link_downed) are attributed to it by this.
#ifndef FT_FTWORKER_HEALTH_NIC_MAP_H_
#define FT_FTWORKER_HEALTH_NIC_MAP_H_

#include <string>

namespace ft::worker::health {

// "<dev>/<port>" (its first ACTIVE port, else port 1) nearest to the GPU `gpu_bus_id` (any
// spelling NormalizePciBusId takes) under `sysfs_root`; ties go to the first device by name.
// "": no RDMA device, or the GPU is not in the tree.
std::string NearestNic(const std::string& sysfs_root, const std::string& gpu_bus_id);

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_NIC_MAP_H_
