#include "ftworker/ckpt/ckpt_keeper.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.h"
#include "common/mutex.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/file_ops.h"

namespace ft::worker {

namespace {

constexpr ckpt::TierKind kTiers[] = {ckpt::TierKind::kLocal, ckpt::TierKind::kRemote};

double MiBPerSecond(const ckpt::PersistStats& stats) {
  return stats.seconds > 0 ? static_cast<double>(stats.bytes) / (1 << 20) / stats.seconds : 0;
}

}  // namespace

CkptKeeper::CkptKeeper(CkptKeeperOptions options)
    : options_(std::move(options)),
      persist_(options_.persist
                   ? options_.persist
                   : PersistFn([](ckpt::TierKind kind, std::string_view dir, const ckpt::Manifest& m,
                                  const uint8_t* data, const std::function<bool()>& still_valid,
                                  ckpt::PersistStats* stats) {
                       return ckpt::PersistCopy(kind, dir, m, data, still_valid, stats);
                     })) {
  tasks_.push_back(Task{Task::Kind::kStart, "", 0, -1});
  thread_ = std::thread([this] { PersistLoop(); });
}

CkptKeeper::~CkptKeeper() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    tasks_.clear();
  }
  cv_.NotifyAll();
  thread_.join();
}

bool& CkptKeeper::TierFlag(Held& held, ckpt::TierKind kind) {
  return kind == ckpt::TierKind::kLocal ? held.local : held.remote;
}

std::string& CkptKeeper::TierError(Held& held, ckpt::TierKind kind) {
  return kind == ckpt::TierKind::kLocal ? held.local_error : held.remote_error;
}

const std::string& CkptKeeper::TierDir(ckpt::TierKind kind) const {
  return kind == ckpt::TierKind::kLocal ? options_.local_dir : options_.remote_dir;
}

CkptKeeper::Held& CkptKeeper::EntryLocked(const ckpt::Manifest& m, int64_t unix_ms) {
  ckpt::CopyId id{m.step, m.rank};
  // The job's size as its newest copy says (a relaunch may change it).
  if (m.world_size > 0 && m.step >= world_size_step_) {
    world_size_ = m.world_size;
    world_size_step_ = m.step;
  }
  Held& held = held_[id];
  proto::CkptCopy& c = held.copy;
  c.step = m.step;
  c.rank = m.rank;
  c.node = options_.node;
  c.tp = m.tp;
  c.pp = m.pp;
  c.dp = m.dp;
  c.digest = ckpt::ContentDigest(m);
  c.torn = m.torn;
  c.origin = ckpt::SaveOriginName(m.origin);
  c.bytes = m.data_bytes;
  // A copy found in a tier is dated by its manifest.
  c.unix_ms = unix_ms > 0 ? unix_ms : static_cast<int64_t>(m.created_unix_ns / 1000000);
  c.saved_unix_ms = static_cast<int64_t>(m.created_unix_ns / 1000000);
  dirty_.insert(id);
  return held;
}

std::vector<CkptReport> CkptKeeper::TakeReports() {
  MutexLock lock(&mu_);
  std::vector<CkptReport> out;
  for (const ckpt::CopyId& id : dirty_) {
    auto it = held_.find(id);
    if (it == held_.end()) continue;
    Held& held = it->second;
    CkptReport report;
    report.copy = held.copy;
    if (held.arena) report.copy.tiers.push_back("arena");
    if (held.local) report.copy.tiers.push_back("local");
    if (held.remote) report.copy.tiers.push_back("remote");
    for (const std::string* e : {&held.local_error, &held.remote_error}) {
      if (e->empty()) continue;
      if (!report.copy.error.empty()) report.copy.error += "; ";
      report.copy.error += *e;
    }
    report.removed = report.copy.tiers.empty();
    if (report.removed) held_.erase(it);
    out.push_back(std::move(report));
  }
  dirty_.clear();
  return out;
}

std::string CkptKeeper::ArenaPathOf(ckpt::CopyId id) {
  MutexLock lock(&mu_);
  auto it = held_.find(id);
  return it != held_.end() && it->second.arena ? it->second.arena_path : std::string();
}

