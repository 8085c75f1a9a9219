#include "ftworker/prefetcher.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <map>
#include <set>

#include "common/log.h"
#include "ftworker/transfer/region_name.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier.h"
#include "proto/transfer_codec.h"

namespace ft::worker {

namespace {

int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool HasTier(const proto::RestoreSource& source, std::string_view tier) {
  return std::find(source.tiers.begin(), source.tiers.end(), tier) != source.tiers.end();
}

bool ParseRank(std::string_view text, int* out) {
  if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return false;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > INT32_MAX) return false;
  *out = static_cast<int>(value);
  return true;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += (out.empty() ? "" : "; ") + line;
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
  return fmt::format("{} bytes", bytes);
}

// Removes a prefetch arena that holds nothing this plan needs (an older step, a failed pull).
void RemovePrefetchArena(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    FT_LOG(Warn, Worker, "could not remove the prefetch arena {}: {}; remove it by hand to free its memory",
           path, std::strerror(errno));
  }
}

}  // namespace

Status ParseNodeRanks(std::string_view text, std::vector<int>* out) {
  std::set<int> ranks;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    std::string_view part = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    at = comma == std::string_view::npos ? text.size() : comma + 1;
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument(fmt::format("node ranks '{}': '{}' {} (e.g. \"4-7\" or \"4,5,6,7\")",
                                                 text.substr(0, 64), part.substr(0, 32), why));
    };
    size_t dash = part.find('-');
    int first = 0, last = 0;
    if (dash == std::string_view::npos) {
      if (!ParseRank(part, &first)) return bad("is not a rank");
      last = first;
    } else if (!ParseRank(part.substr(0, dash), &first) || !ParseRank(part.substr(dash + 1), &last)) {
      return bad("is not a rank or a range of ranks");
    } else if (last < first) {
      return bad("ends before it begins");
    }
    if (static_cast<int64_t>(last) - first + ranks.size() >= 1'000'000) return bad("names too many ranks for a node");
    for (int r = first; r <= last; ++r) ranks.insert(r);
    if (comma != std::string_view::npos && at == text.size()) return bad("ends with a comma");
  }
  *out = std::vector<int>(ranks.begin(), ranks.end());
  return Status::Ok();
}

