#include "ftworker/prefetch/prefetch_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "ftworker/prefetch/prefetch_node_ranks.h"
#include "proto/rank_ranges.h"
#include "proto/keys.h"

namespace ft::worker {

namespace {

int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}


}  // namespace

PrefetchRun::PrefetchRun(const PrefetcherOptions& options, const RankPuller& puller, const proto::RestorePlan& plan,
                         std::vector<int> ranks, PrefetchPeers peers)
    : options_(options), puller_(puller), here_(proto::SanitizeName(options.node)), ranks_(std::move(ranks)) {
  step_ = plan.step;
  key_ = PlanKey(plan, ranks_);
  for (const proto::RestoreRank& line : plan.ranks) {
    if (!std::binary_search(ranks_.begin(), ranks_.end(), line.rank)) continue;
    lines_.push_back(line);
    work_.push_back(ChooseSources(line, plan.step, peers, here_, options_.pull));
  }
  peers_ = std::move(peers);
  results_.resize(work_.size());
  removed_.assign(work_.size(), false);
  for (size_t i = 0; i < work_.size(); ++i) {
    results_[i].rank = work_[i].rank;
    results_[i].outcome = proto::PrefetchOutcome::kRunning;
  }
  remaining_ = work_.size();
  started_ = std::chrono::steady_clock::now();
  retry_until_ = started_ + options_.retry_for;
  started_unix_ms_ = UnixMsNow();
}

void PrefetchRun::Start(std::function<void()> changed) {
  MutexLock lock(&mu_);
  changed_ = std::move(changed);
  FT_LOG(Info, Worker, "prefetching step {} for rank(s) {} of this node from other nodes' copies", step_,
         proto::RankRanges::Of(ranks_).Format());
  for (size_t i = 0; i < work_.size(); ++i) {
    threads_.emplace_back([this, i] { Finish(i, RunRank(i)); });
  }
}

bool PrefetchRun::finished() const {
  MutexLock lock(&mu_);
  return remaining_ == 0;
}

void PrefetchRun::WaitFinished() const {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return remaining_ == 0; });
}

void PrefetchRun::Stop() {
  MutexLock lock(&mu_);
  stopping_.store(true);
  cv_.NotifyAll();  // a rank waiting to try again gives up
}

void PrefetchRun::Join() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

size_t PrefetchRun::retrying() const {
  MutexLock lock(&mu_);
  return retrying_;
}

void PrefetchRun::SetPeers(PrefetchPeers peers) {
  MutexLock lock(&mu_);
  peers_ = std::move(peers);
}

proto::PrefetchRank PrefetchRun::RunRank(size_t i) {
  RankWork work = work_[i];
  auto backoff = std::chrono::milliseconds(500);
  for (int attempt = 1;; ++attempt) {
    proto::PrefetchRank result = puller_.Attempt(step_, work, stopping_);
    if (result.outcome != proto::PrefetchOutcome::kFailed) return result;
    if (stopping_.load() || std::chrono::steady_clock::now() + backoff > retry_until_) {
      if (attempt > 1) result.error = fmt::format("{} attempts, the last: {}", attempt, result.error);
      FT_LOG(Warn, Worker, "rank {}: prefetching step {} failed: {}; its ft_restore reads another source "
             "(the remote directory) or fails saying why", work.rank, step_, result.error);
      return result;
    }
    // A peer's worker restarting with the job (a new port, its arenas not mapped yet), the
    // secret not written yet: worth another try while the ranks are still starting.
    FT_LOG(Info, Worker, "rank {}: prefetching step {} failed ({}); trying again in {} ms with the endpoints "
           "and secret then in Redis", work.rank, step_, result.error, backoff.count());
    work = WaitToRetry(i, backoff);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(2));
  }
}

RankWork PrefetchRun::WaitToRetry(size_t i, std::chrono::milliseconds backoff) {
  MutexLock lock(&mu_);
  ++retrying_;
  cv_.WaitFor(&mu_, backoff, [&] { return stopping_.load(); });
  --retrying_;
  return ChooseSources(lines_[i], step_, peers_, here_, options_.pull);
}

