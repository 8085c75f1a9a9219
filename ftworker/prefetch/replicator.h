// ft::worker::Replicator: buddy copies. A crashed or frozen rank cannot save, and a lost node
// takes its host arenas with it; with a sharded optimizer nothing else holds that shard's
// bytes. So each node's worker keeps, in its own memory, a copy of the newest committed copy
// of every rank of one other node — its "guarded" node — pulled through the transfer engine
// (the prefetcher's PullEngine) in the background (docs/checkpoints.md, "Buddy copies").
//
// Who guards whom: the job's worker nodes (those with a transfer endpoint in ft:{J}:endpoints
// whose heartbeat is alive) sorted by name form a ring; a node's buddy is the next node, so a
// node guards the previous one. Every node holds exactly one other node's ranks (no node more
// than its share), and a change of membership (a node gone, a replacement) moves the ring at
// the next poll.
//
// What: every poll (about a second), the guarded node's ranks (its heartbeat) and their copies
// of the newest steps in ft:{J}:ckpt:<step>; per rank the newest committed, untorn copy held in
// that node's arena. It is pulled when this node holds no copy of the rank yet, or the rank's
// step advanced by at least `every` steps (FT_CKPT_REPLICATE_EVERY) past the one held. The pull
// (region arena/<step>/<rank>) goes into <arena_dir>/ft-replica.<job>.<rank>, two slots, so the
// previous copy stays committed until the new one verified chunk by chunk (a node lost mid-pull
// costs nothing); one rank at a time, on the replicator's own thread, paced to
// `bytes_per_second` (FT_CKPT_REPLICATE_RATE; it shares the network with training). Once committed it is reported
// in ft:{J}:ckpt:<step>:buddy (field: rank, CkptCopy with node = this node, tiers ["replica"],
// buddy = true) and the previous step's report of that rank is removed; the transfer server
// serves it as replica/<step>/<rank> (ReplicaPathOf), and a restore plan lists it as a source.
// A restarted worker finds its replica arenas and reports them again.
//
// Threads: Tick and TakeReports on the daemon's thread; pulls on the replicator's thread;
// ReplicaPathOf from the transfer server's threads.
#ifndef FT_FTWORKER_REPLICATOR_H_
#define FT_FTWORKER_REPLICATOR_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "ftworker/ckpt/ckpt_keeper.h"
#include "ftworker/prefetch/prefetcher.h"
#include "jitckpt/tier.h"
#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "redis/store.h"

namespace ft::worker {

// The ring: the node after `node` in the sorted, de-duplicated `nodes` (its buddy), and the
// node before it (the node whose ranks it copies). "" when `nodes` holds no other node than
// `node`; `node` need not be in `nodes` (a worker not yet published counts itself in).
std::string BuddyOf(std::vector<std::string> nodes, const std::string& node);
std::string GuardedBy(std::vector<std::string> nodes, const std::string& node);

// One pull the replicator decides on: the rank's newest copy on the guarded node.
struct ReplicaWant {
  int rank = -1;
  int64_t step = -1;
  uint64_t digest = 0;
  bool operator==(const ReplicaWant&) const = default;
};

// Pure: per rank of `copies` held by `guarded` (not buddy copies, not torn, in its arena), the
// newest; wanted when `held` has no step for the rank or the newest is at least `every` steps
// past it (every <= 0: never). By rank.
std::vector<ReplicaWant> ChooseReplicaPulls(const std::vector<proto::CkptCopy>& copies, const std::string& guarded,
                                            const std::map<int, int64_t>& held, int64_t every);

struct ReplicatorOptions {
  std::string job;
  std::string node;
  std::string arena_dir;  // FT_CKPT_ARENA_DIR: where the replica arenas go
  int64_t every = 0;      // FT_CKPT_REPLICATE_EVERY; 0: off
  uint64_t bytes_per_second = 0;  // FT_CKPT_REPLICATE_RATE; 0: no cap
  rdma::PullOptions pull; // the secret is read from Redis
  std::shared_ptr<PullEngine> engine;
  uint64_t poll_interval_ns = 1'000'000'000;
  int steps_looked_at = 4;  // the newest steps of ckpt:steps read per poll
};

class Replicator {
 public:
  explicit Replicator(ReplicatorOptions options);
  ~Replicator();  // waits for the pull under way
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Daemon thread, every tick: every poll interval reads the ring and the guarded node's
  // copies (redis may be null: nothing is read) and queues the pulls due.
  void Tick(uint64_t mono_ns, redis::Commands* redis);
  // Buddy copies committed (removed = the previous step of a rank replaced), for the reporter.
  std::vector<CkptReport> TakeReports();
  // Makes the next TakeReports() report every buddy copy held: for a Redis that lost its data.
  void ReportAll();
  // The step the master's restore plan names (-1 none), from the node's plan sync. A buddy copy
  // of a rank the ring no longer gives this node (its node moved, or left) is removed once its
  // step is older than the planned one: until then it may be the only copy of its shard (the
  // node it came from may be the one that failed), after that no plan goes back to it.
  void SetPlannedStep(int64_t step);
  // The replica arena holding (step, rank), or "". Any thread.
  std::string ReplicaPathOf(ckpt::CopyId id);
  // The node whose ranks this node copies now ("" none yet).
  std::string guarded() const;
  // Tests: blocks until nothing is queued or pulling.
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Bytes and transfer seconds of the pulls done.
  uint64_t bytes_pulled() const;
  double seconds_pulling() const;

 private:
  struct Held {
    int64_t step = -1;
    proto::CkptCopy copy;
  };
  struct Job {
    ReplicaWant want;
    rdma::Peer peer;
    std::string secret;
  };

  void Poll(redis::Commands& redis);
  // Removes the buddy copies of ranks not in `guarded_ranks` whose step is below planned_step_.
  void DropUnguarded(const std::vector<int>& guarded_ranks) REQUIRES(mu_);
  void FindKept();  // replica arenas a previous worker left: held again
  void Loop();
  // *transfer_s: the engine's pull alone (what bytes_pulled/seconds_pulling rate).
  Status PullOne(const Job& job, proto::CkptCopy* out, double* transfer_s);

  const ReplicatorOptions options_;
  const proto::Keys keys_;
  uint64_t next_poll_ns_ = 0;

  mutable Mutex mu_;
  CondVar cv_;
  std::map<int, Held> held_ GUARDED_BY(mu_);  // by rank
  std::map<int, std::pair<int64_t, uint64_t>> failed_step_;  // rank -> (step, digest) whose pull failed last
  std::vector<Job> queue_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::string guarded_ GUARDED_BY(mu_);
  int64_t planned_step_ GUARDED_BY(mu_) = -1;
  std::vector<CkptReport> reports_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  double seconds_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_REPLICATOR_H_
