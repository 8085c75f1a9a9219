// One prefetch of one restore plan: what this node's ranks need of it (fixed when it starts),
// the threads that pull them (one per rank, each retrying while retry_until allows), and the
// state those threads share with the daemon's thread. The Prefetcher (ftworker/prefetch/prefetcher.h)
// keeps the latest run; a run is never restarted: a new plan makes a new run.
//
// Threads and the locking rule: everything a rank thread and the daemon's thread (or a test's
// thread calling report/busy/WaitIdle) both touch — the peers, the results, how many ranks
// remain or wait to retry, when it ended — is GUARDED_BY(mu_) (make lint checks it) and only ever
// written by this class. mu_ is held for no I/O and never together with the Prefetcher's lock
// (each method takes it itself: EXCLUDES). What is fixed at start
// needs no lock. `removed_` belongs to the daemon's thread alone (RemoveRestoredCopies, Shape).
// The owner calls Join before it drops the run (the rank threads use it until they end).
#ifndef FT_FTWORKER_PREFETCH_RUN_H_
#define FT_FTWORKER_PREFETCH_RUN_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "ftworker/prefetch/prefetch_local.h"
#include "ftworker/prefetch/prefetch_options.h"
#include "ftworker/prefetch/prefetch_pull.h"
#include "ftworker/prefetch/prefetch_sources.h"
#include "jitckpt/node_plan.h"
#include "proto/ckpt_codec.h"
#include "proto/prefetch_codec.h"

namespace ft::worker {

class PrefetchRun {
 public:
  // The run of `plan` for `ranks` (sorted: the node's ranks, Prefetcher::AddRanks), its
  // sources chosen from `peers`. Nothing starts yet. `options` and `puller` must outlive the run.
  PrefetchRun(const PrefetcherOptions& options, const RankPuller& puller, const proto::RestorePlan& plan,
              std::vector<int> ranks, PrefetchPeers peers);
  PrefetchRun(const PrefetchRun&) = delete;
  PrefetchRun& operator=(const PrefetchRun&) = delete;

  // Starts one thread per rank (the daemon's thread, once). `changed` is called on the thread
  // whose rank was the last to end, under mu_: it must only touch atomics.
  void Start(std::function<void()> changed) EXCLUDES(mu_);
  // Every rank has an outcome (true for a run with no ranks).
  bool finished() const EXCLUDES(mu_);
  // Blocks until finished().
  void WaitFinished() const EXCLUDES(mu_);
  // A rank waiting to try again gives up, a pull not started yet is not started.
  void Stop() EXCLUDES(mu_);
  // Joins the rank threads (those of a finished or stopped run; any thread, but one at a time).
  void Join() EXCLUDES(mu_);

  int64_t step() const { return step_; }
  const std::string& key() const { return key_; }  // PlanKey of the plan it was made from

  // Ranks waiting to try again: the daemon's thread then refreshes the peers (SetPeers).
  size_t retrying() const EXCLUDES(mu_);
  void SetPeers(PrefetchPeers peers) EXCLUDES(mu_);

  // The report for ft:{J}:prefetch.
  proto::PrefetchReport Report(const std::string& node) const EXCLUDES(mu_);
  // Whether a rank this (finished) run found on this node ("local") has no copy on this node in
  // `plan` any more: its arena went away, so it is pulled after all.
  bool LocalCopyDropped(const proto::RestorePlan& plan) const EXCLUDES(mu_);
  // PlanGate::Shape for this run: false (withhold the file) while it runs; for a plan of its
  // step, each rank pulled (or kept) and not yet removed gets <rank>:<this node>:prefetched
  // first among its sources. The daemon's thread.
  bool Shape(ckpt::NodePlan* plan) const EXCLUDES(mu_);
  // Removes the prefetched copy of each rank whose own arena now holds the step (it restored;
  // the keeper persists it from there). How many went. The daemon's thread.
  int RemoveRestoredCopies(const NodeCopies& copies) EXCLUDES(mu_);

 private:
  // A rank's thread: attempts, tried again while retry_until_ allows.
  proto::PrefetchRank RunRank(size_t i) EXCLUDES(mu_);
  // Waits `backoff` (or until Stop), counted in retrying_; the rank's work with the peers then.
  RankWork WaitToRetry(size_t i, std::chrono::milliseconds backoff) EXCLUDES(mu_);
  // Records rank i's outcome; the last one stamps the end and calls changed_.
  void Finish(size_t i, proto::PrefetchRank result) EXCLUDES(mu_);

  const PrefetcherOptions& options_;
  const RankPuller& puller_;
  const std::string here_;  // this node, sanitized
  const std::vector<int> ranks_;  // the node's ranks when the run was made, sorted

  // Fixed at construction.
  int64_t step_ = -1;
  std::string key_;
  std::vector<proto::RestoreRank> lines_;  // the plan's line of each rank pulled
  std::vector<RankWork> work_;             // as first chosen; a retry chooses again
  int64_t started_unix_ms_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point retry_until_;  // no new attempt starts after this

  std::atomic<bool> stopping_{false};  // written under mu_ (Stop), read anywhere

  mutable Mutex mu_;
  mutable CondVar cv_;  // the last rank ended; Stop
  std::function<void()> changed_ GUARDED_BY(mu_);  // set by Start, before any rank thread
  PrefetchPeers peers_ GUARDED_BY(mu_);             // refreshed while a rank waits to retry
  size_t retrying_ GUARDED_BY(mu_) = 0;             // ranks waiting to try again
  std::vector<proto::PrefetchRank> results_ GUARDED_BY(mu_);  // "running" until the rank ends
  size_t remaining_ GUARDED_BY(mu_) = 0;            // ranks without an outcome
  int64_t done_unix_ms_ GUARDED_BY(mu_) = 0;
  double pull_s_ GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);  // started by Start, joined by Join

  std::vector<bool> removed_;  // the daemon's thread only: the prefetched copy was removed
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_RUN_H_