std::string FormatNodeRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") +
           (j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

// ---- the prefetch of one plan ---------------------------------------------------------------

struct Prefetcher::RankWork {
  int rank = -1;
  uint64_t digest = 0;
  rdma::PullOptions pull;                 // with the job's secret as last read
  std::vector<rdma::PullSource> sources;  // copies on other nodes, the plan's order
  std::vector<std::string> left_out;      // plan sources not pulled from, and why
  std::vector<int> same_node_ranks;       // plan copies on this node
  std::vector<int> same_node_replicas;    // plan buddy copies this node holds (ft-replica arenas)
  std::vector<int> remote_ranks;          // plan copies in the remote directory
};

// Who serves copies, as last read from Redis: the job's secret, the workers' endpoints, the
// evicted nodes.
struct Prefetcher::Peers {
  std::string secret;
  std::map<std::string, proto::TransferEndpoint> endpoints;  // by node (sanitized)
  std::set<std::string> evicted;
};

struct Prefetcher::Job {
  int64_t step = -1;
  std::string key;  // the step and this node's ranks' digests: a plan with the same key needs no new pull
  std::vector<proto::RestoreRank> lines;  // the plan's line of each rank pulled, as work
  std::vector<RankWork> work;
  int64_t started_unix_ms = 0;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point retry_until;  // no new attempt starts after this
  // Guarded by Prefetcher::mu_.
  Peers peers;          // refreshed by Tick while a rank waits to try again
  size_t retrying = 0;  // ranks waiting to try again
  std::vector<proto::PrefetchRank> results;
  std::vector<bool> removed;  // the prefetched copy was removed (the own arena holds the step)
  size_t remaining = 0;
  int64_t done_unix_ms = 0;
  double pull_s = 0;
};

namespace {

// What this node's ranks need of `plan`: "" when nothing (no step, no line for any of them).
std::string KeyOf(const proto::RestorePlan& plan, const std::vector<int>& ranks) {
  if (plan.step < 0) return "";
  std::string key;
  for (const proto::RestoreRank& line : plan.ranks) {
    if (std::binary_search(ranks.begin(), ranks.end(), line.rank)) {
      key += fmt::format(" {}={}", line.rank, ckpt::DigestHex(line.digest));
    }
  }
  return key.empty() ? "" : fmt::format("step {}:{}", plan.step, key);
}

}  // namespace

Prefetcher::Prefetcher(PrefetcherOptions options) : options_(std::move(options)), keys_(options_.job) {}

Prefetcher::~Prefetcher() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
    cv_.notify_all();  // a rank waiting to try again gives up
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void Prefetcher::OnPlan(const proto::RestorePlan& plan, redis::Commands& redis) {
  const std::string key = KeyOf(plan, options_.ranks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (key.empty()) {
      // Nothing for this node's ranks (no step, or no line for them): any older prefetch is
      // moot, and the file goes out as the master wrote it.
      pending_.reset();
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const bool same_as_job = job_ != nullptr && job_->key == key;
    const bool same_as_pending = pending_ != nullptr && KeyOf(*pending_, options_.ranks) == key;
    // The same copies: pulled, or being pulled — unless a rank found its copy on this node and
    // the plan no longer lists any copy here (its arena went with its process): pulled anew.
    if (same_as_job && pending_ == nullptr && !LocalCopyDropped(plan)) return;
    if (same_as_pending) return;
    if (same_as_job && !LocalCopyDropped(plan)) {
      pending_.reset();  // back to what the last prefetch did
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    pending_ = std::make_unique<proto::RestorePlan>(plan);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  (void)TryStart(redis);
}

bool Prefetcher::LocalCopyDropped(const proto::RestorePlan& plan) const {
  if (job_ == nullptr || job_->remaining > 0) return false;
  const std::string here = proto::SanitizeName(options_.node);
  for (size_t i = 0; i < job_->work.size(); ++i) {
    if (job_->results[i].outcome != "local") continue;
    auto line = std::find_if(plan.ranks.begin(), plan.ranks.end(),
                             [&](const proto::RestoreRank& r) { return r.rank == job_->work[i].rank; });
    if (line == plan.ranks.end()) continue;
    const bool here_listed = std::any_of(line->sources.begin(), line->sources.end(), [&](const auto& s) {
      return proto::SanitizeName(s.node) == here;
    });
    if (!here_listed) return true;
  }
  return false;
}

bool Prefetcher::ReadPeers(redis::Commands& redis, Peers* out) const {
  redis::Reply secret, endpoints, evicted;
  if (!redis.Run({"GET", keys_.TransferSecret()}, &secret).ok() ||
      !redis.Run({"HGETALL", keys_.Endpoints()}, &endpoints).ok() ||
      !redis.Run({"SMEMBERS", keys_.Evicted()}, &evicted).ok()) {
    return false;
  }
  out->secret = secret.is_string() ? secret.str() : "";
  out->endpoints.clear();
  const auto& fields = endpoints.elements();
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (!fields[i].is_string() || !fields[i + 1].is_string()) continue;
    proto::TransferEndpoint endpoint;
    Status s = proto::Decode(fields[i + 1].str(), &endpoint);
    if (!s.ok()) {
      FT_LOG(Warn, Worker, "the transfer endpoint of node {} in {} is unreadable: {}; not pulling from it",
             fields[i].str(), keys_.Endpoints(), s.message());
      continue;
    }
    out->endpoints[proto::SanitizeName(fields[i].str())] = std::move(endpoint);
  }
  out->evicted.clear();
  for (const redis::Reply& node : evicted.elements()) {
    if (node.is_string()) out->evicted.insert(proto::SanitizeName(node.str()));
  }
  return true;
}

Prefetcher::RankWork Prefetcher::BuildRankWork(const proto::RestoreRank& line, int64_t step, const Peers& peers) const {
  const std::string here = proto::SanitizeName(options_.node);
  RankWork work;
  work.rank = line.rank;
  work.digest = line.digest;
  work.pull = options_.pull;
  work.pull.secret = peers.secret;
  // An evicted node's copies come after every healthy node's: the master keeps them in the
  // plan while that node's worker still serves (a shard with no other replica), but the node
  // just failed. Its bytes are verified like any other's.
  std::vector<rdma::PullSource> evicted_sources;
  for (const proto::RestoreSource& source : line.sources) {
    const std::string node = proto::SanitizeName(source.node);
    if (node == here) {
      if (HasTier(source, "replica")) work.same_node_replicas.push_back(source.rank);
      if (HasTier(source, "arena") || HasTier(source, "local")) work.same_node_ranks.push_back(source.rank);
      continue;
    }
    // The remote directory is shared: a copy there is readable whatever became of its node.
    if (HasTier(source, "remote")) work.remote_ranks.push_back(source.rank);
    if (!HasTier(source, "arena") && !HasTier(source, "local") && !HasTier(source, "replica")) continue;
    auto endpoint = peers.endpoints.find(node);
    if (endpoint == peers.endpoints.end()) {
      work.left_out.push_back(fmt::format("rank {} on {}: its worker published no transfer endpoint",
                                          source.rank, node));
      continue;
    }
    const rdma::Peer peer{source.node, endpoint->second.address, endpoint->second.port};
    // The arena (memory) and a buddy copy (memory) before the local tier (a disk) of the same node.
    std::vector<rdma::PullSource>& into = peers.evicted.contains(node) ? evicted_sources : work.sources;
    for (CopyPlace place : {CopyPlace::kArena, CopyPlace::kReplica, CopyPlace::kLocal}) {
      if (HasTier(source, CopyPlaceName(place))) {
        into.push_back({peer, FormatRegionName(place, step, source.rank)});
      }
    }
  }
  work.sources.insert(work.sources.end(), evicted_sources.begin(), evicted_sources.end());
  return work;
}

bool Prefetcher::TryStart(redis::Commands& redis) {
  std::unique_ptr<proto::RestorePlan> plan;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ == nullptr) return true;
    if (job_ != nullptr && job_->remaining > 0) return false;  // one prefetch at a time: same files
  }
  Reap();

  Peers peers;
  if (!ReadPeers(redis, &peers)) return false;  // Redis went away: the next tick tries again

  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ == nullptr) return true;  // a plan with nothing for us came in meanwhile
  plan = std::move(pending_);
  auto job = std::make_shared<Job>();
  job->step = plan->step;
  job->key = KeyOf(*plan, options_.ranks);
  for (const proto::RestoreRank& line : plan->ranks) {
    if (!std::binary_search(options_.ranks.begin(), options_.ranks.end(), line.rank)) continue;
    job->lines.push_back(line);
    job->work.push_back(BuildRankWork(line, plan->step, peers));
  }
  job->peers = std::move(peers);
  job->results.resize(job->work.size());
  job->removed.assign(job->work.size(), false);
  for (size_t i = 0; i < job->work.size(); ++i) {
    job->results[i].rank = job->work[i].rank;
    job->results[i].outcome = "running";
  }
  job->remaining = job->work.size();
  job->started = std::chrono::steady_clock::now();
  job->retry_until = job->started + options_.retry_for;
  job->started_unix_ms = UnixMsNow();
  job_ = job;
  ++report_revision_;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  FT_LOG(Info, Worker, "prefetching step {} for rank(s) {} of this node from other nodes' copies", job->step,
         FormatNodeRanks(options_.ranks));
  for (size_t i = 0; i < job->work.size(); ++i) {
    threads_.emplace_back([this, job, i] {
      proto::PrefetchRank result = PrefetchRankWithRetries(job.get(), i);
      std::lock_guard<std::mutex> done(mu_);
      job->results[i] = std::move(result);
      if (--job->remaining > 0) return;
      job->done_unix_ms = UnixMsNow();
      job->pull_s = SecondsSince(job->started);
      ++report_revision_;
      int pulled = 0, failed = 0;
      for (const proto::PrefetchRank& r : job->results) {
        pulled += r.outcome == "pulled" || r.outcome == "kept";
        failed += r.outcome == "failed";
      }
      FT_LOG(Info, Worker, "prefetch of step {} ended after {:.3f} s: {} rank(s) ready in this node's "
             "memory, {} failed; writing the restore plan file", job->step, job->pull_s, pulled, failed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      cv_.notify_all();
    });
  }
  return true;
}

proto::PrefetchRank Prefetcher::PrefetchRankWithRetries(Job* job, size_t i) {
  RankWork work = job->work[i];
  auto backoff = std::chrono::milliseconds(500);
  for (int attempt = 1;; ++attempt) {
    proto::PrefetchRank result = PrefetchRank(*job, work);
    if (result.outcome != "failed") return result;
    if (stopping_.load() || std::chrono::steady_clock::now() + backoff > job->retry_until) {
      if (attempt > 1) result.error = fmt::format("{} attempts, the last: {}", attempt, result.error);
      FT_LOG(Warn, Worker, "rank {}: prefetching step {} failed: {}; its ft_restore reads another source "
             "(the remote directory) or fails saying why", work.rank, job->step, result.error);
      return result;
    }
    // A peer's worker restarting with the job (a new port, its arenas not mapped yet), the
    // secret not written yet: worth another try while the ranks are still starting.
    FT_LOG(Info, Worker, "rank {}: prefetching step {} failed ({}); trying again in {} ms with the endpoints "
           "and secret then in Redis", work.rank, job->step, result.error, backoff.count());
    std::unique_lock<std::mutex> lock(mu_);
    ++job->retrying;
    cv_.wait_for(lock, backoff, [&] { return stopping_.load(); });
    --job->retrying;
    work = BuildRankWork(job->lines[i], job->step, job->peers);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(2));
  }
}

