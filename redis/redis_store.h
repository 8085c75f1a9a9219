// ft::redis::RedisStore: the Store over a real Redis (a ReconnectingClient). Each atomic
// operation is one Lua script (EVAL), so it runs on the server in one step: no other client's
// command comes in between, and a leader that lost its lease cannot write.
// Not thread-safe: one thread owns it.
#ifndef FT_REDIS_REDIS_STORE_H_
#define FT_REDIS_REDIS_STORE_H_

#include <string>
#include <vector>

#include "redis/client.h"
#include "redis/store.h"

namespace ft::redis {

class RedisStore : public Store {
 public:
  RedisStore(Endpoint endpoint, ReconnectPolicy policy);

  bool connected() const override { return redis_.connected(); }
  Status Run(const Argv& argv, Reply* out) override;
  Status PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) override;
  std::string Where() const override;

  bool Ensure(Clock::time_point now) override { return redis_.Ensure(now); }
  Status RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                     bool* held) override;
  Status DeleteIfHeld(const std::string& key, const std::string& value, bool* held) override;
  Status FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) override;
  Status FencedGatedAppend(const Fence& fence, const GatedAppend& append, std::vector<bool>* won,
                           bool* held) override;

  ReconnectingClient& reconnecting() { return redis_; }

 private:
  ReconnectingClient redis_;
};

}  // namespace ft::redis

#endif  // FT_REDIS_REDIS_STORE_H_
