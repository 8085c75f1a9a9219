#include "ftworker/prefetch/replicator.h"

#include <dirent.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "common/log.h"
#include "common/mutex.h"
#include "ftworker/transfer/region_name.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "proto/codec.h"
#include "proto/transfer_codec.h"
#include "schema/node_hashes.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"

namespace ft::worker {

namespace {

std::vector<std::string> SortedUnique(std::vector<std::string> nodes, const std::string& node) {
  nodes.push_back(node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool HasTier(const proto::CkptCopy& c, std::string_view tier) {
  return std::find(c.tiers.begin(), c.tiers.end(), tier) != c.tiers.end();
}

proto::CkptCopy BuddyCopyOf(const ckpt::Manifest& m, const std::string& node) {
  proto::CkptCopy c;
  c.step = m.step;
  c.rank = m.rank;
  c.node = node;
  c.tp = m.tp;
  c.pp = m.pp;
  c.dp = m.dp;
  c.digest = ckpt::ContentDigest(m);
  c.torn = m.torn;
  c.buddy = true;
  c.origin = ckpt::SaveOriginName(m.origin);
  c.bytes = m.data_bytes;
  c.tiers = {"replica"};
  c.unix_ms = static_cast<int64_t>(m.created_unix_ns / 1000000);
  c.saved_unix_ms = c.unix_ms;
  return c;
}

}  // namespace

std::string BuddyOf(std::vector<std::string> nodes, const std::string& node) {
  nodes = SortedUnique(std::move(nodes), node);
  if (nodes.size() < 2) return "";
  auto it = std::find(nodes.begin(), nodes.end(), node);
  return ++it == nodes.end() ? nodes.front() : *it;
}

std::string GuardedBy(std::vector<std::string> nodes, const std::string& node) {
  nodes = SortedUnique(std::move(nodes), node);
  if (nodes.size() < 2) return "";
  auto it = std::find(nodes.begin(), nodes.end(), node);
  return it == nodes.begin() ? nodes.back() : *--it;
}

std::vector<ReplicaWant> ChooseReplicaPulls(const std::vector<proto::CkptCopy>& copies, const std::string& guarded,
                                            const std::map<int, int64_t>& held, int64_t every) {
  std::map<int, ReplicaWant> newest;
  if (every <= 0 || guarded.empty()) return {};
  for (const proto::CkptCopy& c : copies) {
    if (c.buddy || c.torn || c.node != guarded || c.rank < 0 || !HasTier(c, "arena")) continue;
    ReplicaWant& w = newest[c.rank];
    if (c.step > w.step) w = ReplicaWant{c.rank, c.step, c.digest};
  }
  std::vector<ReplicaWant> out;
  for (const auto& [rank, want] : newest) {
    auto it = held.find(rank);
    if (it == held.end() || it->second < 0 || want.step >= it->second + every) out.push_back(want);
  }
  return out;
}

Replicator::Replicator(ReplicatorOptions options) : options_(std::move(options)), keys_(options_.job) {
  FindKept();
  thread_ = std::thread([this] { Loop(); });
}

Replicator::~Replicator() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.NotifyAll();
  thread_.join();
}

void Replicator::FindKept() {
  const std::string zero = ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, 0);
  const std::string prefix = zero.substr(zero.rfind('/') + 1, zero.size() - zero.rfind('/') - 2);
  DIR* d = opendir(options_.arena_dir.c_str());
  if (d == nullptr) return;
  std::vector<int> ranks;
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    if (!name.starts_with(prefix)) continue;
    std::string_view digits = name.substr(prefix.size());
    int rank = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (ec != std::errc() || end != digits.data() + digits.size() || rank < 0 ||
        std::to_string(rank) != digits) {
      continue;
    }
    ranks.push_back(rank);
  }
  closedir(d);
  MutexLock lock(&mu_);
  for (int rank : ranks) {
    ckpt::Arena arena;
    ckpt::Manifest m;
    uint64_t generation = 0;
    const std::string path = ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, rank);
    if (!ckpt::Arena::OpenForRead(path, &arena).ok() || !arena.ReadCommitted(&m, &generation).ok() ||
        m.job != options_.job || m.rank != rank || m.torn) {
      continue;
    }
    held_[rank] = Held{m.step, BuddyCopyOf(m, options_.node)};
    reports_.push_back(CkptReport{held_[rank].copy, false});
    FT_LOG(Info, Worker, "buddy copy of rank {} step {} found in {}: served and reported again", rank, m.step, path);
  }
}