std::vector<std::string> CkptKeeper::ArenaPaths() {
  std::set<std::string> paths;
  MutexLock lock(&mu_);
  for (const auto& [id, held] : held_) {
    if (held.arena) paths.insert(held.arena_path);
  }
  return {paths.begin(), paths.end()};
}

void CkptKeeper::SetPlan(int64_t planned_step) {
  MutexLock lock(&mu_);
  plan_known_ = true;
  planned_step_ = planned_step;
}

void CkptKeeper::SetGcFacts(const JobGcFacts& job, std::vector<int> alive_ranks) {
  {
    MutexLock lock(&mu_);
    gc_job_ = job;
    gc_alive_ranks_ = std::move(alive_ranks);
    for (const Task& t : tasks_) {
      if (t.kind == Task::Kind::kGc) return;  // the queued pass reads the facts when it runs
    }
    tasks_.push_back(Task{Task::Kind::kGc, "", 0, -1});
  }
  cv_.NotifyAll();
}

void CkptKeeper::ReportAll() {
  MutexLock lock(&mu_);
  for (const auto& [id, held] : held_) dirty_.insert(id);
}

// ---- The daemon loop's side: arenas ----

void CkptKeeper::Tick(uint64_t mono_ns, int64_t unix_ms, const std::vector<int>& node_ranks) {
  for (int rank : node_ranks) {
    if (!owned_ranks_.insert(rank).second) continue;
    {
      MutexLock lock(&mu_);
      node_ranks_.insert(rank);
    }
    // Copies of this rank the shared remote tier holds (a restarted worker learns them here:
    // the remote directory holds every node's ranks, so only ranks seen here are adopted).
    if (!options_.remote_dir.empty()) Enqueue(Task{Task::Kind::kAdoptRemote, "", 0, rank});
  }
  if (mono_ns < next_scan_ns_) return;
  next_scan_ns_ = mono_ns + options_.scan_interval_ns;
  ScanArenas(unix_ms);
}

void CkptKeeper::ScanArenas(int64_t unix_ms) {
  std::set<std::string> listed;
  for (const std::string& path : ckpt::Arena::List(options_.arena_dir, options_.job)) {
    const int rank = ckpt::Arena::RankOf(path);
    if (rank < 0 || !owned_ranks_.contains(rank)) continue;
    listed.insert(path);
    ckpt::Arena arena;
    ckpt::Manifest m;
    uint64_t generation = 0;
    Status s = ckpt::Arena::OpenForRead(path, &arena);
    if (s.ok()) s = arena.ReadCommitted(&m, &generation);
    if (!s.ok()) {
      // NotFound: empty, or a save is writing it now (its previous copy is being overwritten).
      if (s.code() != StatusCode::kNotFound && warned_.insert(path).second) {
        FT_LOG(Warn, Worker, "checkpoint arena {} of rank {} is unreadable: {}; its copies are "
               "not reported until the rank saves again", path, rank, s.message());
      }
      for (int slot = 0; slot < ckpt::kArenaMaxSlots; ++slot) ArenaLost({path, slot});
      continue;
    }
    if (m.job != options_.job || m.rank != rank) {
      if (warned_.insert(path).second) {
        FT_LOG(Warn, Worker, "checkpoint arena {} holds a copy of job '{}' rank {}, not of job "
               "'{}' rank {}: ignored (remove the file if it is stale)", path, m.job, m.rank,
               options_.job, rank);
      }
      for (int slot = 0; slot < ckpt::kArenaMaxSlots; ++slot) ArenaLost({path, slot});
      continue;
    }
    warned_.erase(path);
    const int committed_slot = static_cast<int>(generation & 1);
    for (int slot = 0; slot < ckpt::kArenaMaxSlots; ++slot) {
      const ArenaSlot where{path, slot};
      ckpt::Manifest copy;
      uint64_t copy_generation = 0;
      const bool committed = slot == committed_slot;
      if (committed) {
        copy = m;
        copy_generation = generation;
      } else if (slot >= arena.slot_count() || !arena.ReadSlot(slot, &copy, &copy_generation).ok() ||
                 copy.job != options_.job || copy.rank != rank || copy.step == m.step) {
        // Empty, being written, or the committed step again: nothing more to report.
        ArenaLost(where);
        continue;
      }
      auto seen = arenas_.find(where);
      if (seen != arenas_.end() && seen->second.Same(copy_generation, copy)) continue;
      ArenaLost(where);
      ArenaHolds(where, copy_generation, copy, unix_ms, committed);
    }
  }
  for (auto it = arenas_.begin(); it != arenas_.end();) {
    auto next = std::next(it);
    if (!listed.contains(it->first.path)) ArenaLost(it->first);
    it = next;
  }
}

