// ft::rdma::VerbsDevice: one opened RDMA device, its port and a protection domain, shared by
// the verbs server and client of a process; VerbsMemory: registered memory, registered once
// per buffer (an arena when it is first seen), never on the restore path.
//
// All calls go through a VerbsApi table (transfer_engine/verbs/verbs_api.h): the real libibverbs or
// a fake.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_DEVICE_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "transfer_engine/verbs/verbs_api.h"
#include "transfer_engine/verbs/verbs_blob.h"

namespace ft::rdma {

// The verbs transport's knobs; ftworker fills them from FT_RDMA_* (common/config_table.def).
struct VerbsOptions {
  std::string device;     // empty: the first device whose port is active
  int port = 1;
  int gid_index = -1;     // -1: InfiniBand by LID, Ethernet (RoCE) through GID 0
  int qps = 4;            // RC queue pairs per connection (client)
  int reads_per_qp = 16;  // RDMA READs in flight per queue pair (client)
  uint64_t max_read_bytes = 1ull << 20;  // a piece is read in requests of at most this
  std::chrono::milliseconds completion_timeout{10000};  // no completion this long: path fails
  int max_server_connections = 64;  // the oldest accepted connection is closed beyond this
};

class VerbsDevice {
 public:
  // Opens options.device (or the first with an active port), queries it and allocates a PD.
  // Unavailable when there is no device, the named one is absent or its port is down.
  static Status Open(const VerbsApi& api, const VerbsOptions& options, std::shared_ptr<VerbsDevice>* out);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const VerbsApi& api() const { return api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  const VerbsPortAddress& address() const { return address_; }
  const ibv_device_attr& attr() const { return attr_; }
  uint32_t max_msg_bytes() const { return max_msg_bytes_; }

 private:
  explicit VerbsDevice(const VerbsApi& api) : api_(api) {}

  const VerbsApi& api_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  VerbsPortAddress address_;
  ibv_device_attr attr_{};
  uint32_t max_msg_bytes_ = 0;
};

// [data, data + bytes) registered with one device, split into memory regions of at most the
// device's max_mr_size. Deregistered when the last user lets go.
class VerbsMemory {
 public:
  struct Mr {
    uint64_t offset;  // from data
    uint64_t len;
    ibv_mr* mr;
  };
  static Status Register(std::shared_ptr<VerbsDevice> device, const uint8_t* data, uint64_t bytes, int access,
                         std::unique_ptr<VerbsMemory>* out);
  ~VerbsMemory();
  VerbsMemory(const VerbsMemory&) = delete;
  VerbsMemory& operator=(const VerbsMemory&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  const std::vector<Mr>& mrs() const { return mrs_; }
  bool Contains(const uint8_t* p, uint64_t n) const {
    return p >= data_ && n <= bytes_ && static_cast<uint64_t>(p - data_) <= bytes_ - n;
  }
  // The region covering data()[offset] (offset < bytes()).
  const Mr& MrAt(uint64_t offset) const;

 private:
  VerbsMemory(std::shared_ptr<VerbsDevice> device, const uint8_t* data, uint64_t bytes)
      : device_(std::move(device)), data_(data), bytes_(bytes) {}

  std::shared_ptr<VerbsDevice> device_;
  const uint8_t* data_;
  uint64_t bytes_;
  std::vector<Mr> mrs_;
};

// Registrations by address range, so a buffer is registered once however often it is served
// or filled: a request inside an existing registration reuses it. Thread-safe.
class VerbsMemoryCache {
 public:
  VerbsMemoryCache(std::shared_ptr<VerbsDevice> device, int access) : device_(std::move(device)), access_(access) {}

  // The registration containing [data, data + bytes), registering exactly that range when none
  // does (the slow part: ~0.1 s/GB on real NICs).
  Status Get(const uint8_t* data, uint64_t bytes, std::shared_ptr<const VerbsMemory>* out);
  // The memory at `data` is going away (an arena unmapped): drops registrations that overlap
  // [data, data + bytes); ones still used by a connection are deregistered when it ends.
  void Forget(const uint8_t* data, uint64_t bytes);
  size_t size() const;

 private:
  std::shared_ptr<VerbsDevice> device_;
  const int access_;
  mutable Mutex mutex_;
  std::vector<std::shared_ptr<const VerbsMemory>> entries_ GUARDED_BY(mutex_);
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_DEVICE_H_
