#include "jitckpt/restore_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "common/log.h"
#include "common/names.h"
#include "jitckpt/checksum.h"
#include "jitckpt/chunk_verifier.h"
#include "jitckpt/safe_name.h"
#include "jitckpt/tier.h"

namespace ft::ckpt {

namespace {

struct Candidate {
  SourceKind kind;
  int src_rank;
  std::string name;  // what logs and RestoreResult::source call it
};

bool HasTier(const PlanSource& src, std::string_view tier) {
  return std::find(src.tiers.begin(), src.tiers.end(), tier) != src.tiers.end();
}

// Fastest first: the own arena (nothing to copy), the copy this node's worker prefetched from
// another node and same-node peers' arenas (a memory copy), the node-local directory, the
// shared remote directory.
std::vector<Candidate> Candidates(const NodePlan& plan, const PlanRank& line, int rank,
                                  const std::string& node) {
  std::vector<Candidate> out;
  out.push_back({SourceKind::kOwnArena, rank, "own arena"});
  const std::string here = SafeNodeName(node);
  std::set<int> seen;
  if (!plan.arena_dir.empty()) {
    for (const PlanSource& src : line.sources) {
      if (src.rank == rank && SafeNodeName(src.node) == here && HasTier(src, "prefetched")) {
        out.push_back({SourceKind::kPrefetched, rank, "prefetched copy"});
        break;
      }
    }
    // Buddy copies this node's worker holds (of this rank, or of a replica of its shard).
    std::set<int> replicas;
    for (const PlanSource& src : line.sources) {
      if (SafeNodeName(src.node) != here || !HasTier(src, "replica") || !replicas.insert(src.rank).second) continue;
      out.push_back({SourceKind::kBuddyCopy, src.rank,
                     src.rank == rank ? std::string("buddy copy") : fmt::format("buddy copy of rank {}", src.rank)});
    }
    for (const PlanSource& src : line.sources) {
      if (src.rank == rank || SafeNodeName(src.node) != here || !seen.insert(src.rank).second) continue;
      if (!HasTier(src, "arena") && !HasTier(src, "local")) continue;  // a buddy copy only: above
      out.push_back({SourceKind::kPeerArena, src.rank, fmt::format("arena of rank {}", src.rank)});
    }
  }
  auto add_dir = [&](SourceKind kind, std::string_view tier, bool this_node_only) {
    seen.clear();
    for (const PlanSource& src : line.sources) {
      if (!HasTier(src, tier) || (this_node_only && SafeNodeName(src.node) != here)) continue;
      if (!seen.insert(src.rank).second) continue;
      std::string name = src.rank == rank ? fmt::format("{} dir", tier)
                                          : fmt::format("{} dir (copy of rank {})", tier, src.rank);
      out.push_back({kind, src.rank, std::move(name)});
    }
  };
  // The local directory is this node's disk: only copies persisted on this node are there.
  if (!plan.local_dir.empty()) add_dir(SourceKind::kLocalDir, "local", true);
  if (!plan.remote_dir.empty()) add_dir(SourceKind::kRemoteDir, "remote", false);
  return out;
}

class Loader {
 public:
  Loader(const NodePlan& plan, const PlanRank& line, int rank,
         const std::vector<BufferEntry>& registered, Arena* own, RestoreSink* sink, int verify_threads)
      : plan_(plan), line_(line), rank_(rank), registered_(registered), own_(own), sink_(sink),
        verify_threads_(verify_threads) {}

  // OK: restored into the own arena, *used is its manifest. InvalidArgument: the planned copy
  // does not fit the registered buffers (give up). Anything else: this source failed, and
  // reason() says why.
  Status Try(const Candidate& c, Manifest* used) {
    reason_ = SkipReason::kUnreadable;
    if (sink_ != nullptr && delivered_) sink_->SourceBegins();
    delivered_ = false;
    switch (c.kind) {
      case SourceKind::kOwnArena: return TryOwnArena(used);
      case SourceKind::kPrefetched:
        return TryArenaFile(Arena::PrefetchPathFor(plan_.arena_dir, plan_.job, rank_), used);
      case SourceKind::kBuddyCopy:
        return TryArenaFile(Arena::ReplicaPathFor(plan_.arena_dir, plan_.job, c.src_rank), used);
      case SourceKind::kPeerArena:
        return TryArenaFile(Arena::PathFor(plan_.arena_dir, plan_.job, c.src_rank), used);
      case SourceKind::kLocalDir: return TryDir(plan_.local_dir, c.src_rank, used);
      case SourceKind::kRemoteDir: return TryDir(plan_.remote_dir, c.src_rank, used);
    }
    return Status::Internal("unknown restore source");
  }

