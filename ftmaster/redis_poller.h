// ft::master::RedisPoller: one periodic read of the job's Redis beside the loop — a thread of its
// own with a connection of its own (a RedisStore: one server or a Redis Cluster), calling `round`
// every `interval` until Stop(). The metrics (master_metrics.h) and the live page (page/reader.h)
// each read through one, so the loop is never held and a standby master shows the same job.
#ifndef FT_FTMASTER_REDIS_POLLER_H_
#define FT_FTMASTER_REDIS_POLLER_H_

#include <functional>
#include <thread>

#include "common/mutex.h"
#include "common/units.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::master {

class RedisPoller {
 public:
  // Called on the poller's thread once per interval: `redis` connected, or nullptr when Redis
  // cannot be reached now (the store logs why and reconnects with a backoff).
  using Round = std::function<void(redis::Commands* redis)>;

  RedisPoller(redis::Endpoint endpoint, Duration interval, Round round);
  ~RedisPoller();  // Stop()
  RedisPoller(const RedisPoller&) = delete;
  RedisPoller& operator=(const RedisPoller&) = delete;

  // The thread; Stop() joins it, after which no round runs. Idempotent.
  void Start();
  void Stop();

 private:
  void Loop();

  const redis::Endpoint endpoint_;
  const Duration interval_;
  const Round round_;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_REDIS_POLLER_H_
