#include "ftworker/prefetch/prefetch_pull.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier.h"

namespace ft::worker {

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

}  // namespace

RankPuller::RankPuller(const PrefetcherOptions& options, const NodeCopies& copies)
    : options_(options), copies_(copies), keys_(options.job) {}

proto::PrefetchRank RankPuller::Attempt(int64_t step, const RankWork& work, const std::atomic<bool>& stopping) const {
  const auto start = std::chrono::steady_clock::now();
  proto::PrefetchRank out;
  out.rank = work.rank;
  const std::string path = copies_.PrefetchPath(work.rank);
  auto fail = [&](std::string why) {
    copies_.RemovePrefetchArena(work.rank);
    out = proto::PrefetchRank{};
    out.rank = work.rank;
    out.outcome = proto::PrefetchOutcome::kFailed;
    out.error = std::move(why);
    out.seconds = SecondsSince(start);
    return out;
  };

  const std::string local = copies_.Find(step, work);
  if (!local.empty()) {
    copies_.RemovePrefetchArena(work.rank);  // an older prefetch of this rank is not needed either
    out.outcome = proto::PrefetchOutcome::kLocal;
    out.ok = true;
    out.seconds = SecondsSince(start);
    FT_LOG(Info, Worker, "rank {}: step {} is on this node already ({}): nothing to pull", work.rank, step,
           local);
    return out;
  }
  // A worker restarted after its prefetch: the copy is still there.
  if (int source_rank = -1; copies_.PrefetchArenaHolds(work.rank, step, work.digest, &source_rank)) {
    out.outcome = proto::PrefetchOutcome::kKept;
    out.ok = true;
    out.source_rank = source_rank;
    out.seconds = SecondsSince(start);
    FT_LOG(Info, Worker, "rank {}: the prefetch arena {} holds step {} already", work.rank, path, step);
    return out;
  }
  if (work.sources.empty()) {
    return fail(work.left_out.empty() ? "the plan lists no copy of its shard on another node"
                                      : "no copy on another node can be pulled (" + Joined(work.left_out) + ")");
  }
  if (work.pull.secret.empty()) {
    return fail(fmt::format("the job's transfer secret is not in Redis ({}): is ftmaster running?",
                            keys_.TransferSecret()));
  }
  if (stopping.load()) return fail("the worker is stopping");
  Status pulled = Pull(step, work, stopping, &out);
  if (!pulled.ok()) return fail(std::string(pulled.message()));
  out.seconds = SecondsSince(start);
  FT_LOG(Info, Worker, "rank {}: prefetched step {} ({}, {:.3f} s, {:.2f} GB/s) from {} (copy of rank {}) over {}",
         work.rank, step, HumanBytes(out.bytes), out.seconds,
         out.seconds > 0 ? static_cast<double>(out.bytes) / out.seconds / 1e9 : 0.0,
         out.source.empty() ? "the remote directory" : out.source, out.source_rank, out.transport);
  return out;
}

Status RankPuller::Pull(int64_t step, const RankWork& work, const std::atomic<bool>& stopping,
                        proto::PrefetchRank* out) const {
  const std::string path = copies_.PrefetchPath(work.rank);
  std::vector<std::string> notes = work.left_out;

  // The manifest, from the first source that holds the planned copy.
  ckpt::Manifest m;
  size_t first = work.sources.size();
  for (size_t i = 0; i < work.sources.size() && !stopping.load(); ++i) {
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
    } else if (candidate.step != step) {
      refused = fmt::format("holds step {}, the plan restores step {}", candidate.step, step);
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
  request.accepts_meta = [step, &work](std::string_view meta) {
    ckpt::Manifest other;
    return ckpt::ParseManifest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(meta.data()), meta.size()),
                               &other)
               .ok() &&
           other.step == step && !other.torn && ckpt::ContentDigest(other) == work.digest;
  };
  // The remote directory's copy (any replica's: they are byte-identical), read chunk by chunk.
  struct Remote {
    std::once_flag once;
    Status status;
    ckpt::Manifest manifest;
  };
  auto remote = std::make_shared<Remote>();
  if (!options_.remote_dir.empty() && !work.remote_ranks.empty()) {
    request.fallback = [this, remote, step, &work](uint64_t offset, uint64_t len, uint8_t* dest) -> Status {
      std::call_once(remote->once, [&] {
        remote->status = Status::NotFound("no verified copy in the remote directory");
        for (int rank : work.remote_ranks) {
          ckpt::Manifest rm;
          if (ckpt::ReadManifest(options_.remote_dir, options_.job, {step, rank}, &rm).ok() && !rm.torn &&
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
  out->outcome = proto::PrefetchOutcome::kPulled;
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