  SkipReason reason() const { return reason_; }

  // After the last source failed: the write is given up (two slots: the committed copy stays).
  void GiveUp() {
    if (own_writing_) own_->AbandonWrite();
    own_writing_ = false;
  }

 private:
  // The failure `st` of this source, for `reason`.
  Status Skip(SkipReason reason, Status st) {
    reason_ = reason;
    return st;
  }
  // Opening or reading what is not there, or is and fails otherwise.
  Status SkipOpen(Status st) {
    const SkipReason reason = st.code() == StatusCode::kNotFound ? SkipReason::kAbsent : SkipReason::kUnreadable;
    return Skip(reason, std::move(st));
  }

  // Whether `m` is the planned copy: NotFound-ish reasons skip it, a layout that differs is
  // the caller's error (every verified copy has the same digest, so the same layout).
  Status Accept(const Manifest& m) {
    if (m.step != plan_.step) {
      return Skip(
          SkipReason::kOtherStep,
          Status::NotFound(fmt::format("holds step {}, the plan restores step {}", m.step, plan_.step)));
    }
    if (m.torn) {
      return Skip(SkipReason::kTorn, Status::Corrupt("torn: saved while the state was being updated"));
    }
    const uint64_t digest = ContentDigest(m);
    if (digest != line_.digest) {
      return Skip(SkipReason::kDigestMismatch,
                  Status::Corrupt(fmt::format("content digest {} differs from the verified {}",
                                              DigestHex(digest), DigestHex(line_.digest))));
    }
    Status layout = LayoutMatches(m, registered_);
    if (!layout.ok()) {
      return Status::InvalidArgument(fmt::format(
          "the checkpoint of step {} does not fit the registered buffers: {}", m.step,
          layout.message()));
    }
    // The agent copies buffers out of the arena at the registered offsets, so they must agree
    // too (they do whenever both came from PlanLayout; a hand-made manifest may not).
    for (size_t i = 0; i < registered_.size(); ++i) {
      if (m.buffers[i].offset != registered_[i].offset) {
        return Status::InvalidArgument(fmt::format(
            "the checkpoint of step {} places buffer {} ('{}') at offset {}, registration at {}",
            m.step, i, m.buffers[i].name, m.buffers[i].offset, registered_[i].offset));
      }
    }
    if (m.data_bytes > own_->data_capacity()) {
      return Status::InvalidArgument(fmt::format(
          "the checkpoint of step {} holds {} bytes, the arena has room for {}", m.step,
          m.data_bytes, own_->data_capacity()));
    }
    return Status::Ok();
  }

  Status TryOwnArena(Manifest* used) {
    if (!own_->is_open()) return OwnArenaClosed();
    Manifest m;
    uint64_t generation = 0;
    // Either slot: a newer step saved after the planned one (a preemption's split, a step the
    // plan did not trust) leaves the planned copy in the other slot.
    Status st = own_->ReadStep(plan_.step, &m, &generation);
    if (!st.ok()) st = own_->ReadCommitted(&m, &generation);  // what the arena holds instead, for the reason
    if (!st.ok()) {
      return Skip(SkipReason::kNoCommittedCopy,
                  Status::NotFound(fmt::format("{} holds no committed copy", own_->path())));
    }
    FT_RETURN_IF_ERROR(Accept(m));
    const uint8_t* data = own_->data(generation);
    ChunkVerifier verifier(m, data, verify_threads_);
    for (size_t i = 0; i < m.chunk_count(); ++i) {
      if (!verifier.Verifies(i)) {
        return Skip(
            SkipReason::kChunkMismatch,
            Status::Corrupt(fmt::format("{}: chunk {} does not match its checksum", own_->path(), i)));
      }
      Deliver(m, i, data);
    }
    // The other slot's copy becomes the committed one: the restored step is what the arena
    // holds from now on (the agent copies the committed copy into the buffers next).
    if (Status made = own_->MakeCommitted(generation); !made.ok()) {
      return Skip(SkipReason::kNoCommittedCopy, std::move(made));
    }
    *used = std::move(m);
    return Status::Ok();
  }

