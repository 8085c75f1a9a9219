// master_bench: a private redis-server or Redis Cluster, and its shards' counters; see
// redis_backend.h.
#include "bench/master_bench/redis_backend.h"

#include <chrono>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "redis/client.h"
#include "redis/cluster.h"

namespace ft::bench {
namespace {

constexpr size_t kMasters = 3;  // redis/tests/redis_cluster.h: servers 0..2, replicas 3..5

uint64_t InfoField(const std::string& info, const std::string& name) {
  const std::string key = "\n" + name + ":";
  const size_t at = ("\n" + info).find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(info.c_str() + at + key.size() - 1, nullptr, 10);
}

}  // namespace

// A node of the bench's cluster shares two loaded cores with five others, the master and the
// synthetic workers: the tests' 1 s timeout let one be marked failed (CLUSTERDOWN mid-profile).
constexpr std::chrono::milliseconds kBenchNodeTimeout{15000};

RedisBackend::RedisBackend(bool cluster, std::string binary) {
  if (cluster) {
    cluster_.emplace(kBenchNodeTimeout);
  } else {
    redis::testing::RedisServerOptions o;
    o.binary = std::move(binary);
    server_.emplace(o);
  }
}

Status RedisBackend::Start() { return cluster_ ? cluster_->Start() : server_->Start(); }

std::string RedisBackend::url() const {
  if (!cluster_) return server_->url();
  std::string url = "redis+cluster://";
  const redis::Endpoint ep = cluster_->endpoint();
  for (size_t i = 0; i < kMasters && i < ep.seeds.size(); ++i) {
    url += fmt::format("{}{}:{}", i ? "," : "", ep.seeds[i].host, ep.seeds[i].port);
  }
  return url;
}

const std::string& RedisBackend::password() const {
  return cluster_ ? cluster_->password() : server_->password();
}

redis::Endpoint RedisBackend::endpoint() const {
  return cluster_ ? cluster_->endpoint() : server_->endpoint();
}

Status RedisBackend::Open(std::unique_ptr<redis::Commands>* out) const {
  // Long I/O timeouts: at 131k ranks one pipeline of the synthetic workers is ~100 MB.
  return redis::OpenCommands(endpoint(), std::chrono::milliseconds(2000),
                             std::chrono::milliseconds(30000), out);
}

std::vector<redis::testing::RedisServer*> RedisBackend::Masters() {
  std::vector<redis::testing::RedisServer*> out;
  if (!cluster_) {
    out.push_back(&*server_);
    return out;
  }
  for (size_t i = 0; i < kMasters && i < cluster_->size(); ++i) out.push_back(&cluster_->server(i));
  return out;
}

Status RedisBackend::Shards(std::vector<Shard>* out) {
  std::vector<Shard> shards;
  for (redis::testing::RedisServer* s : Masters()) {
    redis::Client c;
    FT_RETURN_IF_ERROR(c.Connect(s->endpoint(), std::chrono::milliseconds(2000),
                                 std::chrono::milliseconds(10000)));
    redis::Reply info;
    FT_RETURN_IF_ERROR(c.Run({"INFO", "stats"}, &info));
    Shard shard;
    shard.addr = fmt::format("{}:{}", s->host(), s->port());
    shard.input_bytes = InfoField(info.str(), "total_net_input_bytes");
    shard.commands = InfoField(info.str(), "total_commands_processed");
    shards.push_back(std::move(shard));
  }
  *out = std::move(shards);
  return Status::Ok();
}

std::string RedisBackend::Rates(const std::vector<Shard>& before, const std::vector<Shard>& after,
                                double seconds, bool bytes) {
  std::string out;
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    const uint64_t a = bytes ? before[i].input_bytes : before[i].commands;
    const uint64_t b = bytes ? after[i].input_bytes : after[i].commands;
    out += fmt::format("{}{:.0f}", i ? "/" : "", static_cast<double>(b - a) / seconds);
  }
  return out;
}

}  // namespace ft::bench
