#include "ftmaster/lease.h"

#include "common/log.h"

namespace ft::master {
namespace {

// PEXPIRE only while the value is still ours.
constexpr const char* kRenewScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kReleaseScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

}  // namespace

LeaderLease::LeaderLease(std::string key, std::string id, std::chrono::milliseconds lease)
    : key_(std::move(key)), id_(std::move(id)), lease_(std::max(lease, std::chrono::milliseconds(30))) {}

bool LeaderLease::Tick(redis::Client& client, Clock::time_point now) {
  if (now >= next_attempt_ && client.connected()) {
    if (held_) {
      (void)Renew(client, now);
    } else {
      (void)Acquire(client, now);
    }
  }
  return leading(now);
}

bool LeaderLease::Acquire(redis::Client& client, Clock::time_point now) {
  const std::string px = std::to_string(lease_.count());
  redis::Reply reply;
  Status s = client.Run({"SET", key_, id_, "NX", "PX", px}, &reply);
  if (!s.ok()) {
    next_attempt_ = now + lease_ / 10;
    return false;
  }
  bool got = reply.Is("OK");
  if (!got) {
    // Our own id (a restart under the same --id within the lease): take it back now.
    Status r = client.Run({"EVAL", kRenewScript, "1", key_, id_, px}, &reply);
    got = r.ok() && reply.integer() == 1;
  }
  next_attempt_ = now + lease_ / 3;
  if (!got) {
    if (!reported_wait_) {
      redis::Reply holder;
      std::string who = "?";
      if (client.Run({"GET", key_}, &holder).ok() && holder.is_string()) who = holder.str();
      FT_LOG(Info, Master, "standing by: master '{}' holds the lease {} (this master is '{}'); "
             "taking over if it lapses", who, key_, id_);
      reported_wait_ = true;
    }
    return false;
  }
  held_ = true;
  ++term_;
  reported_wait_ = false;
  valid_until_ = now + lease_ * 9 / 10;
  FT_LOG(Info, Master, "leading as '{}' (lease {} ms, term {})", id_, lease_.count(), term_);
  return true;
}

bool LeaderLease::Renew(redis::Client& client, Clock::time_point now) {
  redis::Reply reply;
  Status s = client.Run({"EVAL", kRenewScript, "1", key_, id_, std::to_string(lease_.count())},
                        &reply);
  if (!s.ok()) {
    // Unknown: the term stands until valid_until_, then this master stops acting.
    next_attempt_ = now + lease_ / 10;
    FT_LOG(Warn, Master, "cannot renew the leader lease: {}; acting for at most {} ms more",
           s.message(),
           std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                    valid_until_ - now).count()));
    return false;
  }
  if (reply.integer() != 1) {
    held_ = false;
    next_attempt_ = now;  // try to acquire at once: the lease may simply have expired
    FT_LOG(Warn, Master, "lost the leader lease {} (it expired or another master took it); "
           "standing by", key_);
    return false;
  }
  valid_until_ = now + lease_ * 9 / 10;
  next_attempt_ = now + lease_ / 3;
  return true;
}

void LeaderLease::Release(redis::Client& client) {
  if (!held_ || !client.connected()) return;
  redis::Reply reply;
  if (client.Run({"EVAL", kReleaseScript, "1", key_, id_}, &reply).ok() && reply.integer() == 1) {
    FT_LOG(Info, Master, "released the leader lease {}", key_);
  }
  held_ = false;
}

}  // namespace ft::master