void Prefetcher::Reap() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_ != nullptr && job_->remaining > 0) return;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void Prefetcher::WaitIdle() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return job_ == nullptr || job_->remaining == 0; });
  }
  Reap();
}

bool Prefetcher::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_ != nullptr || (job_ != nullptr && job_->remaining > 0);
}

proto::PrefetchReport Prefetcher::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  proto::PrefetchReport out;
  out.node = options_.node;
  if (job_ == nullptr) return out;
  out.step = job_->step;
  out.state = job_->remaining > 0 ? "running" : "done";
  out.started_unix_ms = job_->started_unix_ms;
  out.done_unix_ms = job_->done_unix_ms;
  out.pull_s = job_->pull_s;
  out.ranks = job_->results;
  return out;
}

bool Prefetcher::Shape(ckpt::NodePlan* plan) {
  if (options_.ranks.empty() || plan->step < 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ != nullptr) return false;
  if (job_ == nullptr) return true;
  if (job_->remaining > 0) return false;
  if (job_->step != plan->step) return true;  // an older plan's prefetch: nothing of it applies
  const std::string here = proto::SanitizeName(options_.node);
  for (size_t i = 0; i < job_->work.size(); ++i) {
    const proto::PrefetchRank& result = job_->results[i];
    if ((result.outcome != "pulled" && result.outcome != "kept") || job_->removed[i]) continue;
    auto line = std::find_if(plan->ranks.begin(), plan->ranks.end(),
                             [&](const ckpt::PlanRank& r) { return r.rank == result.rank; });
    if (line == plan->ranks.end() || line->digest != job_->work[i].digest) continue;
    // First: the restore reads it before any other copy but the rank's own arena. A source of
    // this rank on this node already listed (its arena, once it restored) takes the tier.
    auto own = std::find_if(line->sources.begin(), line->sources.end(), [&](const ckpt::PlanSource& s) {
      return s.rank == result.rank && s.node == here;
    });
    ckpt::PlanSource source{result.rank, here, {}};
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

void Prefetcher::Tick(uint64_t mono_ns, int64_t /*unix_ms*/, redis::Commands* redis) {
  Reap();
  bool waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting = pending_ != nullptr;
  }
  if (waiting && redis != nullptr && redis->connected()) (void)TryStart(*redis);
  RefreshPeers(mono_ns, redis);
  if (mono_ns >= next_cleanup_ns_) {
    Cleanup();
    next_cleanup_ns_ = mono_ns + static_cast<uint64_t>(options_.cleanup_interval.count());
  }
  if (redis == nullptr || !redis->connected()) return;
  uint64_t revision;
  {
    std::lock_guard<std::mutex> lock(mu_);
    revision = report_revision_;
  }
  if (revision == published_revision_) return;
  redis::Reply ignored;
  // Read after the revision: a change in between is in this report, or publishes again.
  if (redis->Run({"HSET", keys_.Prefetch(), options_.node, proto::Encode(report())}, &ignored).ok()) {
    published_revision_ = revision;
  }
}

void Prefetcher::RefreshPeers(uint64_t mono_ns, redis::Commands* redis) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_ == nullptr || job_->retrying == 0) return;
    job = job_;
  }
  if (redis == nullptr || !redis->connected() || mono_ns < next_peers_refresh_ns_) return;
  next_peers_refresh_ns_ = mono_ns + kPeersRefreshNs;
  Peers peers;
  if (!ReadPeers(*redis, &peers)) return;
  std::lock_guard<std::mutex> lock(mu_);
  job->peers = std::move(peers);
}

