// ft::redis::RedisStore: the Store over a real Redis (a ReconnectingClient). Each atomic
// operation is one Lua script (EVAL), so it runs on the server in one step: no other client's
// command comes in between, and a leader that lost its lease cannot write.
// With endpoint.cluster (redis+cluster://) the commands go through a ClusterClient
// (redis/cluster.h): each routed by its first key's slot, a script by its KEYS[1], so every
// key one script touches must share that slot (the fence's: the job-wide tag).
// Not thread-safe: one thread owns it.
#ifndef FT_REDIS_REDIS_STORE_H_
#define FT_REDIS_REDIS_STORE_H_

#include <string>
#include <vector>

#include <memory>

#include "redis/client.h"
#include "redis/cluster.h"
#include "redis/store.h"

namespace ft::redis {

class RedisStore : public Store {
 public:
  RedisStore(Endpoint endpoint, ReconnectPolicy policy);

  bool connected() const override { return cluster_ ? cluster_->connected() : redis_.connected(); }
  Status Run(const Argv& argv, Reply* out) override;
  Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) override;
  std::string Where() const override;

  bool Ensure(Clock::time_point now) override {
    return cluster_ ? cluster_->Ensure(now) : redis_.Ensure(now);
  }
  Status RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                     bool* held) override;
  Status DeleteIfHeld(const std::string& key, const std::string& value, bool* held) override;
  Status FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) override;
  Status FencedGatedAppend(const Fence& fence, const GatedAppend& append, std::vector<bool>* won,
                           bool* held) override;

  ReconnectingClient& reconnecting() { return redis_; }
  ClusterClient* cluster() { return cluster_.get(); }  // null for a single server

 private:
  ReconnectingClient redis_;               // a single server (unused with a cluster)
  std::unique_ptr<ClusterClient> cluster_;  // a Redis Cluster
};

}  // namespace ft::redis

#endif  // FT_REDIS_REDIS_STORE_H_
