// ft::worker::CkptKeeper: what ftworker does with its node's checkpoints. It notices a newly
// committed copy in a rank's arena, reports it at once (tiers ["arena"]), persists it to the
// local tier (FT_CKPT_DIR) then the remote tier (FT_CKPT_REMOTE_DIR), keeps the newest
// FT_CKPT_KEEP steps per tier, and reports per (step, rank) which tiers hold a committed copy
// as that changes. A copy no tier holds any more is reported removed.
//
// Threads: Tick() and TakeReports() are called by the daemon loop and never wait for I/O
// beyond reading arena headers (Tick lists the arena directory about once a second, not every
// tick). Everything that touches the tiers — cleaning at start, listing, persisting,
// retention — runs on the keeper's own persist thread, so neither the loop's detection nor a
// rank ever waits for a disk.
//
// Only arenas of this node's ranks: several nodes' arenas may share one directory (simulated
// nodes in tests share /dev/shm), so an arena is read only once its rank was seen on this node
// (Tick's `node_ranks`, the ranks whose segments this worker reads). A rank stays this node's
// for the keeper's lifetime, also after its process exited.
//
// A persist that fails (disk full, I/O error) is logged (Warn, what to do), goes into
// CkptCopy.error, and the copy stays reported in the tiers that still hold it (the arena).
// A copy overwritten in the arena while it was being persisted is dropped; the newer one is
// persisted instead. Torn copies are reported but never persisted: they are never restored,
// and writing them would push older, restorable steps out of retention.
//
// Arenas are removed (SetGcFacts, ftworker/ckpt/arena_gc.h): on the persist thread, the arenas and
// prefetch arenas of this node's ranks that the rule lets go — the job finished or its plan
// names a newer step, the copy is persisted in a tier and is not the planned, newest complete
// or newest verified step, and no live process holds the file (a rank the worker sees alive
// first, then the arena's writer and /proc). Removed with unlink, said in the log.
#ifndef FT_FTWORKER_CKPT_KEEPER_H_
#define FT_FTWORKER_CKPT_KEEPER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "ftworker/ckpt/arena_gc.h"
#include "ftworker/ckpt/arena_sweep.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier.h"
#include "proto/ckpt_codec.h"

namespace ft::worker {

// ckpt::PersistCopy's signature: the seam tests use to inject a failing disk.
using PersistFn = std::function<Status(ckpt::TierKind kind, std::string_view dir,
                                       const ckpt::Manifest& m, const uint8_t* data,
                                       const std::function<bool()>& still_valid,
                                       ckpt::PersistStats* stats)>;

struct CkptKeeperOptions {
  std::string job;
  std::string node;
  std::string arena_dir;   // FT_CKPT_ARENA_DIR
  std::string local_dir;   // FT_CKPT_DIR; empty: no local tier
  std::string remote_dir;  // FT_CKPT_REMOTE_DIR; empty: no remote tier
  int keep = 2;            // FT_CKPT_KEEP, per tier
  uint64_t scan_interval_ns = 1'000'000'000;
  PersistFn persist;       // empty: ckpt::PersistCopy
  ArenaHolderFn arena_holder;  // tests: who holds an arena; empty: SystemArenaHolder()
};

// One change for Redis: the copy as it is held now, or (removed) that no tier holds it.
struct CkptReport {
  proto::CkptCopy copy;
  bool removed = false;
};

class CkptKeeper {
 public:
  // Starts the persist thread, whose first task is the tiers at start: uncommitted files (a
  // worker killed mid-persist) removed and logged, the local tier's committed copies reported.
  explicit CkptKeeper(CkptKeeperOptions options);
  // Finishes the persist in progress (a copy is never left half-committed), drops the queue.
  ~CkptKeeper();
  CkptKeeper(const CkptKeeper&) = delete;
  CkptKeeper& operator=(const CkptKeeper&) = delete;

  // Daemon loop, every tick: adopts `node_ranks`; every scan_interval reads the arenas of this
  // node's ranks and reports and queues new commits.
  void Tick(uint64_t mono_ns, int64_t unix_ms, const std::vector<int>& node_ranks);
  // The next Tick scans the arenas whatever the interval: a rank just acknowledged a save, and
  // the master is waiting for its copy.
  void ScanSoon() { next_scan_ns_ = 0; }
  // Changes since the last call, by (step, rank). Any thread.
  std::vector<CkptReport> TakeReports();
  // Makes the next TakeReports() report every copy held: for a Redis that lost its data.
  void ReportAll();
  // The step of the restore plan the worker last read from the master (-1: none, `step none`).
  // Retention removes nothing until this was called once, and never removes this step. Any
  // thread.
  void SetPlan(int64_t planned_step);

  // What the master says of the job (ReadJobGcFacts) and the ranks whose process is alive on
  // this node (NodeMonitor::Ranks): queues an arena pass on the persist thread unless one is
  // queued already. The daemon calls it every few seconds while Redis answers. Any thread.
  void SetGcFacts(const JobGcFacts& job, std::vector<int> alive_ranks);

