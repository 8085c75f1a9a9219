// ft::rdma::Connection: the client's end of one authenticated transfer connection (internal to
// transfer_engine/; Pull and Stat use it). Plain blocking sockets, one thread per connection: a
// pull keeps a few connections per peer busy, each with its own thread, so blocking reads straight
// into the destination are the simplest fast path (no event loop between the socket and dest).
//
// Every wait is bounded: connecting by PullOptions::connect_timeout, every receive and send by
// io_timeout of silence (SO_RCVTIMEO/SO_SNDTIMEO), so a stopped peer costs one io_timeout;
// while data flows, a RateFloor (PullOptions::min_bytes_per_second) gives up a peer that trickles.
// A control frame has a deadline of its own: io_timeout plus its length at the rate floor, so a
// peer dripping a byte before every timeout cannot hold a frame (and a prefetch, and a stopping
// worker) for longer. Before the peer proved the secret, no frame above a few hundred bytes is
// read at all (wire::kMaxPreAuthPayload). After it, every frame is sealed
// (transfer_engine/channel.h). Not thread-safe except Abort(), which any thread may call to end a
// blocked receive.
#ifndef FT_TRANSFER_ENGINE_TCP_TCP_CLIENT_H_
#define FT_TRANSFER_ENGINE_TCP_TCP_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transfer_engine/channel.h"
#include "transfer_engine/rate_floor.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/wire.h"

namespace ft::rdma {

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects and authenticates (both ways): Unavailable when the peer is unreachable or
  // refuses our proof, Corrupt when its own proof is wrong (not a peer of this job).
  static Status Open(const PullOptions& options, const Peer& peer, std::unique_ptr<Connection>* out);

  // NotFound/NotReady/... from the peer's Error reply; the connection stays usable after one.
  Status OpenRegion(const std::string& name, wire::OpenReply* out, uint32_t flags = 0);
  Status FastConnect(uint32_t handle, std::string_view request, std::string* reply);

  Status SendRead(const wire::Read& read);
  // The next frame must be Data: its header. An Error frame becomes its Status, with the
  // Read's tag in *error_tag. `floor` (may be null) counts the bytes against the data phase's
  // rate floor.
  Status ReceiveDataHeader(wire::DataHeader* out, uint64_t* error_tag, RateFloor* floor = nullptr);
  // The len bytes of the data frame whose header ReceiveDataHeader just returned, straight into
  // dest (decrypted in place and checked against their tag when the region was opened with
  // PullOptions::encrypt_data); Timeout when `floor` (may be null) says too slow, Corrupt when
  // they fail their tag (dest then holds garbage).
  Status ReceiveData(uint8_t* dest, uint64_t len, RateFloor* floor = nullptr);

  // Says goodbye (best effort) and closes.
  void Close();
  // Any thread: makes blocked and later calls fail at once.
  void Abort();

  const Peer& peer() const { return peer_; }

 private:
  Connection(int fd, Peer peer, const PullOptions& options)
      : fd_(fd), peer_(std::move(peer)), io_timeout_(options.io_timeout),
        min_bytes_per_second_(options.min_bytes_per_second), encrypt_data_(options.encrypt_data) {}
  Status Handshake(const std::string& secret);
  Status SendAll(std::string_view bytes);
  // A control frame, sealed after the handshake.
  Status SendFrame(std::string frame);
  // Exactly len bytes; Timeout when `floor` (may be null) says too slow.
  Status ReceiveBytes(uint8_t* dest, uint64_t len, RateFloor* floor = nullptr);
  // Exactly len bytes by `deadline` (Timeout after it), however the peer spreads them.
  Status ReceiveBytesBy(uint8_t* dest, uint64_t len, std::chrono::steady_clock::time_point deadline);
  // The rest of a control frame whose header is `header_bytes`: within its deadline, opened.
  Status ReceivePayload(const uint8_t* header_bytes, const wire::FrameHeader& header, std::string* payload);
  Status ReceiveFrame(wire::FrameHeader* header, std::string* payload);
  // The reply to `request`: a frame of type `expected`, or the peer's error frame as a Status.
  Status ReceiveReply(wire::MessageType expected, std::string_view request, std::string* payload);

  int fd_;
  Peer peer_;
  std::chrono::milliseconds io_timeout_;
  uint64_t min_bytes_per_second_;
  bool encrypt_data_;
  bool data_encrypted_ = false;  // the data frame being received carries encrypted bytes
  Sealer send_;                  // after the handshake
  Sealer receive_;
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_TCP_TCP_CLIENT_H_
