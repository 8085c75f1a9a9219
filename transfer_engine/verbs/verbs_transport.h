// The verbs fast path (transfer_engine/piece_path.h) over one VerbsDevice: RC queue pairs and RDMA
// READ from the server's registered memory straight into the client's destination.
//
// Server: Offer() registers the region's memory once (cached by address range: an arena
// registered at creation through Register() is never registered again) and describes it
// (address, rkeys, size, port LID/GID). Accept() creates one responder QP per client QP and
// moves each RESET -> INIT -> RTR -> RTS with the client's QP numbers and PSNs.
// Client: Connect() registers dest once (cached likewise), creates `qps` RC QPs and a CQ,
// exchanges QP numbers over the engine's authenticated control channel and brings the QPs to
// RTS. The path's Fetch() keeps `reads_per_qp` signalled reads in flight per QP and calls
// landed(i) when every read of piece i completed. The first error completion (or a failed
// post, or no completion within completion_timeout) ends the path: its QPs are moved to the
// error state and drained, so nothing lands in dest afterwards, and every piece not landed is
// handed back in *left for TCP, with the completion status in the returned Unavailable.
//
// Threads: Offer/Accept/Register/Forget may be called from any thread; a path's Fetch calls
// are serialised.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_TRANSPORT_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "transfer_engine/piece_path.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/verbs/verbs_device.h"

namespace ft::rdma {

class VerbsQps;  // verbs_qp.h

class VerbsServer : public FastPathServer {
 public:
  VerbsServer(std::shared_ptr<VerbsDevice> device, VerbsOptions options);
  ~VerbsServer() override;

  const char* kind() const override { return "verbs"; }
  std::string Offer(const Region& region) override;
  Status Accept(const Region& region, std::string_view request, std::string* reply) override;

  // Registers memory ahead of its first Offer (an arena when it is created), so no restore
  // ever waits for a registration.
  Status Register(const uint8_t* data, uint64_t bytes);
  // The memory is going away (the arena is unmapped): stop offering it.
  void Forget(const uint8_t* data, uint64_t bytes);
  size_t registrations() const { return memory_.size(); }
  size_t connections() const;

 private:
  struct Connection;

  std::shared_ptr<VerbsDevice> device_;
  VerbsOptions options_;
  VerbsMemoryCache memory_;
  mutable Mutex mutex_;
  std::deque<std::unique_ptr<Connection>> connections_ GUARDED_BY(mutex_);  // oldest first
};

class VerbsClient : public FastPathClient {
 public:
  VerbsClient(std::shared_ptr<VerbsDevice> device, VerbsOptions options);
  ~VerbsClient() override;

  const char* kind() const override { return "verbs"; }
  Status Connect(std::string_view offer, uint8_t* dest, uint64_t bytes, const Exchange& exchange,
                 std::unique_ptr<PiecePath>* out) override;

  // Registers a destination ahead of the pull (a prefetch arena when it is created).
  Status Register(uint8_t* data, uint64_t bytes);
  void Forget(const uint8_t* data, uint64_t bytes);
  size_t registrations() const { return memory_.size(); }

 private:
  std::shared_ptr<VerbsDevice> device_;
  VerbsOptions options_;
  VerbsMemoryCache memory_;
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_TRANSPORT_H_
