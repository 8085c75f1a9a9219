// ft::worker::TransferService: this node's transfer server (transfer_engine/transfer.h) in the
// worker — its node's committed checkpoint copies (CopyProvider) served to authenticated peers.
//
//   1. Waits for the job's secret (ft:{J}:transfer:secret, written by the master): one GET
//      every half second until it is there. The secret is never logged.
//   2. Starts the server on FT_LISTEN (ListenAddress) and FT_TRANSFER_PORT, on its own I/O
//      threads, and logs the bound address and port; a failed start is retried every 5 s.
//   3. Publishes the endpoint (ft:{J}:endpoints, field = node) and checks once a second that
//      Redis still holds it (rewritten after Redis lost its data, or another writer's value).
//   4. Re-reads the secret every 2 s while serving: when Redis lost it and the master made a
//      new one, the server is restarted with it on the same port.
//   5. Stop(): the server stops, the endpoint is removed (a clean stop only).
// It also reads, once, the ranks Redis records on this node (ft:{J}:ranks, node field): a worker
// restarted on a node whose ranks already exited has never seen their segments, yet their
// arenas are still there to serve (RecordedRanks, which the daemon hands to the keeper).
//
// Threads: everything but the server's I/O runs on the daemon loop's thread; Tick() never
// waits for a peer. The server's traffic counters are logged when they change (every 30 s at
// most; a refused peer at once).
#ifndef FT_FTWORKER_TRANSFER_SERVICE_H_
#define FT_FTWORKER_TRANSFER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "ftworker/transfer/copy_server.h"
#include "proto/keys.h"
#include "redis/store.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

// What the service needs of rdma::Server; tests replace it.
class TransferServer {
 public:
  virtual ~TransferServer() = default;
  virtual Status Start() = 0;
  virtual uint16_t port() const = 0;
  virtual void Stop() = 0;
  virtual rdma::ServerStats stats() const = 0;
};
using TransferServerFactory = std::function<std::unique_ptr<TransferServer>(const rdma::ServerOptions&)>;

// The real one: an rdma::Server (ftworker/transfer/transfer_server.cc).
std::unique_ptr<TransferServer> MakeRdmaServer(const rdma::ServerOptions& options);

struct TransferServiceOptions {
  std::string job;
  std::string node;
  std::string listen_address;  // chosen already (ChooseListenAddress)
  int64_t port = 0;            // FT_TRANSFER_PORT
  CopyProviderOptions copies;
  // The fast path offered to peers next to TCP (transfer_engine/verbs/verbs_transport.h's
  // VerbsServer where the node has a device); published as the endpoint's first transport. Null:
  // TCP only.
  rdma::FastPathServer* fast_path = nullptr;
  TransferServerFactory make_server;  // empty: MakeRdmaServer
};

class TransferService {
 public:
  explicit TransferService(TransferServiceOptions options);
  ~TransferService();  // stops the server (the endpoint stays: Stop() removes it)

  // Daemon loop, every tick; Redis is asked only while `store` is connected.
  void Tick(uint64_t mono_ns, int64_t unix_ms, redis::Store& store);
  // The next Tick reads the transfer secret (the master noticed a new one: proto/notice.h).
  void CheckSecretSoon() { next_secret_ns_ = 0; }
  // The secret is read every 500 ms until there is one and every 2 s while serving (for a
  // new one). While the daemon hears notices those reads only catch a missed one: every `ns`
  // instead (0: back to those).
  void StretchSecretPolls(uint64_t ns) { stretched_secret_ns_ = ns; }
  // Stops the server and, when Redis is there, removes the endpoint.
  void Stop(redis::Store* store);

  bool serving() const { return server_ != nullptr; }
  uint16_t port() const { return port_; }
  // This node's ranks as Redis records them (read once).
  const std::set<int>& RecordedRanks() const { return recorded_ranks_; }

 private:
  // The secret in Redis when it is there and well formed (a bad one is warned about once).
  bool FetchSecret(redis::Store& store, std::string* out);
  void StartServer(uint64_t mono_ns, int64_t unix_ms);
  void CheckEndpoint(redis::Store& store);
  void ReadRecordedRanks(redis::Store& store);
  void LogStats(uint64_t mono_ns, bool final);

  const TransferServiceOptions options_;
  const proto::Keys keys_;
  CopyProvider provider_;
  std::string secret_;  // never logged
  std::unique_ptr<TransferServer> server_;
  uint16_t port_ = 0;
  uint16_t restart_port_ = 0;  // the port to keep when restarting for a new secret
  redis::Argv publish_endpoint_;  // SetEndpoint of what this worker publishes; empty before the server is up
  bool endpoint_written_ = false;
  bool ranks_read_ = false;
  std::set<int> recorded_ranks_;
  bool bad_secret_warned_ = false;
  bool waiting_logged_ = false;
  uint64_t next_secret_ns_ = 0;
  uint64_t stretched_secret_ns_ = 0;  // StretchSecretPolls; 0: kSecretPollNs, kSecretCheckNs
  uint64_t SecretPollNs(uint64_t unstretched) const {
    return stretched_secret_ns_ != 0 ? stretched_secret_ns_ : unstretched;
  }
  uint64_t next_ranks_ns_ = 0;
  uint64_t next_start_ns_ = 0;
  uint64_t next_endpoint_ns_ = 0;
  uint64_t next_stats_check_ns_ = 0;
  uint64_t next_stats_log_ns_ = 0;
  rdma::ServerStats logged_{};
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_TRANSFER_SERVICE_H_