bool Prefetcher::OwnArenaHolds(int rank, int64_t step, uint64_t digest) const {
  ckpt::Arena arena;
  if (!ckpt::Arena::OpenForRead(ckpt::Arena::PathFor(options_.arena_dir, options_.job, rank), &arena).ok()) {
    return false;
  }
  ckpt::Manifest m;
  uint64_t generation = 0;
  // The manifest names the job too: an arena another job left under the same file name is
  // not this rank's copy.
  return arena.ReadCommitted(&m, &generation).ok() && m.job == options_.job && m.step == step && !m.torn &&
         ckpt::ContentDigest(m) == digest;
}

void Prefetcher::Cleanup() {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_ == nullptr || job_->remaining > 0) return;
  for (size_t i = 0; i < job_->work.size(); ++i) {
    const proto::PrefetchRank& result = job_->results[i];
    if ((result.outcome != "pulled" && result.outcome != "kept") || job_->removed[i]) continue;
    if (!OwnArenaHolds(result.rank, job_->step, job_->work[i].digest)) continue;
    // The rank restored: its own arena holds the step (and the keeper persists it from there).
    const std::string path = ckpt::Arena::PrefetchPathFor(options_.arena_dir, options_.job, result.rank);
    RemovePrefetchArena(path);
    job_->removed[i] = true;
    FT_LOG(Info, Worker, "rank {}'s own arena holds step {}: removed its prefetched copy {}", result.rank,
           job_->step, path);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
}

