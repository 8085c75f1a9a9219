#include "ftworker/transfer/transfer_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.h"
#include "proto/codec.h"
#include "proto/transfer_codec.h"
#include "schema/node_hashes.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "transfer_engine/auth.h"

namespace ft::worker {

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecretPollNs = 500 * kMs;    // until there is a secret
constexpr uint64_t kSecretCheckNs = 2000 * kMs;  // while serving: has the master made a new one?
constexpr uint64_t kStartRetryNs = 5000 * kMs;
constexpr uint64_t kEndpointCheckNs = 1000 * kMs;
constexpr uint64_t kStatsCheckNs = 1000 * kMs;
constexpr uint64_t kStatsLogNs = 30000 * kMs;

}  // namespace

TransferService::TransferService(TransferServiceOptions options)
    : options_(std::move(options)), keys_(options_.job), provider_(options_.copies) {}

TransferService::~TransferService() {
  if (server_ != nullptr) server_->Stop();
}

void TransferService::Tick(uint64_t mono_ns, int64_t unix_ms, redis::Store& store) {
  if (!ranks_read_ && mono_ns >= next_ranks_ns_ && store.connected()) {
    next_ranks_ns_ = mono_ns + kEndpointCheckNs;  // a failed read is retried, not every tick
    ReadRecordedRanks(store);
  }
  if (server_ == nullptr) {
    if (secret_.empty() && mono_ns >= next_secret_ns_ && store.connected()) {
      next_secret_ns_ = mono_ns + SecretPollNs(kSecretPollNs);
      FetchSecret(store, &secret_);
    }
    if (!secret_.empty() && mono_ns >= next_start_ns_) StartServer(mono_ns, unix_ms);
    if (server_ == nullptr) return;
  } else if (mono_ns >= next_secret_ns_ && store.connected()) {
    next_secret_ns_ = mono_ns + SecretPollNs(kSecretCheckNs);
    std::string now;
    if (FetchSecret(store, &now) && now != secret_) {
      // Redis lost the key and the master made a new one: peers now prove the new one, which
      // this server would refuse. Restarted on the same port, so the endpoint stays valid.
      FT_LOG(Warn, Worker, "the job's transfer secret ({}) changed: restarting the transfer server "
             "with the new one", keys_.TransferSecret());
      secret_ = std::move(now);
      server_->Stop();
      server_.reset();
      restart_port_ = port_;
      next_start_ns_ = 0;
      StartServer(mono_ns, unix_ms);
      if (server_ == nullptr) return;
    }
  }
  if (mono_ns >= next_endpoint_ns_) {
    next_endpoint_ns_ = mono_ns + kEndpointCheckNs;
    if (store.connected()) CheckEndpoint(store);
    provider_.Prune();  // as often: a removed arena's memory is freed within a second
    provider_.Warm();   // and a new one is mapped before any peer asks for it
  }
  LogStats(mono_ns, false);
}

bool TransferService::FetchSecret(redis::Store& store, std::string* out) {
  redis::Reply reply;
  if (!store.Run(schema::GetTransferSecret(keys_), &reply).ok()) return false;
  if (!reply.is_string()) {
    if (server_ == nullptr && !waiting_logged_) {
      FT_LOG(Info, Worker, "waiting for the job's transfer secret ({}, written by ftmaster) before "
             "serving checkpoint copies to peers", keys_.TransferSecret());
      waiting_logged_ = true;
    }
    return false;
  }
  // The same rule as every client's (rdma::auth::CheckSecret): what one side refuses, so does the other.
  if (!rdma::auth::CheckSecret(reply.str()).ok()) {
    if (!bad_secret_warned_) {
      // The value itself stays out of the log, also when it is wrong.
      FT_LOG(Warn, Worker, "{} holds {} bytes, not {} hex digits: not serving checkpoint copies "
             "until it does (ftmaster writes it; delete the key and restart ftmaster to recreate it)",
             keys_.TransferSecret(), reply.str().size(), rdma::auth::kSecretHexDigits);
      bad_secret_warned_ = true;
    }
    return false;
  }
  *out = reply.str();
  return true;
}

