// The prefetcher's test set-up, shared by its tests here and the daemon's test of it
// (ftworker/tests/daemon_prefetch_test.cc): a fake transfer engine that serves real arena files
// of "other nodes" (directories standing for their /dev/shm) and a replacement node's
// prefetcher options, plan and Redis (in memory).
#ifndef FT_FTWORKER_PREFETCH_TESTS_PREFETCHER_FIXTURE_H_
#define FT_FTWORKER_PREFETCH_TESTS_PREFETCHER_FIXTURE_H_

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ftworker/ckpt/restore_plan_sync.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "ftworker/prefetch/prefetcher.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "proto/transfer_codec.h"
#include "redis/fake/fake_store.h"

namespace ft::worker::testing {

inline constexpr int64_t kStep = 40;
inline constexpr uint64_t kBytes = (3u << 20) + 5;  // 4 chunks of 1 MiB, the last one short

// Serves the committed arenas of each fake node's arena directory under "arena/<step>/<rank>"
// (and "local/<step>/<rank>" from its local directory), moving bytes chunk by chunk the way
// rdma::Pull does: the sources in order, a chunk that does not verify fetched from the next,
// then through the fallback.
class FakeEngine : public PullEngine {
 public:
  struct Node {
    std::string arena_dir;
    std::string local_dir;
    bool unreachable = false;
    std::set<uint64_t> corrupt_chunks;  // served with one byte flipped
  };

  FakeEngine(std::string job) : job_(std::move(job)) {}

  void AddNode(const std::string& name, Node node) { nodes_[name] = std::move(node); }
  Node& node(const std::string& name) { return nodes_.at(name); }

  // Pulls wait until Release() while held (the ranks "start" meanwhile).
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

  std::vector<std::string> stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::vector<std::string> secrets() {
    std::lock_guard<std::mutex> lock(mu_);
    return secrets_;
  }
  std::vector<uint64_t> min_rates() {  // PullOptions::min_bytes_per_second of each pull
    std::lock_guard<std::mutex> lock(mu_);
    return min_rates_;
  }

  Status Stat(const rdma::PullOptions& options, const rdma::Peer& peer, const std::string& region,
              rdma::RegionInfo* out) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.push_back(peer.node + ":" + region);
      secrets_.push_back(options.secret);
    }
    Served served;
    FT_RETURN_IF_ERROR(Open(peer, region, &served));
    out->size = served.manifest.data_bytes;
    out->meta = ckpt::EncodeManifest(served.manifest);
    return Status::Ok();
  }

  Status Pull(const rdma::PullOptions& options, const rdma::PullRequest& request, rdma::PullResult* result) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !held_; });
      min_rates_.push_back(options.min_bytes_per_second);
    }
    std::vector<Served> open(request.sources.size());
    std::vector<bool> usable(request.sources.size());
    for (size_t s = 0; s < request.sources.size(); ++s) {
      Status st = Open(request.sources[s].peer, request.sources[s].region, &open[s]);
      usable[s] = st.ok();
      if (!st.ok()) result->notes.push_back(request.sources[s].peer.node + ": " + std::string(st.message()));
    }
    const uint64_t chunks = (request.bytes + request.chunk_bytes - 1) / request.chunk_bytes;
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t begin = c * request.chunk_bytes;
      const uint64_t len = std::min(request.chunk_bytes, request.bytes - begin);
      uint8_t* dest = request.dest + begin;
      bool landed = false;
      for (size_t s = 0; s < request.sources.size() && !landed; ++s) {
        if (!usable[s]) continue;
        std::memcpy(dest, open[s].arena.data(open[s].generation) + begin, len);
        if (nodes_.at(request.sources[s].peer.node).corrupt_chunks.contains(c)) dest[len / 2] ^= 0x40;
        landed = request.verify(c, dest, len);
        if (landed) {
          result->bytes_by_source[request.sources[s].peer.node + "/tcp"] += len;
        } else {
          ++result->refetched_chunks;
        }
      }
      if (!landed && request.fallback) {
        Status st = request.fallback(begin, len, dest);
        landed = st.ok() && request.verify(c, dest, len);
        if (landed) {
          result->bytes_by_source["fallback"] += len;
          ++result->fallback_chunks;
        }
      }
      if (!landed) return Status::Corrupt("chunk " + std::to_string(c) + " came verified from no source");
    }
    result->bytes = request.bytes;
    return Status::Ok();
  }

 private:
  struct Served {
    ckpt::Arena arena;
    ckpt::Manifest manifest;
    uint64_t generation = 0;
  };

  Status Open(const rdma::Peer& peer, const std::string& region, Served* out) {
    auto it = nodes_.find(peer.node);
    if (it == nodes_.end() || it->second.unreachable) {
      return Status::Unavailable("connecting to " + peer.address + ":" + std::to_string(peer.port) +
                                 ": Connection refused");
    }
    int64_t step = 0;
    int rank = 0;
    char tier[16] = {};
    if (std::sscanf(region.c_str(), "%15[a-z]/%ld/%d", tier, &step, &rank) != 3 ||
        (std::string(tier) != "arena" && std::string(tier) != "replica")) {
      return Status::NotFound("no region " + region);
    }
    // replica/<step>/<rank>: the node's buddy copy of another node's rank.
    const std::string path = std::string(tier) == "arena" ? ckpt::Arena::PathFor(it->second.arena_dir, job_, rank)
                                                          : ckpt::Arena::ReplicaPathFor(it->second.arena_dir, job_, rank);
    FT_RETURN_IF_ERROR(ckpt::Arena::OpenForRead(path, &out->arena));
    FT_RETURN_IF_ERROR(out->arena.ReadCommitted(&out->manifest, &out->generation));
    if (out->manifest.step != step) return Status::NotFound("no region " + region);
    return Status::Ok();
  }

  const std::string job_;
  std::map<std::string, Node> nodes_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::vector<std::string> stats_;
  std::vector<std::string> secrets_;
  std::vector<uint64_t> min_rates_;
};