// ---- one rank, on its own thread --------------------------------------------------------------

std::string Prefetcher::LocalCopy(const Job& job, const RankWork& work) const {
  auto planned = [&](const ckpt::Manifest& m) {
    return m.step == job.step && !m.torn && ckpt::ContentDigest(m) == work.digest;
  };
  auto in_arena = [&](int rank) {
    return OwnArenaHolds(rank, job.step, work.digest);
  };
  auto in_local_dir = [&](int rank) {
    ckpt::Manifest m;
    return !options_.local_dir.empty() &&
           ckpt::ReadManifest(options_.local_dir, options_.job, {job.step, rank}, &m).ok() && planned(m);
  };
  // A buddy copy this node's worker holds of `rank` (ft_restore reads it through the plan's
  // "replica" tier).
  auto in_replica = [&](int rank) {
    ckpt::Arena arena;
    ckpt::Manifest m;
    uint64_t generation = 0;
    return ckpt::Arena::OpenForRead(ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, rank), &arena).ok() &&
           arena.ReadCommitted(&m, &generation).ok() && m.job == options_.job && planned(m);
  };
  if (in_arena(work.rank)) return "own arena";
  if (in_local_dir(work.rank)) return "local dir";
  for (int rank : work.same_node_replicas) {
    if (in_replica(rank)) return fmt::format("buddy copy of rank {}", rank);
  }
  for (int rank : work.same_node_ranks) {
    if (rank == work.rank) continue;
    if (in_arena(rank)) return fmt::format("arena of rank {}", rank);
    if (in_local_dir(rank)) return fmt::format("local dir (copy of rank {})", rank);
  }
  return "";
}