  // Another arena file on this node: a same-node peer's, or the prefetched copy (whose
  // manifest names the rank it was pulled from).
  Status TryArenaFile(const std::string& path, Manifest* used) {
    Arena peer;
    if (Status open = Arena::OpenForRead(path, &peer); !open.ok()) return SkipOpen(std::move(open));
    Manifest m;
    uint64_t generation = 0;
    Status st = peer.ReadStep(plan_.step, &m, &generation);
    if (!st.ok()) st = peer.ReadCommitted(&m, &generation);  // what it holds instead, for the reason
    if (!st.ok()) {
      return Skip(SkipReason::kNoCommittedCopy,
                  Status::NotFound(fmt::format("{} holds no committed copy", path)));
    }
    FT_RETURN_IF_ERROR(Accept(m));
    if (m.data_bytes > peer.data_capacity()) {
      return Skip(SkipReason::kTruncated,
                  Status::Corrupt(fmt::format("{}: its manifest claims {} bytes, the arena holds {}", path,
                                              m.data_bytes, peer.data_capacity())));
    }
    uint8_t* dest = BeginOwnWrite();
    if (dest == nullptr) return OwnArenaClosed();
    // Each chunk copied into the own arena and checked there, on the helpers.
    ChunkVerifier verifier(m, peer.data(generation), verify_threads_, dest);
    for (size_t i = 0; i < m.chunk_count(); ++i) {
      if (!verifier.Verifies(i)) {
        if (!peer.StillCommitted(generation)) return Overwritten(path);
        return Skip(SkipReason::kChunkMismatch,
                    Status::Corrupt(fmt::format("{}: chunk {} does not match its checksum", path, i)));
      }
      Deliver(m, i, dest);
    }
    // The seqlock: a save that began while we copied may have changed chunks we had verified.
    if (!peer.StillCommitted(generation)) return Overwritten(path);
    const int src_rank = m.rank;
    return CommitOwn(std::move(m), src_rank, used);
  }

  Status TryDir(const std::string& dir, int src_rank, Manifest* used) {
    Manifest m;
    if (Status read = ReadManifest(dir, plan_.job, {plan_.step, src_rank}, &m); !read.ok()) {
      return SkipOpen(std::move(read));
    }
    FT_RETURN_IF_ERROR(Accept(m));
    uint8_t* dest = BeginOwnWrite();
    if (dest == nullptr) return OwnArenaClosed();
    Status read = ReadData(dir, plan_.job, m, dest, own_->data_capacity(),
                           [&](size_t chunk) { Deliver(m, chunk, dest); });
    if (read.ok()) return CommitOwn(std::move(m), src_rank, used);
    if (read.code() == StatusCode::kNotFound) return Skip(SkipReason::kAbsent, std::move(read));
    // The tier's words say which; its code does not (a wrong size and a bad chunk are both
    // Corrupt): the file's size tells them apart.
    struct stat st;
    const std::string data = DataPath(dir, plan_.job, {m.step, m.rank});
    if (::stat(data.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) != m.data_bytes) {
      return Skip(SkipReason::kTruncated, std::move(read));
    }
    const SkipReason reason =
        read.code() == StatusCode::kCorrupt ? SkipReason::kChunkMismatch : SkipReason::kUnreadable;
    return Skip(reason, std::move(read));
  }

  void Deliver(const Manifest& m, size_t chunk, const uint8_t* data) {
    if (sink_ == nullptr) return;
    sink_->Verified(m, chunk, data);
    delivered_ = true;
  }

  Status Overwritten(const std::string& path) {
    return Skip(SkipReason::kOverwritten,
                Status::NotReady(fmt::format("{} was overwritten by a new save while it was read", path)));
  }

  // The own arena could not reserve the slot a copy goes to (a full directory): it closed, and
  // nothing is restored into it from any source.
  Status OwnArenaClosed() {
    return Skip(SkipReason::kUnreadable,
                Status::IoError(fmt::format("the own arena {} was closed: the space for a copy could not be "
                                            "reserved (is its directory full?)", own_->path())));
  }

  // The slot a copy from another source goes to; the next source starts over in it. With two
  // slots the own arena's committed copy stays until a source commits; with one it is gone
  // from here on (never committed over half-copied data).
  uint8_t* BeginOwnWrite() {
    own_writing_ = true;
    return own_->BeginWrite();
  }

  Status CommitOwn(Manifest m, int src_rank, Manifest* used) {
    m.rank = rank_;
    // A DP replica's copy: same shard (tp, pp) and content, but its dp index is the source's.
    // -1 is "unknown to the app": the master's topology says which dp this rank is.
    if (src_rank != rank_) m.dp = -1;
    Status st = own_->Commit(m);
    if (st.ok()) own_writing_ = false;  // refused, the slot is still open for the next source
    if (!st.ok()) {
      // Not the caller's layout (that was checked): the arena reserved room for the manifest
      // of this run's chunk size, and a copy saved with smaller chunks has more checksums.
      // Another source may still fit, so this one is skipped, not the restore refused.
      return Skip(SkipReason::kChunkSizeChanged,
                  Status::Unsupported(fmt::format(
                      "committing into {}: {} (the copy was saved with {}-byte chunks; was FT_CKPT_CHUNK "
                      "changed?)",
                      own_->path(), st.message(), m.chunk_bytes)));
    }
    *used = std::move(m);
    return Status::Ok();
  }

