#include "transfer_engine/tcp/admission.h"

#include <sys/resource.h>

#include <algorithm>

#include "common/log.h"

namespace ft::rdma {
namespace {

constexpr auto kRefusalLogInterval = std::chrono::seconds(60);

}  // namespace

Status Admission::SetCaps(size_t max_connections, size_t max_unauthenticated_per_address) {
  if (max_connections < 1 || max_unauthenticated_per_address < 1)
    return Status::InvalidArgument("transfer server: connection caps below 1");
  size_t cap = max_connections;
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    cap = std::min<size_t>(cap, std::max<size_t>(8, static_cast<size_t>(nofile.rlim_cur) / 4));
  max_connections_ = cap;
  max_unauthenticated_ = std::max<size_t>(1, cap / 2);
  max_unauthenticated_per_address_ = max_unauthenticated_per_address;
  return Status::Ok();
}

bool Admission::Admit(const std::string& address) {
  MutexLock lock(&admission_mu_);
  size_t& mine = unauthenticated_by_address_[address];
  const bool ok = open_connections_ < max_connections_ && open_unauthenticated_ < max_unauthenticated_ &&
                  mine < max_unauthenticated_per_address_;
  if (!ok) {
    if (mine == 0) unauthenticated_by_address_.erase(address);
    over_limit_.fetch_add(1, std::memory_order_relaxed);
    Clock::time_point now = Clock::now();
    if (now - last_over_limit_log_ >= kRefusalLogInterval) {
      last_over_limit_log_ = now;
      FT_LOG(Warn, Rdma,
             "transfer connections over their cap (from {}: {} open, {} unauthenticated, {} of "
             "them from that address; caps {}, {}, {}): closed as accepted, more are not logged "
             "for a minute. A flood of connections that never authenticate: find its source",
             address, open_connections_, open_unauthenticated_, mine, max_connections_,
             max_unauthenticated_, max_unauthenticated_per_address_);
    }
    return false;
  }
  ++mine;
  ++open_unauthenticated_;
  ++open_connections_;
  return true;
}

void Admission::Authenticated(const std::string& address) {
  MutexLock lock(&admission_mu_);
  ForgetUnauthenticated(address);
}

void Admission::Release(const std::string& address, bool authenticated) {
  MutexLock lock(&admission_mu_);
  --open_connections_;
  if (!authenticated) ForgetUnauthenticated(address);
}

void Admission::ForgetUnauthenticated(const std::string& address) {
  --open_unauthenticated_;
  auto it = unauthenticated_by_address_.find(address);
  if (it != unauthenticated_by_address_.end() && --it->second == 0) unauthenticated_by_address_.erase(it);
}

void Admission::NoteRefused(const std::string& address, std::string_view why) {
  auth_refused_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(&refusal_mu_);
  Clock::time_point now = Clock::now();
  if (refusal_log_.size() >= kMaxRefusalLogAddresses && refusal_log_.count(address) == 0) {
    std::erase_if(refusal_log_, [&](const auto& entry) { return now - entry.second.last >= kRefusalLogInterval; });
  }
  uint64_t unlogged = 0;
  if (refusal_log_.size() >= kMaxRefusalLogAddresses && refusal_log_.count(address) == 0) {
    if (!refusal_others_.Due(now, &unlogged)) return;
    FT_LOG(Warn, Rdma,
           "refused transfer peer {}: {} (refusals from {} other addresses; {} not logged); it gets "
           "nothing. Many addresses knocking: a scan or a misconfigured job on this network",
           address, why, kMaxRefusalLogAddresses, unlogged);
    return;
  }
  if (!refusal_log_[address].Due(now, &unlogged)) return;
  FT_LOG(Warn, Rdma,
         "refused transfer peer {}: {} ({} earlier refusals not logged); it gets nothing. Check "
         "that it belongs to this job and holds the job's transfer secret",
         address, why, unlogged);
}

bool Admission::RefusalLogState::Due(Clock::time_point now, uint64_t* unlogged_before) {
  if (last != Clock::time_point{} && now - last < kRefusalLogInterval) {
    ++unlogged;
    return false;
  }
  *unlogged_before = unlogged;
  last = now;
  unlogged = 0;
  return true;
}

size_t Admission::refusal_log_addresses() const {
  MutexLock lock(&refusal_mu_);
  return refusal_log_.size();
}

}  // namespace ft::rdma
