#include "transfer_engine/verbs/verbs_setup.h"

namespace ft::rdma {

VerbsOptions VerbsOptionsFromConfig(const Config& config) {
  VerbsOptions options;
  options.device = config.rdma_device;
  options.port = static_cast<int>(config.rdma_port);
  options.gid_index = static_cast<int>(config.rdma_gid_index);
  options.qps = static_cast<int>(config.rdma_qps);
  options.reads_per_qp = static_cast<int>(config.rdma_reads_per_qp);
  return options;
}

Status OpenVerbsTransport(const Config& config, const VerbsApi* api, VerbsTransport* out) {
  if (!config.rdma_verbs) return Status::Unavailable("RDMA verbs off (FT_RDMA_VERBS=0): pulls use TCP");
  VerbsOptions options = VerbsOptionsFromConfig(config);
  if (options.qps < 1 || options.qps > static_cast<int>(kMaxVerbsQps)) {
    return Status::InvalidArgument("FT_RDMA_QPS must be 1..64");
  }
  if (options.reads_per_qp < 1 || options.reads_per_qp > 4096) {
    return Status::InvalidArgument("FT_RDMA_READS_PER_QP must be 1..4096");
  }
  if (api == nullptr) FT_RETURN_IF_ERROR(LoadVerbs(&api));
  VerbsTransport transport;
  FT_RETURN_IF_ERROR(VerbsDevice::Open(*api, options, &transport.device));
  transport.server = std::make_unique<VerbsServer>(transport.device, options);
  transport.client = std::make_unique<VerbsClient>(transport.device, options);
  *out = std::move(transport);
  return Status::Ok();
}

}  // namespace ft::rdma