void CkptKeeper::ArenaHolds(const ArenaSlot& where, uint64_t generation, const ckpt::Manifest& m, int64_t unix_ms,
                            bool persist) {
  arenas_[where] = ArenaSeen{generation, m.created_unix_ns, ckpt::CopyId{m.step, m.rank}};
  {
    MutexLock lock(&mu_);
    Held& held = EntryLocked(m, unix_ms);
    held.arena = true;
    held.arena_path = where.path;
  }
  if (!persist) {
    FT_LOG(Debug, Worker, "rank {} keeps step {} in its arena's other slot{}", m.rank, m.step, m.torn ? " (torn)" : "");
    return;
  }
  FT_LOG(Info, Worker, "rank {} committed step {} in its arena ({} bytes, digest {}{})", m.rank,
         m.step, m.data_bytes, ckpt::DigestHex(ckpt::ContentDigest(m)), m.torn ? ", torn" : "");
  if (m.torn) {
    FT_LOG(Info, Worker, "step {} of rank {} is torn (saved during an optimizer update): "
           "reported, not persisted", m.step, m.rank);
    return;
  }
  if (options_.local_dir.empty() && options_.remote_dir.empty()) return;
  Enqueue(Task{Task::Kind::kPersist, where.path, generation, m.rank});
}

void CkptKeeper::ArenaLost(const ArenaSlot& where) {
  auto it = arenas_.find(where);
  if (it == arenas_.end()) return;
  ckpt::CopyId id = it->second.id;
  arenas_.erase(it);
  // The arena's other slot may hold the same copy (a slot overwritten by a save of the step the
  // other holds cannot be told apart by id): it is still held then.
  for (const auto& [other, seen] : arenas_) {
    if (other.path == where.path && seen.id.step == id.step && seen.id.rank == id.rank) return;
  }
  MutexLock lock(&mu_);
  auto held = held_.find(id);
  if (held == held_.end() || !held->second.arena) return;
  held->second.arena = false;
  held->second.arena_path.clear();
  dirty_.insert(id);
}

void CkptKeeper::Enqueue(Task task) {
  {
    MutexLock lock(&mu_);
    if (task.kind == Task::Kind::kPersist) {
      // A queued persist of an older commit of the same arena is obsolete: that copy is gone.
      std::erase_if(tasks_, [&](const Task& t) {
        return t.kind == Task::Kind::kPersist && t.arena_path == task.arena_path;
      });
    }
    tasks_.push_back(std::move(task));
  }
  cv_.NotifyAll();
}

bool CkptKeeper::WaitIdle(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return tasks_.empty() && !busy_; });
}

// ---- The persist thread ----

void CkptKeeper::PersistLoop() {
  for (;;) {
    Task task;
    {
      MutexLock lock(&mu_);
      busy_ = false;
      cv_.NotifyAll();
      cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
    }
    switch (task.kind) {
      case Task::Kind::kStart: StartTiers(); break;
      case Task::Kind::kAdoptRemote: AdoptRemote(task.rank); break;
      case Task::Kind::kPersist: Persist(task); break;
      case Task::Kind::kGc: CollectArenas(); break;
    }
  }
}

void CkptKeeper::StartTiers() {
  for (ckpt::TierKind kind : kTiers) {
    const std::string& dir = TierDir(kind);
    if (dir.empty()) continue;
    int removed = 0;
    Status s = ckpt::CleanUncommitted(dir, options_.job, &removed);
    if (!s.ok()) {
      FT_LOG(Warn, Worker, "could not clean uncommitted files of the {} checkpoint tier {}: {}; "
             "they are ignored by readers, remove them by hand if space is short",
             ckpt::TierName(kind), dir, s.message());
    } else if (removed > 0) {
      FT_LOG(Info, Worker, "removed {} uncommitted file{} from the {} checkpoint tier {} (a "
             "persist interrupted by a worker stop or crash)", removed, removed == 1 ? "" : "s",
             ckpt::TierName(kind), dir);
    }
  }
  // The local tier is this node's disk: everything in it is this node's. The remote tier is
  // shared: its copies are adopted per rank (AdoptRemote).
  if (!options_.local_dir.empty()) RecordTier(ckpt::TierKind::kLocal, options_.local_dir, -1);
}

