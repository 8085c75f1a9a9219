#include "ftmaster/redis_poller.h"

#include <chrono>
#include <utility>

#include "common/log.h"
#include "redis/redis_store.h"

namespace ft::master {

RedisPoller::RedisPoller(redis::Endpoint endpoint, Duration interval, Round round)
    : endpoint_(std::move(endpoint)), interval_(interval), round_(std::move(round)) {}

RedisPoller::~RedisPoller() { Stop(); }

void RedisPoller::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void RedisPoller::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void RedisPoller::Loop() {
  redis::ReconnectPolicy policy;
  policy.log_subsystem = Subsystem::kMaster;
  redis::RedisStore redis(endpoint_, policy);
  const auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(interval_);
  MutexLock lock(&mu_);
  while (!stopping_) {
    lock.Unlock();
    round_(redis.Ensure(std::chrono::steady_clock::now()) ? &redis : nullptr);
    lock.Lock();
    cv_.WaitFor(&mu_, interval, [this]() REQUIRES(mu_) { return stopping_; });
  }
}

}  // namespace ft::master
