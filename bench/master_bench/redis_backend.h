// master_bench: the Redis one trial runs against — a private redis-server, or a private Redis
// Cluster of 3 masters and 3 replicas on loopback (redis/tests/redis_cluster.h, as the cluster
// e2e tests start it) — and what each shard's master took in. Started and stopped by the
// trial's thread; everything it starts dies with it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "redis/store.h"
#include "redis/tests/redis_cluster.h"
#include "redis/tests/redis_server.h"
#include "redis/url.h"

namespace ft::bench {

class RedisBackend {
 public:
  // `cluster`: a 3-shard cluster; else one server (`binary`, as --redis-server names it).
  RedisBackend(bool cluster, std::string binary);

  Status Start();
  bool cluster() const { return cluster_.has_value(); }
  // What ftmaster's --redis takes (the password goes in FT_REDIS_PASSWORD): redis://host:port,
  // or redis+cluster://host:port,host:port,host:port (the three masters as seeds).
  std::string url() const;
  const std::string& password() const;
  // With the password: for this process's clients.
  redis::Endpoint endpoint() const;
  // A connected client: a Client, or a ClusterClient with its slot map loaded.
  Status Open(std::unique_ptr<redis::Commands>* out) const;

  // What one shard's master has taken in since it started (INFO stats).
  struct Shard {
    std::string addr;          // host:port
    uint64_t input_bytes = 0;  // total_net_input_bytes
    uint64_t commands = 0;     // total_commands_processed
  };
  // One per shard (one for a single server), in the order of their slot ranges.
  Status Shards(std::vector<Shard>* out);
  // "a/b/c" of each shard's rate between two Shards() readings `seconds` apart.
  static std::string Rates(const std::vector<Shard>& before, const std::vector<Shard>& after,
                           double seconds, bool bytes);

 private:
  std::vector<redis::testing::RedisServer*> Masters();

  std::optional<redis::testing::RedisServer> server_;
  std::optional<redis::testing::RedisCluster> cluster_;
};

}  // namespace ft::bench