void PrefetchRun::Finish(size_t i, proto::PrefetchRank result) {
  MutexLock lock(&mu_);
  results_[i] = std::move(result);
  if (--remaining_ > 0) return;
  done_unix_ms_ = UnixMsNow();
  pull_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  int pulled = 0, failed = 0;
  for (const proto::PrefetchRank& r : results_) {
    pulled += proto::InPrefetchArena(r.outcome);
    failed += r.outcome == proto::PrefetchOutcome::kFailed;
  }
  FT_LOG(Info, Worker, "prefetch of step {} ended after {:.3f} s: {} rank(s) ready in this node's "
         "memory, {} failed; writing the restore plan file", step_, pull_s_, pulled, failed);
  if (changed_) changed_();
  cv_.NotifyAll();
}

proto::PrefetchReport PrefetchRun::Report(const std::string& node) const {
  MutexLock lock(&mu_);
  proto::PrefetchReport out;
  out.node = node;
  out.step = step_;
  out.state = remaining_ > 0 ? proto::PrefetchState::kRunning : proto::PrefetchState::kDone;
  out.started_unix_ms = started_unix_ms_;
  out.done_unix_ms = done_unix_ms_;
  out.pull_s = pull_s_;
  out.ranks = results_;
  return out;
}

bool PrefetchRun::LocalCopyDropped(const proto::RestorePlan& plan) const {
  MutexLock lock(&mu_);
  if (remaining_ > 0) return false;
  for (size_t i = 0; i < work_.size(); ++i) {
    if (results_[i].outcome != proto::PrefetchOutcome::kLocal) continue;
    auto line = std::find_if(plan.ranks.begin(), plan.ranks.end(),
                             [&](const proto::RestoreRank& r) { return r.rank == work_[i].rank; });
    if (line == plan.ranks.end()) continue;
    const bool here_listed = std::any_of(line->sources.begin(), line->sources.end(), [&](const auto& s) {
      return proto::SanitizeName(s.node) == here_;
    });
    if (!here_listed) return true;
  }
  return false;
}

bool PrefetchRun::Shape(ckpt::NodePlan* plan) const {
  MutexLock lock(&mu_);
  if (remaining_ > 0) return false;
  if (step_ != plan->step) return true;  // an older plan's prefetch: nothing of it applies
  for (size_t i = 0; i < work_.size(); ++i) {
    const proto::PrefetchRank& result = results_[i];
    if (!proto::InPrefetchArena(result.outcome) || removed_[i]) continue;
    auto line = std::find_if(plan->ranks.begin(), plan->ranks.end(),
                             [&](const ckpt::PlanRank& r) { return r.rank == result.rank; });
    if (line == plan->ranks.end() || line->digest != work_[i].digest) continue;
    // First: the restore reads it before any other copy but the rank's own arena. A source of
    // this rank on this node already listed (its arena, once it restored) takes the tier.
    auto own = std::find_if(line->sources.begin(), line->sources.end(), [&](const ckpt::PlanSource& s) {
      return s.rank == result.rank && s.node == here_;
    });
    ckpt::PlanSource source{result.rank, here_, {}};
    if (own != line->sources.end()) {
      source = std::move(*own);
      line->sources.erase(own);
    }
    if (std::find(source.tiers.begin(), source.tiers.end(), "prefetched") == source.tiers.end()) {
      source.tiers.push_back("prefetched");
    }
    line->sources.insert(line->sources.begin(), std::move(source));
  }
  return true;
}

int PrefetchRun::RemoveRestoredCopies(const NodeCopies& copies) {
  std::vector<proto::PrefetchRank> results;
  {
    MutexLock lock(&mu_);
    if (remaining_ > 0) return 0;
    results = results_;  // final once every rank ended
  }
  int removed = 0;
  for (size_t i = 0; i < work_.size(); ++i) {
    const proto::PrefetchRank& result = results[i];
    if (!proto::InPrefetchArena(result.outcome) || removed_[i]) continue;
    if (!copies.OwnArenaHolds(result.rank, step_, work_[i].digest)) continue;
    // The rank restored: its own arena holds the step (and the keeper persists it from there).
    copies.RemovePrefetchArena(result.rank);
    removed_[i] = true;
    ++removed;
    FT_LOG(Info, Worker, "rank {}'s own arena holds step {}: removed its prefetched copy {}", result.rank, step_,
           copies.PrefetchPath(result.rank));
  }
  return removed;
}

}  // namespace ft::worker
