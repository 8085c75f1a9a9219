#include "ftworker/health/rank_devices.h"

#include <algorithm>
#include <optional>

#include "ftworker/health/nic_map.h"
#include "ftworker/health/pci_bus_id.h"
#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {

void RankDevices::Update(const std::vector<RankDevice>& ranks) {
  std::map<int, Known> now;
  for (const RankDevice& r : ranks) {
    Known k;
    k.pid = r.pid;
    std::optional<std::string> gpu = NormalizePciBusId(r.gpu_bus_id);
    if (gpu) {
      k.gpu = *gpu;
      auto it = nic_of_gpu_.find(k.gpu);
      if (it == nic_of_gpu_.end()) {
        it = nic_of_gpu_.emplace(k.gpu, sysfs_root_.empty() ? std::string() : NearestNic(sysfs_root_, k.gpu)).first;
      }
      k.nic = it->second;
    }
    now[r.rank] = std::move(k);
  }
  ranks_ = std::move(now);
}

void RankDevices::Attach(proto::HwSignal* signal) const {
  signal->ranks.clear();
  if (signal->kind == kOomKill) {
    for (const auto& [rank, k] : ranks_) {
      if (signal->pid != 0 && k.pid == signal->pid) signal->ranks.push_back(rank);
    }
    return;
  }
  if (signal->source == "rdma") {
    for (const auto& [rank, k] : ranks_) {
      if (!k.nic.empty() && k.nic == signal->device) signal->ranks.push_back(rank);
    }
    return;
  }
  std::optional<std::string> gpu = NormalizePciBusId(signal->device);
  if (!gpu) return;  // the host's
  for (const auto& [rank, k] : ranks_) {
    if (k.gpu == *gpu) signal->ranks.push_back(rank);
  }
}

std::string RankDevices::GpuOf(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? std::string() : it->second.gpu;
}

std::string RankDevices::NicOf(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? std::string() : it->second.nic;
}

}  // namespace ft::worker::health
