#include "transfer_engine/verbs/verbs_device.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "common/mutex.h"

namespace ft::rdma {
namespace {

struct DeviceList {
  const VerbsApi& api;
  ibv_device** list = nullptr;
  int count = 0;
  ~DeviceList() {
    if (list != nullptr) api.free_device_list(list);
  }
};

}  // namespace

Status VerbsDevice::Open(const VerbsApi& api, const VerbsOptions& options, std::shared_ptr<VerbsDevice>* out) {
  if (options.port < 1 || options.port > 255) {
    return Status::InvalidArgument(fmt::format("RDMA port {} out of range 1..255 (FT_RDMA_PORT)", options.port));
  }
  if (options.gid_index < -1 || options.gid_index > 255) {
    return Status::InvalidArgument(fmt::format("RDMA GID index {} out of range -1..255 (FT_RDMA_GID_INDEX)",
                                               options.gid_index));
  }
  DeviceList devices{api};
  errno = 0;
  devices.list = api.get_device_list(&devices.count);
  if (devices.list == nullptr || devices.count <= 0) {
    int err = errno;
    return Status::Unavailable(fmt::format("no RDMA device on this host ({}): pulls use TCP",
                                           err != 0 ? std::strerror(err) : "the device list is empty"));
  }
  const uint8_t port = static_cast<uint8_t>(options.port);
  std::vector<std::string> seen;
  for (int i = 0; i < devices.count; ++i) {
    ibv_device* device = devices.list[i];
    const char* raw_name = api.get_device_name(device);
    std::string name = raw_name ? raw_name : "?";
    if (!options.device.empty() && name != options.device) {
      seen.push_back(name);
      continue;
    }
    std::shared_ptr<VerbsDevice> opened(new VerbsDevice(api));
    opened->name_ = name;
    opened->context_ = api.open_device(device);
    if (opened->context_ == nullptr) {
      seen.push_back(fmt::format("{} (cannot open: {})", name, std::strerror(errno)));
      continue;
    }
    ibv_port_attr port_attr{};
    if (api.query_device(opened->context_, &opened->attr_) != 0 ||
        api.query_port(opened->context_, port, &port_attr) != 0) {
      seen.push_back(fmt::format("{} (no port {})", name, options.port));
      continue;
    }
    if (port_attr.state != IBV_PORT_ACTIVE) {
      seen.push_back(fmt::format("{} (port {} not active)", name, options.port));
      continue;
    }
    VerbsPortAddress& a = opened->address_;
    a.lid = port_attr.lid;
    a.link_layer = port_attr.link_layer;
    a.port = port;
    a.mtu = static_cast<uint8_t>(port_attr.active_mtu);
    int gid_index = options.gid_index;
    if (gid_index < 0 && port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) gid_index = 0;  // RoCE has no LIDs
    if (gid_index >= 0) {
      ibv_gid gid{};
      if (api.query_gid(opened->context_, port, gid_index, &gid) != 0) {
        seen.push_back(fmt::format("{} (no GID {} on port {})", name, gid_index, options.port));
        continue;
      }
      std::memcpy(a.gid, gid.raw, sizeof(a.gid));
      a.use_gid = 1;
      a.gid_index = static_cast<uint8_t>(gid_index);
    }
    opened->max_msg_bytes_ = port_attr.max_msg_sz != 0 ? port_attr.max_msg_sz : (1u << 30);
    opened->pd_ = api.alloc_pd(opened->context_);
    if (opened->pd_ == nullptr) {
      return Status::Unavailable(fmt::format("RDMA device {}: cannot allocate a protection domain: {}", name,
                                             std::strerror(errno)));
    }
    FT_LOG(Info, Rdma, "RDMA device {} port {} ({}, lid {}, mtu code {}{})", name, options.port,
           a.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", a.lid, a.mtu,
           a.use_gid ? fmt::format(", GID index {}", a.gid_index) : "");
    *out = std::move(opened);
    return Status::Ok();
  }
  std::string list;
  for (const std::string& s : seen) list += (list.empty() ? "" : ", ") + s;
  return Status::Unavailable(fmt::format("no usable RDMA device{}: {}; set FT_RDMA_DEVICE/FT_RDMA_PORT, pulls use TCP",
                                         options.device.empty() ? "" : " named " + options.device, list));
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) api_.dealloc_pd(pd_);
  if (context_ != nullptr) api_.close_device(context_);
}

Status VerbsMemory::Register(std::shared_ptr<VerbsDevice> device, const uint8_t* data, uint64_t bytes, int access,
                             std::unique_ptr<VerbsMemory>* out) {
  if (data == nullptr || bytes == 0) return Status::InvalidArgument("registering empty memory");
  std::unique_ptr<VerbsMemory> memory(new VerbsMemory(device, data, bytes));
  // A NIC's max_mr_size can be smaller than an arena: split it.
  const uint64_t max_mr = device->attr().max_mr_size != 0 ? device->attr().max_mr_size : bytes;
  for (uint64_t offset = 0; offset < bytes;) {
    uint64_t len = std::min(bytes - offset, max_mr);
    ibv_mr* mr = device->api().reg_mr(device->pd(), const_cast<uint8_t*>(data) + offset, len, access);
    if (mr == nullptr) {
      return Status::Unavailable(fmt::format("RDMA device {}: registering {} bytes at {} failed: {} (locked-memory "
                                             "limit? raise `ulimit -l`)", device->name(), len,
                                             static_cast<const void*>(data + offset), std::strerror(errno)));
    }
    memory->mrs_.push_back({offset, len, mr});
    offset += len;
  }
  *out = std::move(memory);
  return Status::Ok();
}

VerbsMemory::~VerbsMemory() {
  for (const Mr& m : mrs_) device_->api().dereg_mr(m.mr);
}

const VerbsMemory::Mr& VerbsMemory::MrAt(uint64_t offset) const {
  auto it = std::upper_bound(mrs_.begin(), mrs_.end(), offset, [](uint64_t o, const Mr& m) { return o < m.offset; });
  return *(it - 1);
}

Status VerbsMemoryCache::Get(const uint8_t* data, uint64_t bytes, std::shared_ptr<const VerbsMemory>* out) {
  MutexLock lock(&mutex_);
  for (const auto& entry : entries_) {
    if (entry->Contains(data, bytes)) {
      *out = entry;
      return Status::Ok();
    }
  }
  std::unique_ptr<VerbsMemory> memory;
  FT_RETURN_IF_ERROR(VerbsMemory::Register(device_, data, bytes, access_, &memory));
  entries_.push_back(std::move(memory));
  *out = entries_.back();
  return Status::Ok();
}

void VerbsMemoryCache::Forget(const uint8_t* data, uint64_t bytes) {
  MutexLock lock(&mutex_);
  std::erase_if(entries_, [&](const std::shared_ptr<const VerbsMemory>& e) {
    return e->data() < data + bytes && data < e->data() + e->bytes();
  });
}

size_t VerbsMemoryCache::size() const {
  MutexLock lock(&mutex_);
  return entries_.size();
}

}  // namespace ft::rdma