proto::PrefetchRank Prefetcher::PrefetchRank(const Job& job, const RankWork& work) {
  const auto start = std::chrono::steady_clock::now();
  proto::PrefetchRank out;
  out.rank = work.rank;
  const std::string path = ckpt::Arena::PrefetchPathFor(options_.arena_dir, options_.job, work.rank);
  auto fail = [&](std::string why) {
    RemovePrefetchArena(path);
    out = proto::PrefetchRank{};
    out.rank = work.rank;
    out.outcome = "failed";
    out.error = std::move(why);
    out.seconds = SecondsSince(start);
    return out;
  };

  const std::string local = LocalCopy(job, work);
  if (!local.empty()) {
    RemovePrefetchArena(path);  // an older prefetch of this rank is not needed either
    out.outcome = "local";
    out.ok = true;
    out.seconds = SecondsSince(start);
    FT_LOG(Info, Worker, "rank {}: step {} is on this node already ({}): nothing to pull", work.rank, job.step,
           local);
    return out;
  }
  // A worker restarted after its prefetch: the copy is still there.
  {
    ckpt::Arena kept;
    ckpt::Manifest m;
    uint64_t generation = 0;
    if (ckpt::Arena::OpenForRead(path, &kept).ok() && kept.ReadCommitted(&m, &generation).ok() &&
        m.job == options_.job && m.step == job.step && !m.torn && ckpt::ContentDigest(m) == work.digest) {
      out.outcome = "kept";
      out.ok = true;
      out.source_rank = m.rank;
      out.seconds = SecondsSince(start);
      FT_LOG(Info, Worker, "rank {}: the prefetch arena {} holds step {} already", work.rank, path, job.step);
      return out;
    }
  }
  if (work.sources.empty()) {
    return fail(work.left_out.empty() ? "the plan lists no copy of its shard on another node"
                                      : "no copy on another node can be pulled (" + Joined(work.left_out) + ")");
  }
  if (work.pull.secret.empty()) {
    return fail(fmt::format("the job's transfer secret is not in Redis ({}): is ftmaster running?",
                            keys_.TransferSecret()));
  }
  if (stopping_.load()) return fail("the worker is stopping");
  Status pulled = Pull(job, work, &out);
  if (!pulled.ok()) return fail(std::string(pulled.message()));
  out.seconds = SecondsSince(start);
  FT_LOG(Info, Worker, "rank {}: prefetched step {} ({}, {:.3f} s, {:.2f} GB/s) from {} (copy of rank {}) over {}",
         work.rank, job.step, HumanBytes(out.bytes), out.seconds,
         out.seconds > 0 ? static_cast<double>(out.bytes) / out.seconds / 1e9 : 0.0,
         out.source.empty() ? "the remote directory" : out.source, out.source_rank, out.transport);
  return out;
}

