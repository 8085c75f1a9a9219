#include "ftworker/prefetch/prefetcher.h"

#include <algorithm>
#include <utility>

#include "ftworker/prefetch/prefetch_run.h"
#include "ftworker/prefetch/prefetch_sources.h"
#include "schema/node_hashes.h"

namespace ft::worker {

Prefetcher::Prefetcher(PrefetcherOptions options)
    : options_(std::move(options)),
      keys_(options_.job),
      copies_(options_.job, options_.arena_dir, options_.local_dir),
      puller_(options_, copies_),
      ranks_(options_.ranks) {}

Prefetcher::~Prefetcher() {
  std::shared_ptr<PrefetchRun> current = run();
  if (current == nullptr) return;
  current->Stop();
  current->Join();
}

std::shared_ptr<PrefetchRun> Prefetcher::run() const {
  MutexLock lock(&mu_);
  return run_;
}

void Prefetcher::Changed(bool report) {
  if (report) report_revision_.fetch_add(1, std::memory_order_acq_rel);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void Prefetcher::OnPlan(const proto::RestorePlan& plan, redis::Commands& redis) {
  last_plan_ = std::make_unique<proto::RestorePlan>(plan);
  if (Consider(plan)) (void)TryStart(redis);
}

void Prefetcher::AddRanks(const std::vector<int>& ranks) {
  std::vector<int> merged;
  {
    MutexLock lock(&mu_);
    merged = ranks_;
  }
  const size_t before = merged.size();
  for (int rank : ranks) {
    auto at = std::lower_bound(merged.begin(), merged.end(), rank);
    if (at == merged.end() || *at != rank) merged.insert(at, rank);
  }
  if (merged.size() == before) return;
  {
    MutexLock lock(&mu_);
    ranks_ = std::move(merged);
  }
  // A rank new to this node (a segment seen for the first time) whose planned copy is not
  // here: pulled now, on the next Tick (which starts what waits).
  if (last_plan_ != nullptr) (void)Consider(*last_plan_);
}

std::vector<int> Prefetcher::ranks() const {
  MutexLock lock(&mu_);
  return ranks_;
}

bool Prefetcher::Consider(const proto::RestorePlan& plan) {
  const std::string key = PlanKey(plan, ranks());
  // The run changes only on this thread (TryStart): what it says now holds below.
  const std::shared_ptr<PrefetchRun> current = run();
  const bool same_as_run = !key.empty() && current != nullptr && current->key() == key;
  // The same copies as the last run: pulled, or being pulled — unless a rank found its copy on
  // this node and the plan no longer lists any copy here (its arena went with its process):
  // pulled anew.
  const bool same_and_still_here = same_as_run && !current->LocalCopyDropped(plan);
  MutexLock lock(&mu_);
  if (key.empty()) {
    // Nothing for this node's ranks (no step, or no line for them): any older prefetch is
    // moot, and the file goes out as the master wrote it.
    pending_.reset();
    Changed(false);
    return false;
  }
  if (same_and_still_here && pending_ == nullptr) return false;
  if (pending_ != nullptr && PlanKey(*pending_, ranks_) == key) return false;
  if (same_and_still_here) {
    pending_.reset();  // back to what the last prefetch did
    Changed(false);
    return false;
  }
  pending_ = std::make_unique<proto::RestorePlan>(plan);
  Changed(false);
  return true;
}

bool Prefetcher::TryStart(redis::Commands& redis) {
  std::shared_ptr<PrefetchRun> current;
  {
    MutexLock lock(&mu_);
    if (pending_ == nullptr) return true;
    current = run_;
  }
  if (current != nullptr && !current->finished()) return false;  // one prefetch at a time: same files
  Reap();

  PrefetchPeers peers;
  if (!ReadPrefetchPeers(redis, keys_, &peers)) return false;  // Redis went away: the next tick tries again

  std::shared_ptr<PrefetchRun> next;
  {
    MutexLock lock(&mu_);
    if (pending_ == nullptr) return true;  // a plan with nothing for us came in meanwhile
    next = std::make_shared<PrefetchRun>(options_, puller_, *pending_, ranks_, std::move(peers));
    pending_.reset();
    run_ = next;
  }
  Changed(true);
  next->Start([this] { Changed(true); });
  return true;
}

void Prefetcher::Reap() {
  std::shared_ptr<PrefetchRun> current = run();
  if (current != nullptr && current->finished()) current->Join();
}

void Prefetcher::WaitIdle() {
  if (std::shared_ptr<PrefetchRun> current = run(); current != nullptr) current->WaitFinished();
  Reap();
}

bool Prefetcher::busy() const {
  std::shared_ptr<PrefetchRun> current;
  {
    MutexLock lock(&mu_);
    if (pending_ != nullptr) return true;
    current = run_;
  }
  return current != nullptr && !current->finished();
}

proto::PrefetchReport Prefetcher::report() const {
  std::shared_ptr<PrefetchRun> current = run();
  if (current != nullptr) return current->Report(options_.node);
  proto::PrefetchReport out;
  out.node = options_.node;
  return out;
}

bool Prefetcher::Shape(ckpt::NodePlan* plan) {
  if (plan->step < 0) return true;
  std::shared_ptr<PrefetchRun> current;
  {
    MutexLock lock(&mu_);
    if (ranks_.empty()) return true;
    if (pending_ != nullptr) return false;
    current = run_;
  }
  return current == nullptr || current->Shape(plan);
}

void Prefetcher::Tick(uint64_t mono_ns, int64_t /*unix_ms*/, redis::Commands* redis) {
  Reap();
  bool waiting;
  {
    MutexLock lock(&mu_);
    waiting = pending_ != nullptr;
  }
  if (waiting && redis != nullptr && redis->connected()) (void)TryStart(*redis);
  RefreshPeers(mono_ns, redis);
  if (mono_ns >= next_cleanup_ns_) {
    Cleanup();
    next_cleanup_ns_ = mono_ns + static_cast<uint64_t>(options_.cleanup_interval.count());
  }
  if (redis == nullptr || !redis->connected()) return;
  const uint64_t revision = report_revision_.load(std::memory_order_acquire);
  if (revision == published_revision_) return;
  redis::Reply ignored;
  // Read after the revision: a change in between is in this report, or publishes again.
  if (redis->Run(schema::SetPrefetch(keys_, report()), &ignored).ok()) {
    published_revision_ = revision;
  }
}

void Prefetcher::RefreshPeers(uint64_t mono_ns, redis::Commands* redis) {
  std::shared_ptr<PrefetchRun> current = run();
  if (current == nullptr || current->retrying() == 0) return;
  if (redis == nullptr || !redis->connected() || mono_ns < next_peers_refresh_ns_) return;
  next_peers_refresh_ns_ = mono_ns + kPeersRefreshNs;
  PrefetchPeers peers;
  if (!ReadPrefetchPeers(*redis, keys_, &peers)) return;
  current->SetPeers(std::move(peers));
}

void Prefetcher::Cleanup() {
  std::shared_ptr<PrefetchRun> current = run();
  if (current != nullptr && current->RemoveRestoredCopies(copies_) > 0) Changed(false);
}

}  // namespace ft::worker
