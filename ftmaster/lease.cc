#include "ftmaster/lease.h"

#include "common/log.h"
#include "schema/node_sets.h"

namespace ft::master {
LeaderLease::LeaderLease(std::string key, std::string id, std::chrono::milliseconds lease)
    : key_(std::move(key)), id_(std::move(id)), lease_(std::max(lease, std::chrono::milliseconds(30))) {}

bool LeaderLease::Tick(redis::Store& client, Clock::time_point now) {
  if (now >= next_attempt_ && client.connected()) {
    if (held_) {
      (void)Renew(client, now);
    } else {
      (void)Acquire(client, now);
    }
  }
  return leading(now);
}

bool LeaderLease::Acquire(redis::Store& client, Clock::time_point now) {
  redis::Reply reply;
  Status s = client.Run(schema::ClaimLease(key_, id_, lease_), &reply);
  if (!s.ok()) {
    next_attempt_ = now + lease_ / 10;
    return false;
  }
  bool got = reply.Is("OK");
  if (!got) {
    // Our own id (a restart under the same --id within the lease): take it back now.
    bool held = false;
    Status r = client.RenewIfHeld(key_, id_, lease_.count(), &held);
    got = r.ok() && held;
  }
  next_attempt_ = now + lease_ / 3;
  if (!got) {
    if (!reported_wait_) {
      redis::Reply holder;
      std::string who = "?";
      if (client.Run(schema::GetLeaseHolder(key_), &holder).ok() && holder.is_string()) who = holder.str();
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

bool LeaderLease::Renew(redis::Store& client, Clock::time_point now) {
  bool held = false;
  Status s = client.RenewIfHeld(key_, id_, lease_.count(), &held);
  if (!s.ok()) {
    // Unknown: the term stands until valid_until_, then this master stops acting.
    next_attempt_ = now + lease_ / 10;
    FT_LOG(Warn, Master, "cannot renew the leader lease: {}; acting for at most {} ms more",
           s.message(),
           std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                    valid_until_ - now).count()));
    return false;
  }
  if (!held) {
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

void LeaderLease::Release(redis::Store& client) {
  if (!held_ || !client.connected()) return;
  bool held = false;
  if (client.DeleteIfHeld(key_, id_, &held).ok() && held) {
    FT_LOG(Info, Master, "released the leader lease {}", key_);
  }
  held_ = false;
}

}  // namespace ft::master
