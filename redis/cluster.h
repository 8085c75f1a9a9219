// A Redis Cluster client over hiredis: the same Commands interface as one Client, for a job
// whose keys are spread over a cluster's hash slots (docs/redis-schema.md, "Slots").
//
// - Slots: CRC16/XMODEM of the key's hash tag (the part between the first '{' and the next
//   '}' when that is not empty, else the whole key) mod 16384, as Redis computes them.
// - Routing: a command goes to the master that owns the slot of its first key (EVAL/EVALSHA:
//   KEYS[1]); commands without a key (PING, INFO) go to any master. A command whose keys hash
//   to different slots is refused here (kInvalidArgument) before it reaches a server: the
//   server would refuse it with CROSSSLOT anyway, and the message names the keys.
// - The slot map comes from CLUSTER SLOTS, asked of any reachable node (known masters first,
//   then the seeds). MOVED: the slot moved for good: the map is refreshed and the command
//   retried on the new owner. ASK: the slot is migrating: ASKING + the command on the named
//   node, once, the map unchanged. A connection that fails (a master died) drops that
//   connection and refreshes the map from the other nodes: after a failover the promoted
//   replica owns the slots. At most kMaxRedirects tries per command, each bounded by the
//   connect and I/O timeouts, so a call returns within a few timeouts; a node that just
//   failed is not retried before its backoff (100 ms doubling to policy.max_backoff), so a
//   dead master costs a loop one connect timeout per backoff period, not one per command.
// - A pipeline is split per node, and every node's part is in flight at once (written out to
//   all nodes, then read back), so a flush costs one round trip whatever the number of
//   shards. Replies are reassembled in the commands' order; a redirected one is followed on
//   its own, in place. On a connection failure `received` is the prefix up to the first
//   missing reply; commands after it may have run on other nodes, so a caller that resends
//   them (Outbox) delivers them at least once, as after any broken connection.
//
// One hiredis connection per master, opened when first needed. Not thread-safe: one thread
// owns a ClusterClient (as a Client).
#ifndef FT_REDIS_CLUSTER_H_
#define FT_REDIS_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "redis/client.h"
#include "redis/reply.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster uses.
uint16_t Crc16(std::string_view data);
// The hash slot of a key: CRC16 of its hash tag (or the whole key) mod 16384.
int KeySlot(std::string_view key);
// The position of the keys in argv that decide where it runs: argv indexes, first one first.
// Empty for a command without keys. EVAL/EVALSHA: the KEYS; XREAD/XREADGROUP: the streams;
// MSET/MGET/DEL/EXISTS/UNLINK/TOUCH/SUNION...: every key; otherwise argv[1].
std::vector<size_t> CommandKeys(const Argv& argv);
// The slot argv runs in: -1 when it has no key. kInvalidArgument when its keys hash to
// different slots (a multi-key command must stay in one slot).
Status CommandSlot(const Argv& argv, int* slot);

// One range of CLUSTER SLOTS: [first, last] owned by master (host, port).
struct SlotRange {
  int first = 0;
  int last = 0;
  std::string host;
  int port = 0;
};
// Parses a CLUSTER SLOTS reply; an empty host (the node that answered) becomes `asked_host`.
// kCorrupt for a reply of the wrong shape.
Status ParseClusterSlots(const Reply& reply, std::string_view asked_host,
                         std::vector<SlotRange>* out);

class ClusterClient : public Commands {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMaxRedirects = 5;
  // A command that finds its master gone reloads the map at most this often.
  static constexpr std::chrono::milliseconds kMinRefreshGap{100};

  // endpoint.cluster: endpoint.seeds are the nodes asked for the slot map first; user and
  // password are used on every node.
  ClusterClient(Endpoint endpoint, ReconnectPolicy policy);
  ~ClusterClient() override;

  // Loads the slot map when there is none and an attempt is due (backoff as a
  // ReconnectingClient's). True when a slot map is loaded: commands can be routed. Connections
  // to single masters are (re)opened by the commands that need them.
  bool Ensure(Clock::time_point now);
  // Ensure, retried until `timeout` (for a command-line tool).
  Status Connect(std::chrono::milliseconds timeout);

  bool connected() const override { return !owner_.empty(); }
  Status Run(const Argv& argv, Reply* out) override;
  // Error replies stay replies (as Client::Run with kKeep); redirects are followed first.
  Status RunKeep(const Argv& argv, Reply* out);
  Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) override;
  std::string Where() const override;

  // Observability, for tests and logs.
  uint64_t map_refreshes() const { return map_refreshes_; }
  uint64_t redirects() const { return redirects_; }
  // "host:port" of the master that owns `slot` in the current map (empty when unknown).
  std::string OwnerOf(int slot) const;
  const Status& last_error() const { return last_error_; }

 private:
  struct Node {
    std::string host;
    int port = 0;
    Client client;
    int failures = 0;
    Clock::time_point retry_at{};  // not before: it failed just now
  };

  Status RefreshMap();
  Node* NodeFor(const std::string& addr);
  Status Connected(Node* node);  // opens the connection when needed (respecting retry_at)
  void NodeFailed(Node* node, const Status& why);
  std::string AnyMaster() const;
  Status RouteOf(const Argv& argv, std::string* addr);
  // One command, following redirects; error replies stay replies.
  Status RunFollowing(const Argv& argv, Reply* out);
  std::chrono::milliseconds Backoff(int failures);

  Endpoint endpoint_;
  ReconnectPolicy policy_;
  std::mt19937_64 rng_;
  std::vector<std::string> owner_;  // slot -> "host:port" of its master; empty: no map
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // by "host:port"
  bool map_stale_ = false;
  int map_failures_ = 0;
  Clock::time_point next_map_attempt_{};
  Clock::time_point last_refresh_{};
  uint64_t map_refreshes_ = 0;
  uint64_t redirects_ = 0;
  bool reported_down_ = false;
  Status last_error_;
};

// A connected Commands for a command-line tool: a Client for a single server, a
// ClusterClient (slot map loaded) for endpoint.cluster.
Status OpenCommands(const Endpoint& endpoint, std::chrono::milliseconds connect_timeout,
                    std::chrono::milliseconds io_timeout, std::unique_ptr<Commands>* out);

}  // namespace ft::redis

#endif  // FT_REDIS_CLUSTER_H_
