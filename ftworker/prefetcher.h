// ft::worker::Prefetcher: on a replacement node, pulls the planned shards of the ranks the
// scheduler will start here (FT_NODE_RANKS) from verified replicas on other nodes, before
// those ranks start, so that ft_restore reads them from this node's memory.
//
// When the master's restore plan names a step, for each of the node's ranks with a line in
// the plan: a rank that already has the planned copy on this node (its own arena, its local-
// tier copy, a same-node replica the plan lists) needs nothing. Otherwise its sources are the
// plan's copies of its shard on other nodes whose worker published a transfer endpoint
// (ft:{J}:endpoints), in the plan's order (the master orders them to spread the pulls), those
// on evicted nodes (ft:{J}:evicted) after all others; the first that answers rdma::Stat with the planned copy (step, content digest,
// not torn) gives the manifest; the bytes are pulled (rdma::Pull: every chunk verified against
// the manifest, a bad or missing chunk fetched from the next source, then from the remote
// directory) into the prefetch arena <arena_dir>/ft-prefetch.<job>.<rank>, which is then
// committed. Ranks are pulled in parallel, one thread each; the daemon loop never waits.
//
// The node's plan file (RestorePlanSync, through PlanGate) is withheld while the pulls run, so
// a rank that starts meanwhile cannot pick a worse source; then it is written with
// <rank>:<this node>:prefetched as the first source of each rank that was pulled. A failed pull
// is tried again while PrefetcherOptions::retry_for allows, with the peers as Redis then has
// them (a peer's worker restarted with the job on another port); a rank that still fails is
// logged and left out of the plan (ft_restore then reads the remote directory, or fails
// clearly). Once a rank's own arena holds the planned step (it restored), its prefetched copy
// is removed and the plan file rewritten without it.
//
// What happened goes to ft:{J}:prefetch (proto/prefetch_codec.h): per rank bytes, seconds,
// source node and transport; started, done and pull_s for the node.
//
// Threads: OnPlan, Shape, generation and Tick on the daemon's thread; the pulls on the
// prefetcher's own threads, which the destructor waits for.
#ifndef FT_FTWORKER_PREFETCHER_H_
#define FT_FTWORKER_PREFETCHER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "ftworker/ckpt/restore_plan_sync.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "rdma/transfer.h"
#include "redis/store.h"

namespace ft::worker {

// The transfer engine as the prefetcher uses it (rdma/transfer.h); tests put in a fake.
// Called from the prefetcher's threads, several at once.
class PullEngine {
 public:
  virtual ~PullEngine() = default;
  virtual Status Stat(const rdma::PullOptions& options, const rdma::Peer& peer, const std::string& region,
                      rdma::RegionInfo* out) = 0;
  virtual Status Pull(const rdma::PullOptions& options, const rdma::PullRequest& request,
                      rdma::PullResult* result) = 0;
};

// rdma::Stat and rdma::Pull (ftworker/prefetch_engine.cc).
std::shared_ptr<PullEngine> MakeTransferEngine();

// "4-7", "4,5,6,7", "0-3,8": sorted, each rank once. InvalidArgument naming the bad part.
// Empty text: no ranks.
Status ParseNodeRanks(std::string_view text, std::vector<int>* out);
// The other way, for logs: "4-7", "0-3,8".
std::string FormatNodeRanks(const std::vector<int>& ranks);

struct PrefetcherOptions {
  std::string job;
  std::string node;
  std::vector<int> ranks;      // FT_NODE_RANKS, sorted
  std::string arena_dir;       // FT_CKPT_ARENA_DIR: own arenas, prefetch arenas
  std::string local_dir;       // FT_CKPT_DIR ("" none)
  std::string remote_dir;      // FT_CKPT_REMOTE_DIR ("" none): the last resort of a pull
  rdma::PullOptions pull;      // the secret is read from Redis; fast_path: verbs or null
  std::shared_ptr<PullEngine> engine;
  // Told of each prefetch arena's data region once it is mapped, before its pull, and before
  // it is unmapped. The verbs client registers the destination with the NIC there and must
  // forget it: a registration outliving the mapping pins the old pages, and a later arena
  // mapped at the same address would receive RDMA READs into memory nobody reads
  // (rdma::VerbsClient::Register, Forget). Empty: nothing to do.
  std::function<void(uint8_t*, uint64_t)> destination_mapped;
  std::function<void(const uint8_t*, uint64_t)> destination_unmapped;
  std::chrono::nanoseconds cleanup_interval = std::chrono::seconds(1);
  // A rank whose pull failed is tried again (0.5, 1, 2, 2... s apart, with the endpoints and
  // secret then in Redis) while this long has not passed since the prefetch started; the
  // node's plan file waits meanwhile. The daemon: half of FT_RESTORE_WAIT. 0: one attempt.
  std::chrono::milliseconds retry_for{0};
};

class Prefetcher : public PlanGate {
 public:
  explicit Prefetcher(PrefetcherOptions options);
  ~Prefetcher() override;  // waits for the pulls under way
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // PlanGate (the daemon's thread).
  void OnPlan(const proto::RestorePlan& plan, redis::Commands& redis) override;
  bool Shape(ckpt::NodePlan* plan) override;
  uint64_t generation() const override { return generation_.load(std::memory_order_acquire); }