void Replicator::Tick(uint64_t mono_ns, redis::Commands* redis) {
  if (options_.every <= 0 || redis == nullptr || !redis->connected() || mono_ns < next_poll_ns_) return;
  next_poll_ns_ = mono_ns + options_.poll_interval_ns;
  Poll(*redis);
}

void Replicator::Poll(redis::Commands& redis) {
  {
    MutexLock lock(&mu_);
    if (busy_ || !queue_.empty()) return;  // one round of pulls at a time
  }
  redis::Reply secret, endpoints;
  if (!redis.Run(schema::GetTransferSecret(keys_), &secret).ok() ||
      !redis.Run(schema::GetEndpoints(keys_), &endpoints).ok()) {
    return;
  }
  std::map<std::string, proto::TransferEndpoint> by_node;
  std::vector<schema::HashValue<proto::TransferEndpoint>> published;
  (void)schema::DecodeEndpoints(endpoints, &published);  // a reply that is no hash publishes none
  for (auto& e : published) {
    if (e.ok() && !e.field.empty()) by_node[e.field] = std::move(e.value);
  }
  // The ring over the nodes that serve: walk back from this node to the first whose worker is
  // alive (its heartbeat key; a killed worker leaves its endpoint behind).
  std::vector<std::string> nodes;
  for (const auto& [node, endpoint] : by_node) nodes.push_back(node);
  std::string guarded;
  proto::WorkerHeartbeat beat;
  while (true) {
    guarded = GuardedBy(nodes, options_.node);
    if (guarded.empty()) break;
    redis::Reply reply;
    if (!redis.Run(schema::GetHeartbeat(keys_, guarded), &reply).ok()) return;
    if (reply.is_string() && proto::Decode(reply.str(), &beat).ok()) break;
    nodes.erase(std::find(nodes.begin(), nodes.end(), guarded));
  }
  {
    MutexLock lock(&mu_);
    if (guarded != guarded_) {
      FT_LOG(Info, Worker, "buddy copies: this node now copies the ranks of {}", guarded.empty() ? "no node" : guarded);
      guarded_ = guarded;
    }
  }
  {
    MutexLock lock(&mu_);
    DropUnguarded(guarded.empty() ? std::vector<int>{} : beat.ranks);
  }
  if (guarded.empty() || beat.ranks.empty() || !secret.is_string() || secret.str().empty()) return;

  redis::Reply steps;
  if (!redis.Run(schema::NewestSteps(keys_, options_.steps_looked_at), &steps).ok()) {
    return;
  }
  std::vector<proto::CkptCopy> copies;
  for (const redis::Reply& s : steps.elements()) {
    if (!s.is_string()) continue;
    int64_t step = -1;
    const std::string& text = s.str();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
    if (ec != std::errc() || end != text.data() + text.size() || step < 0) continue;
    redis::Reply values;
    std::vector<schema::HashValue<proto::CkptCopy>> held;
    if (!redis.Run(schema::GetRanks(keys_.CkptStep(step), beat.ranks), &values).ok()) return;
    (void)schema::DecodeRankFields(beat.ranks, values, &held);  // a reply that is none holds nothing
    for (auto& c : held) {
      if (c.ok() && c.value.step == step) copies.push_back(std::move(c.value));
    }
  }
  auto endpoint = by_node.find(guarded);
  if (endpoint == by_node.end()) return;
  MutexLock lock(&mu_);
  std::map<int, int64_t> held;
  for (const auto& [rank, h] : held_) held[rank] = h.step;
  for (const ReplicaWant& want : ChooseReplicaPulls(copies, guarded, held, options_.every)) {
    auto failed = failed_step_.find(want.rank);
    // A copy whose pull failed is not tried again: the rank's next report (another step or
    // digest) is.
    if (failed != failed_step_.end() && failed->second == std::pair{want.step, want.digest}) continue;
    queue_.push_back(Job{want, rdma::Peer{guarded, endpoint->second.address, endpoint->second.port}, secret.str()});
  }
  if (!queue_.empty()) cv_.NotifyAll();
}

