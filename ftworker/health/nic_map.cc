#include "ftworker/health/nic_map.h"

#include <dirent.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <vector>

#include "ftworker/health/pci_bus_id.h"

namespace ft::worker::health {
namespace {

std::optional<std::string> RealPath(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return std::nullopt;
  std::string out(real);
  free(real);
  return out;
}

std::vector<std::string> Sorted(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Path components the two share from the root.
size_t CommonComponents(const std::string& a, const std::string& b) {
  size_t common = 0, i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) {
    if (a[i] == '/' && i > 0) ++common;
    ++i;
  }
  if ((i == a.size() || a[i] == '/') && (i == b.size() || b[i] == '/')) ++common;  // a whole last component
  return common;
}

std::string FirstActivePort(const std::string& dev_dir, const std::string& dev) {
  std::vector<std::string> ports = Sorted(dev_dir + "/ports");
  for (const std::string& port : ports) {
    std::ifstream state(dev_dir + "/ports/" + port + "/state");
    std::string text;
    std::getline(state, text);
    if (text.find("ACTIVE") != std::string::npos) return dev + "/" + port;
  }
  return dev + "/" + (ports.empty() ? std::string("1") : ports.front());
}

}  // namespace

std::string NearestNic(const std::string& sysfs_root, const std::string& gpu_bus_id) {
  std::optional<std::string> bus = NormalizePciBusId(gpu_bus_id);
  if (!bus) return {};
  std::optional<std::string> gpu = RealPath(sysfs_root + "/bus/pci/devices/" + *bus);
  if (!gpu) return {};
  const std::string ib = sysfs_root + "/class/infiniband";
  std::string best;
  size_t best_common = 0;
  for (const std::string& dev : Sorted(ib)) {
    std::optional<std::string> nic = RealPath(ib + "/" + dev + "/device");
    if (!nic) continue;
    const size_t common = CommonComponents(*gpu, *nic);
    if (best.empty() || common > best_common) {
      best = FirstActivePort(ib + "/" + dev, dev);
      best_common = common;
    }
  }
  return best;
}

}  // namespace ft::worker::health