  // The daemon's thread, every tick: starts a prefetch that waits for Redis, reaps a finished
  // one, publishes the report when it changed, removes prefetched copies no longer needed.
  // `redis` may be null (Redis away): the rest still happens.
  void Tick(uint64_t mono_ns, int64_t unix_ms, redis::Commands* redis);

  // Tests: blocks until no pull runs, then reaps.
  void WaitIdle();
  proto::PrefetchReport report() const;
  bool busy() const;  // a prefetch waits to start or runs

 private:
  struct RankWork;
  struct Peers;
  struct Job;
  static constexpr uint64_t kPeersRefreshNs = 1'000'000'000;

  // Reads the secret, endpoints and evicted nodes and starts the pending plan's prefetch.
  // False when Redis did not answer (retried next tick).
  bool TryStart(redis::Commands& redis);
  // Whether a rank the last (finished) prefetch found on this node ("local") has no copy on
  // this node in `plan` any more: its arena went away, so it is pulled after all. mu_ held.
  bool LocalCopyDropped(const proto::RestorePlan& plan) const;
  // The secret, endpoints and evicted nodes; false when Redis did not answer.
  bool ReadPeers(redis::Commands& redis, Peers* out) const;
  // What pulling `line`'s rank takes: its sources on other nodes that serve, in order.
  RankWork BuildRankWork(const proto::RestoreRank& line, int64_t step, const Peers& peers) const;
  // The daemon's thread: while a rank waits to try again, reads the peers anew (once a second).
  void RefreshPeers(uint64_t mono_ns, redis::Commands* redis);
  // PrefetchRank, tried again while the job's retry_until allows (a rank's thread).
  proto::PrefetchRank PrefetchRankWithRetries(Job* job, size_t i);
  void Reap();
  proto::PrefetchRank PrefetchRank(const Job& job, const RankWork& work);
  // Stat, then pull into the prefetch arena and commit it; fills *out's source fields.
  Status Pull(const Job& job, const RankWork& work, proto::PrefetchRank* out);
  // Where the planned copy already is on this node ("" none), e.g. "own arena".
  std::string LocalCopy(const Job& job, const RankWork& work) const;
  bool OwnArenaHolds(int rank, int64_t step, uint64_t digest) const;
  void Cleanup();

  const PrefetcherOptions options_;
  const proto::Keys keys_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};

  mutable std::mutex mu_;
  // The plan whose prefetch waits for Redis (TryStart), if any.
  std::unique_ptr<proto::RestorePlan> pending_;
  std::shared_ptr<Job> job_;  // the last prefetch started (running or done)
  std::vector<std::thread> threads_;  // job_'s, joined by Reap
  std::condition_variable cv_;  // a job's last rank finished
  uint64_t report_revision_ = 0;  // bumped at every change of report()
  uint64_t published_revision_ = 0;  // the daemon's thread only
  uint64_t next_cleanup_ns_ = 0;
  uint64_t next_peers_refresh_ns_ = 0;  // the daemon's thread only
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCHER_H_