void Replicator::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job job = queue_.front();
    queue_.erase(queue_.begin());
    busy_ = true;
    lock.Unlock();
    const auto start = std::chrono::steady_clock::now();
    proto::CkptCopy copy;
    double transfer_s = 0;
    Status s = PullOne(job, &copy, &transfer_s);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.Lock();
    busy_ = false;
    if (!s.ok()) {
      failed_step_[job.want.rank] = {job.want.step, job.want.digest};
      FT_LOG(Warn, Worker, "buddy copy of rank {} step {} from {}: {}; the previous copy stays", job.want.rank,
             job.want.step, job.peer.node, s.message());
    } else {
      failed_step_.erase(job.want.rank);
      Held& held = held_[job.want.rank];
      if (held.step >= 0 && held.step != copy.step) reports_.push_back(CkptReport{held.copy, true});
      held = Held{copy.step, copy};
      reports_.push_back(CkptReport{copy, false});
      bytes_ += copy.bytes;
      seconds_ += transfer_s;
      // The rate is the transfer's (the bytes on the wire, verified); the total adds the
      // request and, at a rank's first copy or a new geometry, making and mapping its arena.
      FT_LOG(Info, Worker, "buddy copy of rank {} step {} pulled from {} ({} bytes, {:.3f} s, {:.3f} Gbit/s; "
             "{:.3f} s in all)",
             copy.rank, copy.step, job.peer.node, copy.bytes, transfer_s,
             transfer_s > 0 ? static_cast<double>(copy.bytes) * 8 / transfer_s / 1e9 : 0.0, seconds);
    }
    cv_.NotifyAll();
  }
}