// Node "node2" replaces "node1", which ran ranks 4-5 and was evicted. Ranks 0-1 (the DP
// replicas of ranks 4-5's shards) run on node0; rank 4's shard also has a replica, rank 6, on
// node3.
class PrefetcherTest : public ::testing::Test {
 protected:
  PrefetcherTest() {
    here_dir_ = tmp_.Sub("node2");
    remote_dir_ = tmp_.Sub("remote");
    node0_dir_ = tmp_.Sub("node0");
    node3_dir_ = tmp_.Sub("node3");
    engine_ = std::make_shared<FakeEngine>(job_);
    engine_->AddNode("node0", {node0_dir_, "", false, {}});
    engine_->AddNode("node3", {node3_dir_, "", false, {}});
    options_.job = job_;
    options_.node = "node2";
    options_.ranks = {4, 5};
    options_.arena_dir = here_dir_;
    options_.remote_dir = remote_dir_;
    options_.engine = engine_;
    (void)store_.Ensure(redis::Store::Clock::now());
    server_.Execute({"SET", keys_.TransferSecret(), std::string(64, 'a')});
    server_.Execute({"SADD", keys_.Evicted(), "node1"});
    PublishEndpoint("node0", 7000);
    PublishEndpoint("node3", 7003);
    PublishEndpoint("node1", 7001);  // left behind by the evicted node's worker
  }

  void PublishEndpoint(const std::string& node, uint16_t port) {
    proto::TransferEndpoint e{node, "127.0.0.1", port, {"tcp"}, 1};
    server_.Execute({"HSET", keys_.Endpoints(), node, proto::Encode(e)});
  }

  // A committed copy of kStep in `rank`'s arena in `dir`, all bytes `fill`.
  ckpt::Manifest SaveArena(const std::string& dir, int rank, uint8_t fill, int64_t step = kStep) {
    FakeArena arena(dir, job_, rank, kBytes);
    return arena.Save(step, fill);
  }

  // The plan: rank 4's shard is held by rank 4 (node1, evicted, also in the remote dir), rank 0
  // on node0 and rank 6 on node3; rank 5's by rank 5 (node1) and rank 1 (node0).
  proto::RestorePlan Plan(int64_t version = 1) {
    proto::RestorePlan plan;
    plan.version = version;
    plan.step = kStep;
    plan.ranks.push_back({0, digest4_, {{0, "node0", {"arena", "local"}}}});
    plan.ranks.push_back({4, digest4_, {{4, "node1", {"arena", "remote"}}, {0, "node0", {"arena"}}, {6, "node3", {"arena"}}}});
    plan.ranks.push_back({5, digest5_, {{5, "node1", {"arena"}}, {1, "node0", {"arena"}}}});
    return plan;
  }

  void SaveReplicas() {
    digest4_ = ckpt::ContentDigest(SaveArena(node0_dir_, 0, 0x44));
    digest5_ = ckpt::ContentDigest(SaveArena(node0_dir_, 1, 0x55));
    SaveArena(node3_dir_, 6, 0x44);
  }

  // The prefetch arena of `rank` holds kStep with every byte `fill`.
  void ExpectPrefetched(int rank, uint8_t fill) {
    ckpt::Arena arena;
    Status s = ckpt::Arena::OpenForRead(ckpt::Arena::PrefetchPathFor(here_dir_, job_, rank), &arena);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ckpt::Manifest m;
    uint64_t generation = 0;
    ASSERT_TRUE(arena.ReadCommitted(&m, &generation).ok());
    EXPECT_EQ(m.step, kStep);
    for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(m, i, arena.data(generation))) << i;
    std::vector<uint8_t> expected(kBytes, fill);
    EXPECT_EQ(std::memcmp(arena.data(generation), expected.data(), kBytes), 0);
  }

  bool PrefetchFileExists(int rank) {
    return std::filesystem::exists(ckpt::Arena::PrefetchPathFor(here_dir_, job_, rank));
  }

  const proto::PrefetchRank* Result(const proto::PrefetchReport& report, int rank) {
    for (const auto& r : report.ranks) {
      if (r.rank == rank) return &r;
    }
    return nullptr;
  }

  RestorePlanSyncOptions SyncOptions() const {
    RestorePlanSyncOptions o;
    o.job = job_;
    o.node = "node2";
    o.arena_dir = here_dir_;
    o.remote_dir = remote_dir_;
    return o;
  }

  // The node plan as RestorePlanSync hands it over, shaped by `p`.
  ckpt::NodePlan Shaped(Prefetcher& p, bool* written) {
    ckpt::NodePlan plan = ToNodePlan(Plan(), SyncOptions());
    *written = p.Shape(&plan);
    return plan;
  }

  std::string job_ = UniqueJob("pf");
  proto::Keys keys_{job_};
  TempDir tmp_{"prefetch"};
  std::string here_dir_, remote_dir_, node0_dir_, node3_dir_;
  std::shared_ptr<FakeEngine> engine_;
  PrefetcherOptions options_;
  redis::FakeRedis server_;
  redis::FakeStore store_{&server_, "worker"};
  uint64_t digest4_ = 0, digest5_ = 0;
};

}  // namespace ft::worker::testing

#endif  // FT_FTWORKER_PREFETCH_TESTS_PREFETCHER_FIXTURE_H_