  // The arena file that held this node's committed copy (step, rank) at the last scan, or ""
  // when no arena of this node's ranks does (the copy server resolves "arena/<step>/<rank>"
  // through it and re-checks the arena itself: it may have been overwritten since). Any thread.
  std::string ArenaPathOf(ckpt::CopyId id);
  // Every arena file holding a committed copy of this node's ranks at the last scan. Any thread.
  std::vector<std::string> ArenaPaths();

  // Tests: waits until the persist thread has nothing queued or running.
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  // A copy this node holds somewhere. tiers/error in `copy` are recomputed when reported.
  struct Held {
    proto::CkptCopy copy;
    bool arena = false, local = false, remote = false;
    std::string arena_path;  // while arena
    std::string local_error, remote_error;
  };
  struct Task {
    enum class Kind { kStart, kPersist, kAdoptRemote, kGc } kind;
    std::string arena_path;  // kPersist
    uint64_t generation = 0; // kPersist
    int rank = -1;           // kPersist, kAdoptRemote
  };
  // A copy in one slot of an arena, known by its generation and its manifest's step and
  // creation time: a rank that re-registers with another geometry gets a new file whose
  // generations start again. Both slots are reported: the committed copy and the one of the
  // step before (the other slot, until the next save overwrites it), so a plan can choose the
  // newest step every shard holds whole (a preemption that split the ranks over two steps).
  struct ArenaSeen {
    uint64_t generation = 0;
    uint64_t created_unix_ns = 0;
    ckpt::CopyId id;
    bool Same(uint64_t gen, const ckpt::Manifest& m) const {
      return generation == gen && created_unix_ns == m.created_unix_ns && id.step == m.step;
    }
  };
  struct ArenaSlot {
    std::string path;
    int slot = 0;
    bool operator<(const ArenaSlot& o) const { return std::tie(path, slot) < std::tie(o.path, o.slot); }
  };

  void ScanArenas(int64_t unix_ms);
  // `persist`: the committed copy (the other slot's is older: persisted when it was committed).
  void ArenaHolds(const ArenaSlot& where, uint64_t generation, const ckpt::Manifest& m, int64_t unix_ms,
                  bool persist);
  void ArenaLost(const ArenaSlot& where);
  void Enqueue(Task task);

  void PersistLoop();
  void StartTiers();
  void AdoptRemote(int rank);
  void Persist(const Task& task);
  // Retention of one tier after a commit, and what it removed, reported. Kept: the newest
  // FT_CKPT_KEEP steps that are complete in the tier — every rank of the job (world size from
  // the manifests) in the shared remote tier, every rank of this node in the local one — the
  // steps newer than those, and the planned step (SetPlan). Only this node's ranks' copies are
  // removed. Nothing is removed before the plan was read or while the world size is unknown.
  void Retain(ckpt::TierKind kind, const std::string& dir);
  // The arena pass: SweepArenas over this node's ranks with the facts SetGcFacts gave.
  void CollectArenas();
  // Reads a tier's committed copies of `rank` (-1: all) and records them as held there.
  void RecordTier(ckpt::TierKind kind, const std::string& dir, int rank);

  Held& EntryLocked(const ckpt::Manifest& m, int64_t unix_ms) REQUIRES(mu_);
  static bool& TierFlag(Held& held, ckpt::TierKind kind);
  static std::string& TierError(Held& held, ckpt::TierKind kind);
  const std::string& TierDir(ckpt::TierKind kind) const;

  const CkptKeeperOptions options_;
  PersistFn persist_;

  // Daemon loop only.
  std::set<int> owned_ranks_;
  std::map<ArenaSlot, ArenaSeen> arenas_;    // the copy each slot of an arena holds
  std::set<std::string> warned_;             // paths whose trouble was logged once
  uint64_t next_scan_ns_ = 0;

  Mutex mu_;
  CondVar cv_;
  std::map<ckpt::CopyId, Held> held_ GUARDED_BY(mu_);
  std::set<ckpt::CopyId> dirty_ GUARDED_BY(mu_);
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::set<int> node_ranks_ GUARDED_BY(mu_);  // owned_ranks_, for the persist thread
  bool plan_known_ GUARDED_BY(mu_) = false;
  int64_t planned_step_ GUARDED_BY(mu_) = -1;
  int world_size_ GUARDED_BY(mu_) = -1;  // as the newest copy seen says
  int64_t world_size_step_ GUARDED_BY(mu_) = -1;  // that copy's step
  JobGcFacts gc_job_ GUARDED_BY(mu_);  // SetGcFacts
  std::vector<int> gc_alive_ranks_ GUARDED_BY(mu_);  // SetGcFacts

  // Persist thread only: what retention and the tier readers said once (a warning is not
  // repeated every commit).
  std::set<std::string> retention_said_;
  std::set<std::string> gc_said_;  // "<path> <reason>": an arena kept for the same reason is said once
  std::thread thread_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_CKPT_KEEPER_H_
