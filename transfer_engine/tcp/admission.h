// ft::rdma::Admission: which connections the TCP server keeps, and the log of the peers it
// refused. Descriptors are the worker's too (Redis, arenas, plan files): connections are capped
// in total and, before they authenticate, per address and in total (ServerOptions); one over a
// cap is closed the moment it is accepted. A scanner or a misconfigured job can knock thousands
// of times a minute, so refusals are logged once per address per minute, with how many were
// not, for a bounded number of addresses.
//
// Owned by the server (tcp_server.cc); every method may be called from any of its I/O threads.
#ifndef FT_TRANSFER_ENGINE_TCP_ADMISSION_H_
#define FT_TRANSFER_ENGINE_TCP_ADMISSION_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace ft::rdma {

class Admission {
 public:
  static constexpr size_t kMaxRefusalLogAddresses = 1024;

  // ServerOptions' caps, before the first Admit (Server::Start). Never more connections than a
  // quarter of the process's descriptors (the rest are the worker's own); at most half of them
  // unauthenticated.
  Status SetCaps(size_t max_connections, size_t max_unauthenticated_per_address);
  size_t max_connections() const { return max_connections_; }
  size_t max_unauthenticated() const { return max_unauthenticated_; }

  // Whether a new connection from `address` may stay; counts it when it may.
  bool Admit(const std::string& address);
  // An admitted connection proved the secret: it no longer counts as unauthenticated.
  void Authenticated(const std::string& address);
  // An admitted connection ended.
  void Release(const std::string& address, bool authenticated);

  // A peer refused (`why` says for what): counted, and logged unless that address (or, with the
  // log full, any other) was logged within the minute.
  void NoteRefused(const std::string& address, std::string_view why);

  uint64_t over_limit() const { return over_limit_.load(std::memory_order_relaxed); }
  uint64_t auth_refused() const { return auth_refused_.load(std::memory_order_relaxed); }
  size_t refusal_log_addresses() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct RefusalLogState {
    Clock::time_point last{};
    uint64_t unlogged = 0;
    // A refusal at `now`: true when it is logged (none was within the log interval), with the
    // refusals not logged before it in *unlogged_before; false when it is only counted.
    bool Due(Clock::time_point now, uint64_t* unlogged_before);
  };

  void ForgetUnauthenticated(const std::string& address) REQUIRES(admission_mu_);

  size_t max_connections_ = 0;
  size_t max_unauthenticated_ = 0;
  size_t max_unauthenticated_per_address_ = 0;
  Mutex admission_mu_;
  size_t open_connections_ GUARDED_BY(admission_mu_) = 0;
  size_t open_unauthenticated_ GUARDED_BY(admission_mu_) = 0;
  std::map<std::string, size_t> unauthenticated_by_address_ GUARDED_BY(admission_mu_);
  Clock::time_point last_over_limit_log_ GUARDED_BY(admission_mu_) = {};
  std::atomic<uint64_t> over_limit_{0};
  std::atomic<uint64_t> auth_refused_{0};

  // Bounded: at most kMaxRefusalLogAddresses addresses; entries older than the interval make
  // room, and when none is, refusals of new addresses are counted in `refusal_others_`.
  mutable Mutex refusal_mu_;
  std::map<std::string, RefusalLogState> refusal_log_ GUARDED_BY(refusal_mu_);
  RefusalLogState refusal_others_ GUARDED_BY(refusal_mu_);
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_TCP_ADMISSION_H_
