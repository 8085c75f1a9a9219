// The prefetcher's transfer engine: transfer_engine/transfer.h as it is (TCP, and verbs where the
// pull options carry a fast path).
#include "ftworker/prefetch/prefetch_options.h"

namespace ft::worker {
namespace {

class TransferEngine : public PullEngine {
 public:
  Status Stat(const rdma::PullOptions& options, const rdma::Peer& peer, const std::string& region,
              rdma::RegionInfo* out) override {
    return rdma::Stat(options, peer, region, out);
  }
  Status Pull(const rdma::PullOptions& options, const rdma::PullRequest& request,
              rdma::PullResult* result) override {
    return rdma::Pull(options, request, result);
  }
};

}  // namespace

std::shared_ptr<PullEngine> MakeTransferEngine() { return std::make_shared<TransferEngine>(); }

}  // namespace ft::worker
