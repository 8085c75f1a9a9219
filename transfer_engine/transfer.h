// ft::rdma: pulling a checkpoint copy from a peer's memory. One interface, two transports.
//
// A Server exposes read-only regions by name (ftworker: its node's committed arenas and
// local-tier copies); a client pulls byte ranges of a named region straight into a
// destination buffer. Every connection starts on TCP (the control channel): version, then
// challenge and response over the per-job secret (HMAC-SHA256); an unauthenticated peer gets
// nothing and is logged. The bytes then flow over RDMA READ when both sides have a verbs
// device (transfer_engine/verbs/), otherwise over several TCP connections in pipelined pieces. The
// wire format is docs/transfer-protocol.md.
//
// Pull() fetches one copy held by several peers (the verified DP replicas of a shard): pieces
// are spread over the connections; every manifest chunk is verified as soon as its bytes are
// in; a chunk that fails verification, or that a dead, slow or refusing peer never delivered,
// is fetched from the next source, and after the last source from `fallback` (the remote
// directory). A verbs path whose completions fail hands its remaining pieces to TCP.
#ifndef FT_TRANSFER_ENGINE_TRANSFER_H_
#define FT_TRANSFER_ENGINE_TRANSFER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transfer_engine/piece_path.h"

namespace ft::rdma {

inline constexpr uint32_t kProtocolVersion = 2;  // 2: sessions sealed after the handshake
inline constexpr uint64_t kDefaultPieceBytes = 4ull << 20;  // one pipelined TCP piece

// ---- the server side ----------------------------------------------------------------------

// Read-only bytes a server hands out, e.g. one committed arena copy.
class Region {
 public:
  virtual ~Region() = default;
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;
  // Small bytes sent with the open reply (the copy's manifest); at most kMaxMetaBytes.
  virtual std::string_view meta() const = 0;
  // False once the bytes may have changed under the reader (the arena was overwritten by a
  // newer save): the server then fails further reads of this open region with NotReady.
  virtual bool StillValid() const = 0;
};
inline constexpr uint64_t kMaxMetaBytes = 16ull << 20;

class RegionProvider {
 public:
  virtual ~RegionProvider() = default;
  // Resolves a region name, e.g. "arena/<step>/<rank>" or "local/<step>/<rank>". NotFound when
  // this node holds no such copy. Called from the server's I/O threads.
  virtual Status Open(std::string_view name, std::shared_ptr<const Region>* out) = 0;
};

struct ServerOptions {
  std::string listen_address;  // FT_LISTEN: the node's cluster address; "0.0.0.0" only when set so
  uint16_t port = 0;           // 0: any free port (port() says which)
  std::string secret;          // the job's transfer secret; empty: Start() refuses
  RegionProvider* provider = nullptr;
  // e.g. verbs (transfer_engine/verbs/verbs_transport.h); null: TCP only
  FastPathServer* fast_path = nullptr;
  int io_threads = 2;
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds idle_timeout{60000};
  // Connections held at once (never above a quarter of RLIMIT_NOFILE: the rest of the
  // process's descriptors stay its own), and of those not yet authenticated, how many from one
  // address (the whole of them: half the total). One over a cap is closed as it is accepted.
  size_t max_connections = 512;
  size_t max_unauthenticated_per_address = 16;
};

struct ServerStats {
  uint64_t connections = 0;
  uint64_t auth_refused = 0;
  uint64_t bytes_sent = 0;
  uint64_t reads = 0;
  uint64_t over_limit = 0;             // connections closed as accepted: over a cap
  uint64_t forged = 0;                 // sessions ended by a frame that failed its seal
  uint64_t refusal_log_addresses = 0;  // addresses the refusal log remembers now (bounded)

  // The counts of another server added (totals over servers that came and went); the refusal
  // log's size is a level, not a count: it stays this one's.
  ServerStats& operator+=(const ServerStats& o) {
    connections += o.connections;
    auth_refused += o.auth_refused;
    bytes_sent += o.bytes_sent;
    reads += o.reads;
    over_limit += o.over_limit;
    forged += o.forged;
    return *this;
  }
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens on listen_address:port and starts the I/O threads.
  Status Start();
  uint16_t port() const;
  // Closes the listener and every connection; waits for the I/O threads.
  void Stop();
  ServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- the client side ----------------------------------------------------------------------

struct Peer {
  std::string node;     // for logs and PullResult::bytes_by_source
  std::string address;  // host or IP
  uint16_t port = 0;
  bool operator==(const Peer&) const = default;
};

struct PullOptions {
  std::string secret;
  int connections = 4;                     // TCP connections per peer
  uint64_t piece_bytes = kDefaultPieceBytes;
  int pieces_in_flight = 4;                // per connection (pipelining)
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds io_timeout{10000};  // a peer silent this long is given up
  // A connection delivering less than this per second over an io_timeout window is given up
  // too (a trickling peer: transfer_engine/rate_floor.h); its pieces go to the next source. 0: no
  // floor.
  uint64_t min_bytes_per_second = 1ull << 20;
  // Data bytes encrypted on the wire too (AES-256-GCM; the control frames always are, and every
  // frame is authenticated). Costs the server a copy and both sides the cipher (bench-pull
  // measures it); the verbs path, which cannot encrypt, is not used then.
  bool encrypt_data = false;
  FastPathClient* fast_path = nullptr;     // e.g. verbs; null: TCP only
};

struct RegionInfo {
  uint64_t size = 0;
  std::string meta;
};

// Opens `name` on `peer` and returns its size and meta (the manifest), nothing else read.
Status Stat(const PullOptions& options, const Peer& peer, const std::string& name, RegionInfo* out);

struct PullSource {
  Peer peer;
  std::string region;  // its name on that peer
};

struct PullRequest {
  std::vector<PullSource> sources;  // the same bytes on each, in order of preference
  uint8_t* dest = nullptr;
  uint64_t bytes = 0;               // region size; dest holds at least this
  uint64_t chunk_bytes = 0;         // the manifest's chunk size: the unit verified and refetched
  // Verifies chunk `index` ([index*chunk_bytes, +len) of dest) once all its bytes are in. Any
  // thread; may run concurrently for different chunks.
  std::function<bool(uint64_t index, const uint8_t* data, uint64_t len)> verify;
  // Last resort for a chunk no source delivered verified: reads it into `dest` (e.g. from the
  // remote directory). Empty: that chunk fails the pull.
  std::function<Status(uint64_t offset, uint64_t len, uint8_t* dest)> fallback;
  // Whether a source's meta (its open reply's manifest) describes these bytes. The verified DP
  // replicas of a shard hold the same bytes under manifests that differ (each names its own
  // rank and dp), so a puller that knows the content digest says which it accepts. A source it
  // refuses is skipped with a note. Empty: every source's meta must equal the first's, byte
  // for byte.
  std::function<bool(std::string_view meta)> accepts_meta;
};

struct PullResult {
  uint64_t bytes = 0;
  double seconds = 0;
  double first_byte_ms = -1;        // request sent -> first data byte in
  uint64_t refetched_chunks = 0;    // chunks fetched again (bad checksum, peer lost)
  uint64_t fallback_chunks = 0;     // chunks read through `fallback`
  std::map<std::string, uint64_t> bytes_by_source;  // "node/tcp", "node/verbs", "fallback"
  std::vector<std::string> notes;   // one line per source given up, and why
};

// All or nothing: OK when every chunk of dest verified; otherwise the first cause (Corrupt,
// Unavailable, Timeout, NotFound) with PullResult::notes saying what each source did.
Status Pull(const PullOptions& options, const PullRequest& request, PullResult* result);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_TRANSFER_H_