  const NodePlan& plan_;
  const PlanRank& line_;
  const int rank_;
  const std::vector<BufferEntry>& registered_;
  Arena* own_;
  RestoreSink* sink_;       // may be null
  const int verify_threads_;  // ChunkVerifier's helpers for an arena source
  bool delivered_ = false;  // this source gave the sink a chunk
  bool own_writing_ = false;
  SkipReason reason_ = SkipReason::kUnreadable;  // of the last failed Try
};

constexpr Named<SourceKind> kSourceKindNames[] = {
    {SourceKind::kOwnArena, "own-arena"}, {SourceKind::kPrefetched, "prefetched"},
    {SourceKind::kBuddyCopy, "buddy-copy"}, {SourceKind::kPeerArena, "peer-arena"},
    {SourceKind::kLocalDir, "local-dir"}, {SourceKind::kRemoteDir, "remote-dir"}};
static_assert(NamesAreUnique(kSourceKindNames));

constexpr Named<SkipReason> kSkipReasonNames[] = {
    {SkipReason::kAbsent, "absent"}, {SkipReason::kUnreadable, "unreadable"},
    {SkipReason::kNoCommittedCopy, "no-committed-copy"}, {SkipReason::kOtherStep, "other-step"},
    {SkipReason::kTorn, "torn"}, {SkipReason::kDigestMismatch, "digest-mismatch"},
    {SkipReason::kTruncated, "truncated"}, {SkipReason::kChunkMismatch, "chunk-mismatch"},
    {SkipReason::kOverwritten, "overwritten"}, {SkipReason::kChunkSizeChanged, "chunk-size-changed"}};
static_assert(NamesAreUnique(kSkipReasonNames));
}  // namespace

const char* SourceKindName(SourceKind kind) { return NameIn(kSourceKindNames, kind); }
const char* SkipReasonName(SkipReason reason) { return NameIn(kSkipReasonNames, reason); }

Status LoadForRestore(const NodePlan& plan, int rank, const std::string& node,
                      const std::vector<BufferEntry>& registered, Arena* own, RestoreResult* result,
                      RestoreSink* sink, int verify_threads) {
  const auto start = std::chrono::steady_clock::now();
  if (plan.step < 0) {
    return Status::NotFound(fmt::format("the restore plan of job '{}' has no verified step", plan.job));
  }
  const PlanRank* line = plan.Find(rank);
  if (line == nullptr) {
    return Status::NotFound(fmt::format("the restore plan of job '{}' (step {}) has no line for rank {}",
                                        plan.job, plan.step, rank));
  }
  if (own == nullptr || !own->is_open()) {
    return Status::InvalidArgument(fmt::format("restoring rank {}: its arena is not open", rank));
  }
  const std::vector<Candidate> candidates = Candidates(plan, *line, rank, node);
  Loader loader(plan, *line, rank, registered, own, sink, verify_threads);
  std::vector<SkippedSource> skipped;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    Manifest used;
    Status st = loader.Try(c, &used);
    if (st.ok()) {
      result->step = plan.step;
      result->source_kind = c.kind;
      result->source_rank = c.src_rank;
      result->source = c.name;
      result->manifest = std::move(used);
      result->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      result->skipped = std::move(skipped);
      FT_LOG(Info, Ckpt, "rank {} loaded step {} from {} ({} bytes, {:.3f} s)", rank, plan.step,
             c.name, result->manifest.data_bytes, result->seconds);
      return Status::Ok();
    }
    if (st.code() == StatusCode::kInvalidArgument) {
      loader.GiveUp();
      FT_LOG(Error, Ckpt,
             "rank {} cannot restore step {} from {}: {}; nothing restored — register the same "
             "buffers (names and sizes, in order) as the saved run did",
             rank, plan.step, c.name, st.message());
      result->skipped = std::move(skipped);
      return st;
    }
    const std::string next = i + 1 < candidates.size() ? "trying " + candidates[i + 1].name + " next"
                                                       : "no source left";
    skipped.push_back({c.kind, c.src_rank, loader.reason(), fmt::format("{}: {}", c.name, st.message())});
    FT_LOG(Warn, Ckpt, "rank {} restoring step {}: {} skipped ({}); {}", rank, plan.step, c.name,
           st.message(), next);
  }
  loader.GiveUp();
  std::string why;
  for (const SkippedSource& s : skipped) why += (why.empty() ? "" : "; ") + s.line;
  result->skipped = std::move(skipped);
  return Status::Corrupt(fmt::format(
      "rank {} found no usable copy of step {} on node {} ({})", rank, plan.step, node, why));
}

}  // namespace ft::ckpt