Status Prefetcher::Pull(const Job& job, const RankWork& work, proto::PrefetchRank* out) {
  const std::string path = ckpt::Arena::PrefetchPathFor(options_.arena_dir, options_.job, work.rank);
  std::vector<std::string> notes = work.left_out;

  // The manifest, from the first source that holds the planned copy.
  ckpt::Manifest m;
  size_t first = work.sources.size();
  for (size_t i = 0; i < work.sources.size() && !stopping_.load(); ++i) {
    const rdma::PullSource& source = work.sources[i];
    const std::string where = fmt::format("{} on {}", source.region, source.peer.node);
    rdma::RegionInfo info;
    Status s = options_.engine->Stat(work.pull, source.peer, source.region, &info);
    if (!s.ok()) {
      notes.push_back(fmt::format("{}: {}", where, s.message()));
      FT_LOG(Info, Worker, "rank {}: {} not used: {}", work.rank, where, s.message());
      continue;
    }
    ckpt::Manifest candidate;
    s = ckpt::ParseManifest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(info.meta.data()),
                                                     info.meta.size()),
                            &candidate);
    std::string refused;
    if (!s.ok()) {
      refused = "its manifest: " + std::string(s.message());
    } else if (candidate.step != job.step) {
      refused = fmt::format("holds step {}, the plan restores step {}", candidate.step, job.step);
    } else if (candidate.torn) {
      refused = "torn: saved while the state was being updated";
    } else if (ckpt::ContentDigest(candidate) != work.digest) {
      refused = fmt::format("content digest {} differs from the verified {}",
                            ckpt::DigestHex(ckpt::ContentDigest(candidate)), ckpt::DigestHex(work.digest));
    } else if (info.size < candidate.data_bytes) {
      refused = fmt::format("serves {} bytes, its manifest says {}", info.size, candidate.data_bytes);
    }
    if (!refused.empty()) {
      notes.push_back(fmt::format("{}: {}", where, refused));
      FT_LOG(Warn, Worker, "rank {}: {} refused: {}", work.rank, where, refused);
      continue;
    }
    m = std::move(candidate);
    first = i;
    break;
  }
  if (first == work.sources.size()) {
    return Status::Unavailable("no copy on another node answered with the verified copy (" + Joined(notes) + ")");
  }

  // One slot: a staging copy for the rank's restore, nothing older in it is worth keeping.
  ckpt::Arena arena;
  Status s = ckpt::Arena::OpenForWriteAt(path, ckpt::ManifestCapacity(m.buffers, m.data_bytes, m.chunk_bytes),
                                         m.data_bytes, /*slots=*/1, &arena);
  FT_RETURN_IF_ERROR(s);
  uint8_t* dest = arena.BeginWrite();
  if (options_.destination_mapped) options_.destination_mapped(dest, m.data_bytes);
  // Declared after the arena, so it runs before the arena is unmapped, on every way out.
  struct ForgetDestination {
    const std::function<void(const uint8_t*, uint64_t)>& unmapped;
    const uint8_t* data;
    uint64_t bytes;
    ~ForgetDestination() {
      if (unmapped) unmapped(data, bytes);
    }
  } forget_destination{options_.destination_unmapped, dest, m.data_bytes};

  rdma::PullRequest request;
  request.sources.assign(work.sources.begin() + static_cast<std::ptrdiff_t>(first), work.sources.end());
  request.dest = dest;
  request.bytes = m.data_bytes;
  request.chunk_bytes = m.chunk_bytes;
  request.verify = [&m](uint64_t index, const uint8_t* data, uint64_t len) {
    return index < m.chunk_count() && len == m.chunk_end(index) - m.chunk_begin(index) &&
           ckpt::Checksum(data, len) == m.chunk_checksums[index];
  };
  // Any verified replica's copy: the manifests differ in rank and dp, never in content.
  request.accepts_meta = [&job, &work](std::string_view meta) {
    ckpt::Manifest other;
    return ckpt::ParseManifest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(meta.data()), meta.size()),
                               &other)
               .ok() &&
           other.step == job.step && !other.torn && ckpt::ContentDigest(other) == work.digest;
  };
  // The remote directory's copy (any replica's: they are byte-identical), read chunk by chunk.
  struct Remote {
    std::once_flag once;
    Status status;
    ckpt::Manifest manifest;
  };
  auto remote = std::make_shared<Remote>();
  if (!options_.remote_dir.empty() && !work.remote_ranks.empty()) {
    request.fallback = [this, remote, &job, &work](uint64_t offset, uint64_t len, uint8_t* dest) -> Status {
      std::call_once(remote->once, [&] {
        remote->status = Status::NotFound("no verified copy in the remote directory");
        for (int rank : work.remote_ranks) {
          ckpt::Manifest rm;
          if (ckpt::ReadManifest(options_.remote_dir, options_.job, {job.step, rank}, &rm).ok() && !rm.torn &&
              ckpt::ContentDigest(rm) == work.digest) {
            remote->manifest = std::move(rm);
            remote->status = Status::Ok();
            return;
          }
        }
      });
      FT_RETURN_IF_ERROR(remote->status);
      return ckpt::ReadDataRange(options_.remote_dir, options_.job, remote->manifest, offset, len, dest);
    };
  }
  rdma::PullResult result;
  s = options_.engine->Pull(work.pull, request, &result);
  for (const std::string& note : result.notes) notes.push_back(note);
  if (!s.ok()) {
    return Status::Unavailable(fmt::format("{}{}", s.message(), notes.empty() ? "" : " (" + Joined(notes) + ")"));
  }
  s = arena.Commit(m);
  if (!s.ok()) return s.WithContext("committing the prefetch arena");

  // Where the bytes came from: "node/tcp", "node/verbs", "fallback".
  std::vector<std::pair<uint64_t, std::string>> by_bytes;
  for (const auto& [key, bytes] : result.bytes_by_source) by_bytes.emplace_back(bytes, key);
  std::sort(by_bytes.rbegin(), by_bytes.rend());
  for (const auto& [bytes, key] : by_bytes) {
    const size_t slash = key.rfind('/');
    const std::string kind = slash == std::string::npos ? key : key.substr(slash + 1);
    if (out->source.empty() && slash != std::string::npos) out->source = key.substr(0, slash);
    if (("+" + out->transport + "+").find("+" + kind + "+") == std::string::npos) {
      out->transport += (out->transport.empty() ? "" : "+") + kind;
    }
  }
  out->outcome = "pulled";
  out->ok = true;
  out->bytes = m.data_bytes;
  out->source_rank = m.rank;
  if (result.refetched_chunks > 0 || result.fallback_chunks > 0) {
    FT_LOG(Info, Worker, "rank {}: {} chunk(s) fetched again, {} from the remote directory ({})", work.rank,
           result.refetched_chunks, result.fallback_chunks, Joined(notes));
  }
  return Status::Ok();
}

}  // namespace ft::worker
