// ft::worker::Prefetcher: pulls the planned shards of this node's ranks — those the worker saw
// here (a relaunch in place: the crashed rank's shard is in a replica's memory on another
// node), those Redis records here, and those the scheduler will start here (FT_NODE_RANKS: a
// replacement node) — from verified replicas on other nodes, before or while those ranks start,
// so that ft_restore reads them from this node's memory.
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
//
// The parts, each owning its state (ftworker/README.md): prefetch_sources (reading the plan and
// Redis: which copies to pull from), prefetch_local (what this node holds already, the prefetch
// arena files), prefetch_pull (one attempt at one rank), prefetch_run (one plan's prefetch: its
// threads, retries and the state they share, under its own lock), prefetch_node_ranks
// (FT_NODE_RANKS). The Prefetcher itself keeps the plan waiting for Redis and the latest run,
// and publishes the report.
#ifndef FT_FTWORKER_PREFETCHER_H_
#define FT_FTWORKER_PREFETCHER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "ftworker/prefetch/prefetch_local.h"
#include "ftworker/prefetch/prefetch_node_ranks.h"
#include "ftworker/prefetch/prefetch_options.h"
#include "ftworker/prefetch/prefetch_pull.h"
#include "ftworker/ckpt/restore_plan_sync.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/prefetch_codec.h"
#include "redis/store.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

class PrefetchRun;

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

  // The daemon's thread: ranks this node runs or ran — the segments the worker saw, the ranks
  // Redis records on this node — added to FT_NODE_RANKS (the set only grows: a rank that
  // crashed is the one whose copy a relaunch in place needs). A rank new to the set whose
  // planned copy is not on this node is pulled from the last plan's sources (the next Tick).
  void AddRanks(const std::vector<int>& ranks);
  std::vector<int> ranks() const EXCLUDES(mu_);  // sorted

  // The daemon's thread, every tick: starts a prefetch that waits for Redis, reaps a finished
  // one, publishes the report when it changed, removes prefetched copies no longer needed.
  // `redis` may be null (Redis away): the rest still happens.
  void Tick(uint64_t mono_ns, int64_t unix_ms, redis::Commands* redis);

  // Tests: blocks until no pull runs, then reaps.
  void WaitIdle();
  proto::PrefetchReport report() const;
  bool busy() const;  // a prefetch waits to start or runs

 private:
  static constexpr uint64_t kPeersRefreshNs = 1'000'000'000;

  // Makes `plan` the pending prefetch when its copies for the node's ranks differ from the last
  // run's. True: a prefetch waits to start (TryStart).
  bool Consider(const proto::RestorePlan& plan) EXCLUDES(mu_);
  // Reads the secret, endpoints and evicted nodes and starts the pending plan's prefetch.
  // False when Redis did not answer (retried next tick).
  bool TryStart(redis::Commands& redis);
  // The daemon's thread: while a rank waits to try again, reads the peers anew (once a second).
  void RefreshPeers(uint64_t mono_ns, redis::Commands* redis);
  // Joins the latest run's threads once it finished.
  void Reap();
  void Cleanup();
  // The latest run (null before the first), as mu_ has it.
  std::shared_ptr<PrefetchRun> run() const EXCLUDES(mu_);
  // Something report() or Shape() say changed: the plan file is shaped again, the report published.
  void Changed(bool report);

  const PrefetcherOptions options_;
  const proto::Keys keys_;
  const NodeCopies copies_;
  const RankPuller puller_;  // reads options_ and copies_
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> report_revision_{0};  // bumped at every change of report()

  // The plan and the run the daemon's thread changes and other threads (report, busy,
  // WaitIdle) read. Never held together with a run's own lock.
  mutable Mutex mu_;
  std::unique_ptr<proto::RestorePlan> pending_ GUARDED_BY(mu_);  // the plan whose prefetch waits for Redis
  std::shared_ptr<PrefetchRun> run_ GUARDED_BY(mu_);             // the last prefetch started (running or done)
  std::vector<int> ranks_ GUARDED_BY(mu_);                        // FT_NODE_RANKS and AddRanks, sorted

  // The daemon's thread only.
  std::unique_ptr<proto::RestorePlan> last_plan_;  // the master's last plan (OnPlan)
  uint64_t published_revision_ = 0;
  uint64_t next_cleanup_ns_ = 0;
  uint64_t next_peers_refresh_ns_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCHER_H_