void CkptKeeper::AdoptRemote(int rank) {
  RecordTier(ckpt::TierKind::kRemote, options_.remote_dir, rank);
}

void CkptKeeper::RecordTier(ckpt::TierKind kind, const std::string& dir, int rank) {
  std::vector<std::pair<ckpt::CopyId, ckpt::Manifest>> found;
  std::vector<ckpt::CopyId> listed;
  Status listing = ckpt::ListCommitted(ckpt::SystemFileOps(), dir, options_.job, &listed);
  if (!listing.ok()) {
    // <dir>/<job> of another user, or a symlink: nothing in it is this job's to report, and
    // every persist into it fails with the same words. Said once per tier.
    if (!retention_said_.insert(fmt::format("untrusted {}", ckpt::TierName(kind))).second) return;
    FT_LOG(Error, Worker, "{} checkpoint tier {}: {}; its copies are not reported and nothing is "
           "persisted there. Remove it, or set {} to a directory of this user",
           ckpt::TierName(kind), dir, listing.message(),
           kind == ckpt::TierKind::kLocal ? "FT_CKPT_DIR" : "FT_CKPT_REMOTE_DIR");
    return;
  }
  for (const ckpt::CopyId& id : listed) {
    if (rank >= 0 && id.rank != rank) continue;
    ckpt::Manifest m;
    Status s = ckpt::ReadManifest(dir, options_.job, id, &m);
    if (!s.ok() || m.step != id.step || m.rank != id.rank) {
      FT_LOG(Warn, Worker, "{} checkpoint tier: copy of step {} rank {} in {} not reported: {}",
             ckpt::TierName(kind), id.step, id.rank, dir,
             s.ok() ? std::string("its manifest names another step or rank") : std::string(s.message()));
      continue;
    }
    found.emplace_back(id, std::move(m));
  }
  MutexLock lock(&mu_);
  for (const auto& [id, m] : found) {
    auto it = held_.find(id);
    // A copy the arena reported already keeps its fields (and time); the tier is added.
    if (it == held_.end()) {
      TierFlag(EntryLocked(m, 0), kind) = true;
    } else if (!TierFlag(it->second, kind)) {
      TierFlag(it->second, kind) = true;
      dirty_.insert(id);
    }
  }
  if (!found.empty()) {
    FT_LOG(Info, Worker, "{} checkpoint tier {} holds {} committed cop{}{}", ckpt::TierName(kind),
           dir, found.size(), found.size() == 1 ? "y" : "ies",
           rank >= 0 ? fmt::format(" of rank {}", rank) : std::string());
  }
}

