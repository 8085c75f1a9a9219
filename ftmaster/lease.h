// ft::master::LeaderLease: which of a job's masters acts. The lease is the key
// Keys::Leader() holding the leader's id with a PX expiry:
//   - acquire: SET key id NX PX lease (a master restarted under the same --id takes its own
//     unexpired lease back at once);
//   - renew every lease/3 with Store::RenewIfHeld (PEXPIRE only while the value is still ours);
//   - a renewal that finds another value (or none) ends the term at once; a renewal that
//     cannot reach Redis leaves the term running only until the local deadline (the last
//     successful renewal's send time + 0.9 lease), so a cut-off leader stops acting before
//     its key can expire on the server;
//   - a follower retries the acquire every lease/3: it leads within lease + lease/3 of the
//     leader's last renewal, inside the two lease periods the design promises.
// Each acquisition starts a new term(): whatever the master keeps in memory must be reloaded
// from Redis then (another master may have acted in between). Writes that matter are fenced
// by the same key on the server (see master_loop.cc), so even a leader that has not noticed
// its loss cannot write. Not thread-safe: the master's loop owns it.
#ifndef FT_FTMASTER_LEASE_H_
#define FT_FTMASTER_LEASE_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "redis/store.h"

namespace ft::master {

class LeaderLease {
 public:
  using Clock = std::chrono::steady_clock;

  LeaderLease(std::string key, std::string id, std::chrono::milliseconds lease);

  // Acquires or renews when due (at most one Redis command). Returns leading(now).
  bool Tick(redis::Store& store, Clock::time_point now);
  // This master may act now.
  bool leading(Clock::time_point now) const { return held_ && now < valid_until_; }
  // Deletes the key if it is still ours (a clean shutdown hands over at once).
  void Release(redis::Store& store);

  const std::string& id() const { return id_; }
  const std::string& key() const { return key_; }
  std::chrono::milliseconds lease() const { return lease_; }
  // Acquisitions so far; a change means "reload your state".
  uint64_t term() const { return term_; }

 private:
  bool Acquire(redis::Store& store, Clock::time_point now);
  bool Renew(redis::Store& store, Clock::time_point now);

  std::string key_;
  std::string id_;
  std::chrono::milliseconds lease_;
  bool held_ = false;
  uint64_t term_ = 0;
  Clock::time_point valid_until_{};
  Clock::time_point next_attempt_{};
  bool reported_wait_ = false;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_LEASE_H_
