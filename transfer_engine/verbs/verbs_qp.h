// ft::rdma::VerbsQps: a connection's RC queue pairs and their completion queue, and the
// RESET -> INIT -> RTR -> RTS transitions with the attributes (and masks) each one requires.
// Both sides of the verbs fast path use it: the server's QPs are responders (REMOTE_READ
// access, max_dest_rd_atomic), the client's initiators (max_rd_atomic). Destroys the QPs and
// then the CQ. Not thread-safe: one owner.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_QP_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_QP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transfer_engine/verbs/verbs_blob.h"
#include "transfer_engine/verbs/verbs_device.h"

namespace ft::rdma {

class VerbsQps {
 public:
  // `count` RC QPs with room for `send_depth` outstanding work requests each, one CQ for all.
  static Status Create(std::shared_ptr<VerbsDevice> device, int count, uint32_t send_depth,
                       std::unique_ptr<VerbsQps>* out);
  ~VerbsQps();
  VerbsQps(const VerbsQps&) = delete;
  VerbsQps& operator=(const VerbsQps&) = delete;

  Status ToInit(int access_flags);
  // Connects QP i to remote[i] at `remote` (same count).
  Status ToRtr(const VerbsPortAddress& remote, const std::vector<VerbsQpInfo>& remote_qps,
               uint8_t max_dest_rd_atomic);
  Status ToRts(uint8_t max_rd_atomic);
  // Every QP to the error state: outstanding work requests complete (flushed), none starts.
  void ToError();

  size_t size() const { return qps_.size(); }
  ibv_qp* qp(size_t i) const { return qps_[i]; }
  ibv_cq* cq() const { return cq_; }
  std::vector<VerbsQpInfo> info() const;
  const VerbsApi& api() const { return device_->api(); }

 private:
  explicit VerbsQps(std::shared_ptr<VerbsDevice> device) : device_(std::move(device)) {}

  std::shared_ptr<VerbsDevice> device_;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<uint32_t> psns_;
};

// Whether two ports can reach each other (same link layer; a GID where RoCE needs one).
Status CheckReachable(const VerbsPortAddress& local, const VerbsPortAddress& remote);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_QP_H_
