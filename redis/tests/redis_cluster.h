// A real Redis Cluster for tests: 3 masters and 3 replicas (redis-server --cluster-enabled
// yes) on loopback, one password for all of them (requirepass + masterauth), the slots split
// in three, built with CLUSTER ADDSLOTSRANGE / MEET / REPLICATE and waited for until every
// node says cluster_state:ok and every replica's link is up. KillMaster() is a shard's master
// dying; WaitForOwner() waits until the cluster promoted its replica. The tests/redis_cluster_fixture.py
// is the Python twin (built with redis-cli --cluster create, as an operator would).
#ifndef FT_REDIS_TESTS_REDIS_CLUSTER_H_
#define FT_REDIS_TESTS_REDIS_CLUSTER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "redis/tests/redis_server.h"
#include "redis/url.h"

namespace ft::redis::testing {

class RedisCluster {
 public:
  // node_timeout: cluster-node-timeout. The tests' 1 s makes a failover quick; a benchmark
  // that loads both cores for minutes wants more, or a node busy for a second is marked
  // failed and the cluster answers CLUSTERDOWN meanwhile.
  explicit RedisCluster(std::chrono::milliseconds node_timeout = std::chrono::milliseconds(1000))
      : node_timeout_(node_timeout) {}
  ~RedisCluster() = default;

  // Starts the 6 servers and forms the cluster (up to ~30 s on a loaded machine).
  Status Start();

  // redis+cluster://127.0.0.1:<first master> with the password (for a ClusterClient).
  Endpoint endpoint() const;
  const std::string& password() const { return password_; }
  size_t size() const { return servers_.size(); }
  RedisServer& server(size_t i) { return *servers_[i]; }
  // "127.0.0.1:<port>" of the node that masters `slot` now, asked of a live node.
  Status OwnerOf(int slot, std::string* addr);
  // The index of the server at "127.0.0.1:<port>"; -1 when none.
  int IndexOf(const std::string& addr) const;
  // SIGKILLs the master of `slot`; *index: which server that was.
  Status KillMasterOf(int slot, int* index);
  // Waits until a live node reports another master than `old_addr` for `slot`, with cluster_state:ok.
  Status WaitForNewOwner(int slot, const std::string& old_addr, std::chrono::milliseconds timeout);

 private:
  Status Ask(size_t i, const std::vector<std::string>& argv, std::string* text);

  std::chrono::milliseconds node_timeout_;
  std::string password_;
  std::vector<std::unique_ptr<RedisServer>> servers_;  // 0..2 masters, 3..5 their replicas
};

}  // namespace ft::redis::testing

#endif  // FT_REDIS_TESTS_REDIS_CLUSTER_H_