void TransferService::StartServer(uint64_t mono_ns, int64_t unix_ms) {
  next_start_ns_ = mono_ns + kStartRetryNs;
  if (options_.port < 0 || options_.port > 65535) {
    FT_LOG(Error, Worker, "FT_TRANSFER_PORT={} is not a port (0..65535): not serving checkpoint "
           "copies to peers; fix the setting and restart ftworker", options_.port);
    next_start_ns_ = UINT64_MAX;
    return;
  }
  rdma::ServerOptions so;
  so.listen_address = options_.listen_address;
  // A restart keeps the port peers know, once; should it be taken meanwhile, FT_TRANSFER_PORT.
  so.port = restart_port_ != 0 ? restart_port_ : static_cast<uint16_t>(options_.port);
  const bool restart = restart_port_ != 0 && restart_port_ != options_.port;
  restart_port_ = 0;
  so.secret = secret_;
  so.provider = &provider_;
  so.fast_path = options_.fast_path;
  auto make = [&] { return options_.make_server ? options_.make_server(so) : MakeRdmaServer(so); };
  std::unique_ptr<TransferServer> server = make();
  Status s = server->Start();
  if (!s.ok() && restart) {
    // The port this server had was a free one the system chose (FT_TRANSFER_PORT=0), and the
    // system may hand it to any new connection once it is closed (one to Redis, reconnecting
    // after the outage that changed the secret). Another free port now, not in 5 s: peers pull
    // while the job restarts, and they read the new endpoint from Redis (a campaign seed: a
    // relaunched rank's prefetch gave up on the refused port, and the rank had no source).
    FT_LOG(Warn, Worker, "the transfer server could not listen again on {}:{}: {}; listening on another "
           "port, which peers read from {}", options_.listen_address, so.port, s.message(), keys_.Endpoints());
    so.port = static_cast<uint16_t>(options_.port);
    server = make();
    s = server->Start();
  }
  if (!s.ok()) {
    FT_LOG(Warn, Worker, "the transfer server could not listen on {}:{}: {}; retrying in 5 s (check "
           "FT_LISTEN and FT_TRANSFER_PORT); peers pull this node's copies from others meanwhile",
           options_.listen_address, so.port, s.message());
    return;
  }
  server_ = std::move(server);
  port_ = server_->port();
  proto::TransferEndpoint e;
  e.node = options_.node;
  e.address = options_.listen_address;
  e.port = port_;
  if (options_.fast_path != nullptr) e.transports.push_back(options_.fast_path->kind());
  e.transports.push_back("tcp");
  e.unix_ms = unix_ms;
  publish_endpoint_ = schema::SetEndpoint(keys_, options_.node, e);
  endpoint_written_ = false;
  next_endpoint_ns_ = 0;
  next_stats_log_ns_ = mono_ns + kStatsLogNs;
  next_secret_ns_ = mono_ns + SecretPollNs(kSecretCheckNs);
  FT_LOG(Info, Worker, "serving this node's checkpoint copies to peers on {}:{} ({})",
         options_.listen_address, port_, fmt::join(e.transports, ", "));
}

void TransferService::CheckEndpoint(redis::Store& store) {
  if (publish_endpoint_.empty()) return;  // the server is not up
  redis::Reply reply;
  if (!store.Run(schema::GetEndpoint(keys_, options_.node), &reply).ok()) return;
  if (reply.is_string() && reply.str() == publish_endpoint_.back()) return;  // the value written
  redis::Reply ignored;
  if (!store.Run(publish_endpoint_, &ignored).ok()) return;
  if (endpoint_written_) {
    FT_LOG(Warn, Worker, "Redis no longer held this node's transfer endpoint ({} {}): it lost its "
           "data or another worker claims node '{}'; written again", keys_.Endpoints(), options_.node,
           options_.node);
  }
  endpoint_written_ = true;
}

void TransferService::ReadRecordedRanks(redis::Store& store) {
  redis::Reply reply;
  std::vector<schema::HashValue<proto::Membership>> ranks;
  if (!store.Run(schema::GetMemberships(keys_), &reply).ok() || !schema::DecodeRankHash(reply, &ranks).ok()) return;
  for (const auto& m : ranks) {
    if (m.ok() && m.value.node == options_.node) recorded_ranks_.insert(m.value.rank);
  }
  ranks_read_ = true;
  if (!recorded_ranks_.empty()) {
    FT_LOG(Info, Worker, "Redis records {} rank(s) on this node ({}): their arenas are served too",
           recorded_ranks_.size(), fmt::join(recorded_ranks_, ", "));
  }
}

void TransferService::LogStats(uint64_t mono_ns, bool final) {
  if (server_ == nullptr || (!final && mono_ns < next_stats_check_ns_)) return;
  next_stats_check_ns_ = mono_ns + kStatsCheckNs;
  const rdma::ServerStats now = server_->stats();
  if (now.auth_refused > logged_.auth_refused) {
    FT_LOG(Info, Worker, "the transfer server refused {} connection(s) that failed the job's "
           "challenge (wrong or no transfer secret): they got nothing; look for a peer of another "
           "job or a stale secret", now.auth_refused - logged_.auth_refused);
  }
  const bool changed = now.connections != logged_.connections || now.bytes_sent != logged_.bytes_sent ||
                       now.reads != logged_.reads;
  if (changed && (final || mono_ns >= next_stats_log_ns_)) {
    FT_LOG(Info, Worker, "transfer server: {} connections, {} refused, {} reads, {} bytes sent",
           now.connections, now.auth_refused, now.reads, now.bytes_sent);
    next_stats_log_ns_ = mono_ns + kStatsLogNs;
    logged_ = now;
  } else {
    logged_.auth_refused = now.auth_refused;
  }
}

void TransferService::Stop(redis::Store* store) {
  if (server_ == nullptr) return;
  LogStats(0, true);
  server_->Stop();
  server_.reset();
  if (store != nullptr && store->connected() && endpoint_written_) {
    redis::Reply ignored;
    if (store->Run(schema::RemoveEndpoint(keys_, options_.node), &ignored).ok()) {
      FT_LOG(Info, Worker, "transfer server stopped; endpoint removed from {}", keys_.Endpoints());
    }
  }
}

}  // namespace ft::worker
