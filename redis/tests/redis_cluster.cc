#include "redis/tests/redis_cluster.h"

#include <random>
#include <sstream>
#include <thread>

#include "redis/client.h"
#include "redis/cluster.h"

namespace ft::redis::testing {
namespace {

constexpr int kMasters = 3;

std::string Addr(const RedisServer& s) { return s.host() + ":" + std::to_string(s.port()); }

}  // namespace

Status RedisCluster::Ask(size_t i, const std::vector<std::string>& argv, std::string* text) {
  Client c;
  FT_RETURN_IF_ERROR(c.Connect(servers_[i]->endpoint(), std::chrono::milliseconds(2000)));
  Reply r;
  FT_RETURN_IF_ERROR(c.Run(argv, &r));
  if (text != nullptr) *text = r.str();
  return Status::Ok();
}

Status RedisCluster::Start() {
  std::random_device rd;
  password_ = "pw-cluster-" + std::to_string(rd()) + std::to_string(rd());
  for (int i = 0; i < 2 * kMasters; ++i) {
    RedisServerOptions o;
    o.password = password_;
    o.cluster_bus = true;
    o.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", std::to_string(node_timeout_.count()), "--masterauth", password_,
                    "--cluster-replica-validity-factor", "0"};
    servers_.push_back(std::make_unique<RedisServer>(o));
    FT_RETURN_IF_ERROR(servers_.back()->Start());
  }
  // Slots: three ranges, one per master.
  for (int m = 0; m < kMasters; ++m) {
    int lo = m * kClusterSlots / kMasters, hi = (m + 1) * kClusterSlots / kMasters - 1;
    FT_RETURN_IF_ERROR(Ask(static_cast<size_t>(m),
                           {"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)}, nullptr));
  }
  for (size_t i = 1; i < servers_.size(); ++i) {
    FT_RETURN_IF_ERROR(Ask(0, {"CLUSTER", "MEET", servers_[i]->host(), std::to_string(servers_[i]->port())},
                           nullptr));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto wait = [&](auto done, const char* what) -> Status {
    while (true) {
      if (done()) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::Timeout(std::string("the test Redis Cluster: no ") + what + " within 30 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  // Every node knows every other.
  FT_RETURN_IF_ERROR(wait(
      [&] {
        for (size_t i = 0; i < servers_.size(); ++i) {
          std::string nodes;
          if (!Ask(i, {"CLUSTER", "NODES"}, &nodes).ok()) return false;
          size_t lines = 0;
          for (char c : nodes) lines += c == '\n';
          if (lines < servers_.size() || nodes.find("handshake") != std::string::npos) return false;
        }
        return true;
      },
      "complete membership"));
  for (int m = 0; m < kMasters; ++m) {
    std::string id;
    FT_RETURN_IF_ERROR(Ask(static_cast<size_t>(m), {"CLUSTER", "MYID"}, &id));
    FT_RETURN_IF_ERROR(Ask(static_cast<size_t>(m + kMasters), {"CLUSTER", "REPLICATE", id}, nullptr));
  }
  return wait(
      [&] {
        for (size_t i = 0; i < servers_.size(); ++i) {
          std::string info;
          if (!Ask(i, {"CLUSTER", "INFO"}, &info).ok()) return false;
          if (info.find("cluster_state:ok") == std::string::npos) return false;
          if (i >= static_cast<size_t>(kMasters)) {
            std::string repl;
            if (!Ask(i, {"INFO", "replication"}, &repl).ok()) return false;
            if (repl.find("master_link_status:up") == std::string::npos) return false;
          }
        }
        return true;
      },
      "cluster_state:ok with every replica's link up");
}

Endpoint RedisCluster::endpoint() const {
  Endpoint ep;
  ep.cluster = true;
  ep.password = password_;
  for (const auto& s : servers_) ep.seeds.push_back({s->host(), s->port()});
  ep.host = ep.seeds.front().host;
  ep.port = ep.seeds.front().port;
  return ep;
}

int RedisCluster::IndexOf(const std::string& addr) const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (Addr(*servers_[i]) == addr) return static_cast<int>(i);
  }
  return -1;
}

Status RedisCluster::OwnerOf(int slot, std::string* addr) {
  Status last = Status::Unavailable("no live node");
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (!servers_[i]->running()) continue;
    Client c;
    last = c.Connect(servers_[i]->endpoint(), std::chrono::milliseconds(1000));
    Reply r;
    if (last.ok()) last = c.Run({"CLUSTER", "SLOTS"}, &r);
    if (!last.ok()) continue;
    std::vector<SlotRange> ranges;
    last = ParseClusterSlots(r, servers_[i]->host(), &ranges);
    if (!last.ok()) continue;
    for (const SlotRange& range : ranges) {
      if (slot >= range.first && slot <= range.last) {
        *addr = range.host + ":" + std::to_string(range.port);
        return Status::Ok();
      }
    }
    return Status::NotFound("no master owns slot " + std::to_string(slot));
  }
  return last;
}

Status RedisCluster::KillMasterOf(int slot, int* index) {
  std::string addr;
  FT_RETURN_IF_ERROR(OwnerOf(slot, &addr));
  int i = IndexOf(addr);
  if (i < 0) return Status::NotFound("slot " + std::to_string(slot) + " owned by unknown " + addr);
  servers_[static_cast<size_t>(i)]->Stop();
  *index = i;
  return Status::Ok();
}

Status RedisCluster::WaitForNewOwner(int slot, const std::string& old_addr,
                                     std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string addr;
    if (OwnerOf(slot, &addr).ok() && addr != old_addr) {
      int i = IndexOf(addr);
      std::string info;
      if (i >= 0 && Ask(static_cast<size_t>(i), {"CLUSTER", "INFO"}, &info).ok() &&
          info.find("cluster_state:ok") != std::string::npos) {
        return Status::Ok();
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Timeout("slot " + std::to_string(slot) + " still mastered by " + old_addr +
                             " (or the cluster not ok) after the timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ft::redis::testing
