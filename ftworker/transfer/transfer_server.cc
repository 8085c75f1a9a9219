// The transfer service's server: rdma::Server (the TCP engine, transfer_engine/transfer.h) behind
// the TransferServer seam. Its own file so that only ftworker's binary, not the daemon's unit
// tests, links the engine (they fake the server).
#include "ftworker/transfer/transfer_service.h"

namespace ft::worker {

namespace {

class RdmaServer : public TransferServer {
 public:
  explicit RdmaServer(const rdma::ServerOptions& options) : server_(options) {}
  Status Start() override { return server_.Start(); }
  uint16_t port() const override { return server_.port(); }
  void Stop() override { server_.Stop(); }
  rdma::ServerStats stats() const override { return server_.stats(); }

 private:
  rdma::Server server_;
};

}  // namespace

std::unique_ptr<TransferServer> MakeRdmaServer(const rdma::ServerOptions& options) {
  return std::make_unique<RdmaServer>(options);
}

}  // namespace ft::worker