Status Replicator::PullOne(const Job& job, proto::CkptCopy* out, double* transfer_s) {
  rdma::PullOptions pull = options_.pull;
  pull.secret = job.secret;
  const rdma::PullSource source{job.peer, FormatRegionName(CopyPlace::kArena, job.want.step, job.want.rank)};
  rdma::RegionInfo info;
  FT_RETURN_IF_ERROR(options_.engine->Stat(pull, source.peer, source.region, &info));
  ckpt::Manifest m;
  FT_RETURN_IF_ERROR(ckpt::ParseManifest(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(info.meta.data()), info.meta.size()), &m));
  if (m.job != options_.job || m.step != job.want.step || m.rank != job.want.rank || m.torn ||
      ckpt::ContentDigest(m) != job.want.digest || info.size < m.data_bytes) {
    return Status::NotFound(fmt::format("{} on {} serves step {} rank {} digest {}{}, not the reported copy",
                                        source.region, job.peer.node, m.step, m.rank,
                                        ckpt::DigestHex(ckpt::ContentDigest(m)), m.torn ? " (torn)" : ""));
  }
  const std::string path = ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, job.want.rank);
  ckpt::Arena arena;
  // Two slots: the copy held so far stays committed until this one verified.
  FT_RETURN_IF_ERROR(ckpt::Arena::OpenForWriteAt(path, ckpt::ManifestCapacity(m.buffers, m.data_bytes, m.chunk_bytes),
                                                 m.data_bytes, /*slots=*/2, &arena));
  uint8_t* dest = arena.BeginWrite();
  // The cap: chunks are accepted no faster than bytes_per_second allows (the pull's connections wait in
  // verify, so the sender is paced through TCP's flow control).
  Mutex pace_mu;
  uint64_t paced = 0;
  const auto pace_start = std::chrono::steady_clock::now();
  const double bytes_per_s = static_cast<double>(options_.bytes_per_second);
  rdma::PullRequest request;
  request.sources = {source};
  request.dest = dest;
  request.bytes = m.data_bytes;
  request.chunk_bytes = m.chunk_bytes;
  request.verify = [&](uint64_t index, const uint8_t* data, uint64_t len) {
    const bool ok = index < m.chunk_count() && len == m.chunk_end(index) - m.chunk_begin(index) &&
                    ckpt::Checksum(data, len) == m.chunk_checksums[index];
    if (ok && bytes_per_s > 0) {
      std::chrono::steady_clock::time_point due;
      {
        MutexLock lock(&pace_mu);
        paced += len;
        due = pace_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(paced) / bytes_per_s));
      }
      std::this_thread::sleep_until(due);
    }
    return ok;
  };
  rdma::PullResult result;
  const auto transfer_start = std::chrono::steady_clock::now();
  Status s = options_.engine->Pull(pull, request, &result);
  *transfer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - transfer_start).count();
  if (!s.ok()) {
    arena.AbandonWrite();
    return s;
  }
  s = arena.Commit(m);
  if (!s.ok()) {
    arena.AbandonWrite();
    return s.WithContext("committing the replica arena");
  }
  *out = BuddyCopyOf(m, options_.node);
  out->unix_ms = UnixMsNow();
  return Status::Ok();
}

std::vector<CkptReport> Replicator::TakeReports() {
  MutexLock lock(&mu_);
  return std::exchange(reports_, {});
}

void Replicator::ReportAll() {
  MutexLock lock(&mu_);
  for (const auto& [rank, held] : held_) reports_.push_back(CkptReport{held.copy, false});
}

std::string Replicator::ReplicaPathOf(ckpt::CopyId id) {
  MutexLock lock(&mu_);
  auto it = held_.find(id.rank);
  if (it == held_.end() || it->second.step != id.step) return "";
  return ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, id.rank);
}

void Replicator::SetPlannedStep(int64_t step) {
  MutexLock lock(&mu_);
  planned_step_ = step;
}

void Replicator::DropUnguarded(const std::vector<int>& guarded_ranks) {
  if (planned_step_ < 0) return;  // no plan: nothing says which copies a restore still needs
  for (auto it = held_.begin(); it != held_.end();) {
    const auto& [rank, held] = *it;
    const bool guarded = std::find(guarded_ranks.begin(), guarded_ranks.end(), rank) != guarded_ranks.end();
    if (guarded || held.step >= planned_step_) {
      ++it;
      continue;
    }
    const std::string path = ckpt::Arena::ReplicaPathFor(options_.arena_dir, options_.job, rank);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      FT_LOG(Warn, Worker, "could not remove the buddy copy {} of rank {}: {}", path, rank, std::strerror(errno));
      ++it;
      continue;
    }
    FT_LOG(Info, Worker, "buddy copies: removed rank {}'s copy of step {} ({}): the ring no longer gives this "
           "node that rank, and the restore plan is at step {}", rank, held.step, path, planned_step_);
    reports_.push_back(CkptReport{held.copy, true});
    failed_step_.erase(rank);
    it = held_.erase(it);
  }
}

std::string Replicator::guarded() const {
  MutexLock lock(&mu_);
  return guarded_;
}

bool Replicator::WaitIdle(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return !busy_ && queue_.empty(); });
}

uint64_t Replicator::bytes_pulled() const {
  MutexLock lock(&mu_);
  return bytes_;
}

double Replicator::seconds_pulling() const {
  MutexLock lock(&mu_);
  return seconds_;
}

}  // namespace ft::worker
