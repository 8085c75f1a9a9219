// ft::rdma::PiecePath and the fast-path hooks: how the engine (transfer_engine/transfer.h) moves
// pieces of one opened region from one peer, and how a verbs transport takes the bytes over from
// TCP.
//
// The TCP engine always opens a region over its authenticated control connection. When the
// server was given a FastPathServer, its open reply carries the server's offer (an opaque
// blob, e.g. the arena's memory region and queue-pair numbers); a client given a
// FastPathClient then connects through `exchange` (one request blob, one reply blob, over the
// same control connection) and fetches the pieces through the PiecePath it gets. Pieces a
// path could not land (an error completion, a lost peer) are handed back, and the engine
// fetches them over TCP. Without either hook, or when Connect fails, everything goes over TCP.
#ifndef FT_TRANSFER_ENGINE_PIECE_PATH_H_
#define FT_TRANSFER_ENGINE_PIECE_PATH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::rdma {

class Region;

struct Piece {
  uint64_t offset = 0;
  uint64_t len = 0;
  bool operator==(const Piece&) const = default;
};

class PiecePath {
 public:
  virtual ~PiecePath() = default;
  virtual const char* kind() const = 0;  // "tcp", "verbs"
  // Fetches `pieces` into dest + piece.offset (dest as given at Connect). Calls landed(i) for
  // each piece whose bytes are all in (any thread). Returns OK when every piece landed;
  // otherwise why the path failed, with *left holding the indexes of the pieces that did not
  // land (for another path). Blocking.
  virtual Status Fetch(const std::vector<Piece>& pieces, const std::function<void(size_t)>& landed,
                       std::vector<size_t>* left) = 0;
};

using Exchange = std::function<Status(std::string_view request, std::string* reply)>;

class FastPathServer {
 public:
  virtual ~FastPathServer() = default;
  virtual const char* kind() const = 0;
  // What a client needs to reach `region` this way, sent in the open reply; empty: not offered
  // for this region (e.g. its memory could not be registered).
  virtual std::string Offer(const Region& region) = 0;
  // A client's connect request for an offered region; fills the reply blob.
  virtual Status Accept(const Region& region, std::string_view request, std::string* reply) = 0;
};

class FastPathClient {
 public:
  virtual ~FastPathClient() = default;
  virtual const char* kind() const = 0;
  // Builds a path to the region the server offered, landing bytes in dest[0, bytes).
  // Unavailable (with why) when this side cannot: the engine then uses TCP alone.
  virtual Status Connect(std::string_view offer, uint8_t* dest, uint64_t bytes,
                         const Exchange& exchange, std::unique_ptr<PiecePath>* out) = 0;
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_PIECE_PATH_H_