void CkptKeeper::Persist(const Task& task) {
  ckpt::Arena arena;
  ckpt::Manifest m;
  uint64_t generation = 0;
  Status s = ckpt::Arena::OpenForRead(task.arena_path, &arena);
  if (s.ok()) s = arena.ReadCommitted(&m, &generation);
  if (!s.ok() || generation != task.generation) {
    FT_LOG(Info, Worker, "arena {} no longer holds the copy queued for persisting ({}); the "
           "newer one is persisted instead", task.arena_path,
           s.ok() ? std::string("overwritten by a newer save") : std::string(s.message()));
    return;
  }
  const ckpt::CopyId id{m.step, m.rank};
  const uint64_t digest = ckpt::ContentDigest(m);
  for (ckpt::TierKind kind : kTiers) {
    const std::string& dir = TierDir(kind);
    if (dir.empty()) continue;
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      auto it = held_.find(id);
      // Already there (a restored step committed again into the arena): nothing to write.
      if (it != held_.end() && TierFlag(it->second, kind) && it->second.copy.digest == digest) continue;
    }
    ckpt::PersistStats stats;
    s = persist_(kind, dir, m, arena.data(generation), [&] { return arena.StillCommitted(generation); },
                 &stats);
    if (s.code() == StatusCode::kNotReady) {
      FT_LOG(Info, Worker, "step {} of rank {} was overwritten in its arena while being "
             "persisted to the {} tier: dropped; the newer copy is persisted instead", m.step,
             m.rank, ckpt::TierName(kind));
      return;
    }
    if (!s.ok()) {
      FT_LOG(Warn, Worker, "persisting step {} of rank {} to the {} checkpoint tier {} failed: "
             "{}; the copy stays in the arena and is reported there. Free space in {} (or point "
             "{} at a larger disk); the next save is persisted again", m.step, m.rank,
             ckpt::TierName(kind), dir, s.message(), dir,
             kind == ckpt::TierKind::kLocal ? "FT_CKPT_DIR" : "FT_CKPT_REMOTE_DIR");
      MutexLock lock(&mu_);
      auto it = held_.find(id);
      Held& held = it != held_.end() ? it->second : EntryLocked(m, 0);
      TierError(held, kind) = fmt::format("{}: {}", ckpt::TierName(kind), s.message());
      dirty_.insert(id);
      continue;
    }
    FT_LOG(Info, Worker, "persisted step {} of rank {} to the {} tier in {:.3f} s ({:.0f} MiB/s{})",
           m.step, m.rank, ckpt::TierName(kind), stats.seconds, MiBPerSecond(stats),
           stats.direct_io ? ", direct I/O" : "");
    {
      MutexLock lock(&mu_);
      auto it = held_.find(id);
      Held& held = it != held_.end() ? it->second : EntryLocked(m, 0);
      TierFlag(held, kind) = true;
      TierError(held, kind).clear();
      dirty_.insert(id);
    }
    Retain(kind, dir);
  }
}

void CkptKeeper::Retain(ckpt::TierKind kind, const std::string& dir) {
  ckpt::RetentionRule rule;
  rule.keep_steps = std::max(options_.keep, 1);
  bool plan_known = false;
  int world = -1;
  {
    MutexLock lock(&mu_);
    plan_known = plan_known_;
    if (planned_step_ >= 0) rule.keep_also.push_back(planned_step_);
    // The newest verified step too (ft:{J}:ckpt:verdicts, read with the arena facts): a
    // verified step the plan does not name (held only on an evicted node, say) stays restorable.
    if (gc_job_.known && gc_job_.newest_verified >= 0 && gc_job_.newest_verified != planned_step_) {
      rule.keep_also.push_back(gc_job_.newest_verified);
    }
    world = world_size_;
    for (int rank : node_ranks_) {
      if (world <= 0 || rank < world) rule.own_ranks.push_back(rank);
    }
  }
  // Complete: in the shared remote tier, every rank of the job; in this node's local tier,
  // every rank of this node (the only ones it ever holds).
  if (kind == ckpt::TierKind::kRemote) {
    for (int rank = 0; rank < world; ++rank) rule.expected_ranks.push_back(rank);
  } else if (world > 0) {
    rule.expected_ranks = rule.own_ranks;
  }
  auto say_once = [&](const std::string& key, auto&& log) {
    if (retention_said_.insert(key).second) log();
  };
  Status s;
  ckpt::RetentionResult result;
  if (!plan_known) {
    say_once("plan", [&] {
      FT_LOG(Info, Worker, "checkpoint retention waits for the restore plan (ft:{{J}}:restore) before it "
             "removes anything: the planned step must never go; the {} tier keeps every step until "
             "then", ckpt::TierName(kind));
    });
  } else if (world <= 0) {
    say_once("world", [&] {
      FT_LOG(Warn, Worker, "checkpoint retention removes nothing: the manifests of this node's copies do "
             "not say the job's world size, so no step can be known complete. Set WORLD_SIZE (or "
             "FT_WORLD_SIZE) for the ranks");
    });
  } else {
    s = ckpt::Retain(dir, options_.job, rule, &result);
  }
  if (s.ok() && !result.removed.empty()) {
    FT_LOG(Info, Worker, "retention of the {} checkpoint tier {} removed {} cop{} of this node's ranks "
           "(steps {}..{}; keeping {} complete step{}{})", ckpt::TierName(kind), dir, result.removed.size(),
           result.removed.size() == 1 ? "y" : "ies", result.removed.front().step, result.removed.back().step,
           rule.keep_steps, rule.keep_steps == 1 ? "" : "s",
           rule.keep_also.empty() ? std::string()
                                  : fmt::format(" and step{} {} (planned, newest verified)",
                                                rule.keep_also.size() == 1 ? "" : "s", fmt::join(rule.keep_also, ", ")));
  }
  for (const std::string& why : result.left) {
    say_once("left " + why, [&] {
      FT_LOG(Warn, Worker, "retention of the {} checkpoint tier left {}; remove it by hand once no job "
             "needs it", ckpt::TierName(kind), why);
    });
  }
  const std::string incomplete_key = fmt::format("incomplete {}", ckpt::TierName(kind));
  if (s.ok() && plan_known && world > 0 && result.Stuck(rule.keep_steps)) {
    say_once(incomplete_key, [&] {
      FT_LOG(Warn, Worker, "the {} checkpoint tier {} holds {} steps, {} of them complete (a copy of "
             "every rank{}), fewer than FT_CKPT_KEEP={}: retention removes nothing there until it "
             "holds more. If this lasts, some ranks' persists fail or lag: see the copies' error in "
             "`ftmaster checkpoints`", ckpt::TierName(kind), dir, result.steps_held,
             result.complete_steps.size(), kind == ckpt::TierKind::kRemote ? " of the job" : " of this node",
             rule.keep_steps);
    });
  } else if (s.ok() && plan_known && world > 0) {
    retention_said_.erase(incomplete_key);  // said again if it happens again
  }
  if (!s.ok()) {
    FT_LOG(Warn, Worker, "retention of the {} checkpoint tier {} failed: {}; older steps stay "
           "until the next commit", ckpt::TierName(kind), dir, s.message());
  }
  std::vector<ckpt::CopyId> committed = ckpt::ListCommitted(dir, options_.job);
  MutexLock lock(&mu_);
  for (auto& [id, held] : held_) {
    if (!TierFlag(held, kind) || std::binary_search(committed.begin(), committed.end(), id)) continue;
    TierFlag(held, kind) = false;
    dirty_.insert(id);
  }
}

