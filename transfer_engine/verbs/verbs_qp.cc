#include "transfer_engine/verbs/verbs_qp.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace ft::rdma {
namespace {

// RC retransmission: 4.096 us * 2^14 = 67 ms per try, 7 tries: a dead peer surfaces as
// IBV_WC_RETRY_EXC_ERR in about half a second.
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kHopLimit = 64;

uint32_t RandomPsn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

Status Modify(const VerbsApi& api, ibv_qp* qp, ibv_qp_attr* attr, int mask, const char* to) {
  int rc = api.modify_qp(qp, attr, mask);
  if (rc != 0) {
    return Status::Unavailable(fmt::format("moving RC QP {} to {} failed: {}", qp->qp_num, to, std::strerror(rc)));
  }
  return Status::Ok();
}

}  // namespace

Status VerbsQps::Create(std::shared_ptr<VerbsDevice> device, int count, uint32_t send_depth,
                        std::unique_ptr<VerbsQps>* out) {
  if (count < 1 || count > static_cast<int>(kMaxVerbsQps)) {
    return Status::InvalidArgument(fmt::format("{} queue pairs per connection, want 1..{}", count, kMaxVerbsQps));
  }
  const VerbsApi& api = device->api();
  std::unique_ptr<VerbsQps> qps(new VerbsQps(device));
  uint32_t max_wr = device->attr().max_qp_wr > 0 ? static_cast<uint32_t>(device->attr().max_qp_wr) : send_depth;
  send_depth = std::clamp<uint32_t>(send_depth, 1, max_wr);
  qps->cq_ = api.create_cq(device->context(), static_cast<int>(send_depth) * count, nullptr, nullptr, 0);
  if (qps->cq_ == nullptr) {
    return Status::Unavailable(fmt::format("RDMA device {}: cannot create a CQ: {}", device->name(), std::strerror(errno)));
  }
  for (int i = 0; i < count; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = qps->cq_;
    init.recv_cq = qps->cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = send_depth;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all = 0;
    ibv_qp* qp = api.create_qp(device->pd(), &init);
    if (qp == nullptr) {
      return Status::Unavailable(fmt::format("RDMA device {}: cannot create RC QP {} of {}: {}", device->name(), i + 1,
                                             count, std::strerror(errno)));
    }
    qps->qps_.push_back(qp);
    qps->psns_.push_back(RandomPsn());
  }
  *out = std::move(qps);
  return Status::Ok();
}

VerbsQps::~VerbsQps() {
  const VerbsApi& api = device_->api();
  for (ibv_qp* qp : qps_) api.destroy_qp(qp);
  if (cq_ != nullptr) api.destroy_cq(cq_);
}

Status VerbsQps::ToInit(int access_flags) {
  for (ibv_qp* qp : qps_) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = device_->address().port;
    attr.qp_access_flags = static_cast<unsigned>(access_flags);
    FT_RETURN_IF_ERROR(Modify(api(), qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                              "INIT"));
  }
  return Status::Ok();
}

Status VerbsQps::ToRtr(const VerbsPortAddress& remote, const std::vector<VerbsQpInfo>& remote_qps,
                       uint8_t max_dest_rd_atomic) {
  if (remote_qps.size() != qps_.size()) {
    return Status::Corrupt(fmt::format("peer answered with {} queue pairs for our {}", remote_qps.size(), qps_.size()));
  }
  const VerbsPortAddress& local = device_->address();
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
    attr.dest_qp_num = remote_qps[i].qp_num;
    attr.rq_psn = remote_qps[i].psn;
    attr.max_dest_rd_atomic = max_dest_rd_atomic;
    attr.min_rnr_timer = kMinRnrTimer;
    attr.ah_attr.dlid = remote.lid;
    attr.ah_attr.port_num = local.port;
    if (remote.use_gid) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
      attr.ah_attr.grh.sgid_index = local.gid_index;
      attr.ah_attr.grh.hop_limit = kHopLimit;
    }
    FT_RETURN_IF_ERROR(Modify(api(), qps_[i], &attr,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                              "RTR"));
  }
  return Status::Ok();
}

Status VerbsQps::ToRts(uint8_t max_rd_atomic) {
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = kAckTimeout;
    attr.retry_cnt = kRetryCount;
    attr.rnr_retry = kRnrRetry;
    attr.sq_psn = psns_[i];
    attr.max_rd_atomic = max_rd_atomic;
    FT_RETURN_IF_ERROR(Modify(api(), qps_[i], &attr,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC,
                              "RTS"));
  }
  return Status::Ok();
}

void VerbsQps::ToError() {
  for (ibv_qp* qp : qps_) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    api().modify_qp(qp, &attr, IBV_QP_STATE);
  }
}

std::vector<VerbsQpInfo> VerbsQps::info() const {
  std::vector<VerbsQpInfo> out;
  for (size_t i = 0; i < qps_.size(); ++i) out.push_back({qps_[i]->qp_num, psns_[i]});
  return out;
}

Status CheckReachable(const VerbsPortAddress& local, const VerbsPortAddress& remote) {
  if (local.link_layer != remote.link_layer) {
    return Status::Unavailable(fmt::format("RDMA link layers differ (ours {}, peer's {}): pulls use TCP",
                                           local.link_layer, remote.link_layer));
  }
  if (local.link_layer == IBV_LINK_LAYER_ETHERNET && (!local.use_gid || !remote.use_gid)) {
    return Status::Unavailable("RoCE needs a GID on both sides: set FT_RDMA_GID_INDEX");
  }
  return Status::Ok();
}

}  // namespace ft::rdma