void CkptKeeper::CollectArenas() {
  ArenaSweepOptions sweep;
  sweep.job = options_.job;
  sweep.arena_dir = options_.arena_dir;
  sweep.local_dir = options_.local_dir;
  sweep.remote_dir = options_.remote_dir;
  JobGcFacts job;
  std::vector<int> alive;
  {
    MutexLock lock(&mu_);
    job = gc_job_;
    alive = gc_alive_ranks_;
    sweep.ranks.assign(node_ranks_.begin(), node_ranks_.end());
  }
  if (sweep.ranks.empty()) return;  // no rank of this node seen yet: nothing here is ours
  // A rank this worker sees alive holds its arenas (it writes them; restarted, it restores
  // from them) before anything else is asked.
  ArenaHolderFn others = options_.arena_holder ? options_.arena_holder : SystemArenaHolder();
  sweep.holder = [&](const std::string& path, uint64_t ino, int writer_pid) -> std::string {
    for (int rank : alive) {
      if (path == ckpt::Arena::PathFor(options_.arena_dir, options_.job, rank) ||
          path == ckpt::Arena::PrefetchPathFor(options_.arena_dir, options_.job, rank)) {
        return fmt::format("rank {}'s process runs on this node", rank);
      }
    }
    return others(path, ino, writer_pid);
  };
  uint64_t freed = 0;
  int removed = 0;
  for (const ArenaSweepEntry& e : SweepArenas(sweep, job)) {
    if (e.removed) {
      ++removed;
      freed += e.bytes;
      FT_LOG(Info, Worker, "{}", ArenaSweepLine(e));
      continue;
    }
    const std::string key = fmt::format("{} {}", e.facts.path, ArenaGcReasonName(e.decision.reason));
    if (!gc_said_.insert(key).second) continue;
    if (!e.remove_error.empty()) {
      FT_LOG(Warn, Worker, "{}; the next pass tries again", ArenaSweepLine(e));
    } else {
      FT_LOG(Debug, Worker, "{}", ArenaSweepLine(e));
    }
  }
  if (removed > 0) {
    FT_LOG(Info, Worker, "removed {} host arena{} of job {} ({:.1f} MiB of {} freed)", removed,
           removed == 1 ? "" : "s", options_.job, static_cast<double>(freed) / (1 << 20),
           options_.arena_dir);
  }
}

}  // namespace ft::worker
