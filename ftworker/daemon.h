// ft::worker::Daemon: the loop of one ftworker. Every tick (FT_WORKER_TICK) it reads every
// local rank through the NodeMonitor, queues what Redis should learn (events at once, progress
// tables every FT_REPORT_INTERVAL, summaries every FT_SUMMARY_INTERVAL, membership on change
// and again whenever Redis turns out to have lost it, a heartbeat every second), flushes,
// picks up new timeouts and commands from the master, and runs the commands. Redis being away
// changes nothing but the flushing: detection goes on, the reporter keeps what it must
// deliver, and the connection is retried with backoff.
//
// Checkpoints: the TransferService serves the node's committed copies to peers (its server on
// its own threads); the CkptKeeper reports the node's committed copies (and persists them on its
// own thread); the RestorePlanSync keeps the node's restore plan file in step with Redis. The
// Prefetcher pulls the planned shards of the node's ranks (those it sees and saw, and
// FT_NODE_RANKS) that have no copy on the node from other nodes (on its own threads) and the
// plan file waits for it. Every 5 s the job's state (finished, planned,
// newest complete and verified steps) goes to the keeper, which removes the host arenas that
// are no longer needed (ftworker/ckpt/arena_gc.h).
// Single-threaded: everything but the keeper's persist thread happens on the thread that
// calls Run().
#ifndef FT_FTWORKER_DAEMON_H_
#define FT_FTWORKER_DAEMON_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/config.h"
#include "ftworker/ckpt/ckpt_keeper.h"
#include "ftworker/health/health_sampler.h"
#include "ftworker/health/rank_devices.h"
#include "ftworker/command_runner.h"
#include "ftworker/master_watch.h"
#include "ftworker/monitor/node_monitor.h"
#include "ftworker/prefetch/prefetcher.h"
#include "ftworker/prefetch/replicator.h"
#include "ftworker/report_pacing.h"
#include "ftworker/reporter.h"
#include "ftworker/ckpt/restore_plan_sync.h"
#include "ftworker/transfer/transfer_service.h"
#include "proto/keys.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::worker {

class WorkerMetrics;
struct DaemonFigures;

struct DaemonOptions {
  std::string job;
  std::string node;
  std::string host;
  redis::Endpoint endpoint;
  Config config;
  PersistFn persist;  // tests: a failing disk; empty: ckpt::PersistCopy
  std::string listen_address;  // the transfer server's (ChooseListenAddress); empty: 127.0.0.1
  TransferServerFactory make_transfer_server;  // tests: a fake; empty: rdma::Server
  rdma::FastPathServer* fast_path = nullptr;   // offered next to TCP (verbs); null: TCP only
  std::shared_ptr<PullEngine> pull_engine;     // tests: a fake; empty: rdma::Stat/Pull (prefetch)
  rdma::FastPathClient* pull_fast_path = nullptr;  // the prefetch's (verbs); null: TCP only
  // Told of each prefetch arena's data region before its pull and before it is unmapped (the
  // verbs client registers and forgets it there: PrefetcherOptions::destination_mapped).
  std::function<void(uint8_t*, uint64_t)> prefetch_arena_mapped;
  std::function<void(const uint8_t*, uint64_t)> prefetch_arena_unmapped;
  // Told of each served arena's data region once it is mapped, and when it is let go (the
  // verbs server registers and forgets it there: rdma::VerbsServer::Register, Forget).
  std::function<void(const uint8_t*, uint64_t)> arena_mapped, arena_unmapped;
  ArenaHolderFn arena_holder;  // tests: who holds an arena; empty: SystemArenaHolder()
  WorkerMetrics* metrics = nullptr;  // fed by the loop (worker_metrics.h); null: none
  // The node's hardware and system signals (main.cc starts one with FT_HEALTH), reported as
  // hardware events each tick; null: none read (tests that do not inject signals).
  health::HealthSampler* health = nullptr;
};

class Daemon {
 public:
  // Talks to options.endpoint (a redis::RedisStore), and hears the master through a
  // MasterWatch on a second connection.
  Daemon(DaemonOptions options, NodeMonitor* monitor);
  // Any Store: tests pass a redis::FakeStore and drive Tick(). `watch_store`: the watch's own
  // connection; null: no watch (the daemon polls the master and writes every table).
  Daemon(DaemonOptions options, NodeMonitor* monitor, std::unique_ptr<redis::Store> store,
         std::unique_ptr<redis::Store> watch_store = nullptr);

  // Ticks until `stop` is set, then ticks once more (what the ranks did since) and flushes
  // what it can (bounded by one connect timeout), and removes the node's restore plan file.
  void Run(const std::atomic<bool>& stop);

  // One round; public for tests. `mono_ns` (CLOCK_MONOTONIC) is the only clock it reads.
  void Tick(uint64_t mono_ns, int64_t unix_ms);

  bool connected() { return store_->connected(); }
  // Whether the master's notices reach this worker now (MasterWatch::listening).
  bool hearing_master() const { return watch_ != nullptr && watch_->listening(); }
  // Whether a window notice of the master's stands (every progress table is written).
  bool window_open() const { return window_open_; }
  const Reporter& reporter() const { return reporter_; }
  CkptKeeper& keeper() { return *keeper_; }
  const RestorePlanSync& plan_sync() const { return plan_sync_; }
  const TransferService& transfer() const { return *transfer_; }
  Prefetcher* prefetcher() { return prefetcher_.get(); }
  Replicator* replicator() { return replicator_.get(); }  // null without FT_CKPT_REPLICATE_EVERY

 private:
  // What the metrics show of the daemon itself (worker_metrics.h).
  DaemonFigures Figures();
  // The checkpoint keeper's turn (its copies into the reporter); returns the node's ranks.
  std::vector<int> TickKeeper(uint64_t mono_ns, int64_t unix_ms);
  // The copies a keeper or replicator found or removed since the last tick, into the metrics and
  // the node's copies hash (its own arenas', or the buddy copies it holds of another node's ranks).
  void PublishCopies(const std::vector<CkptReport>& reports, bool buddy);
  // True when Redis is usable now; the first tick after a (re)connect reloads what the worker
  // keeps in Redis.
  bool EnsureConnected(uint64_t mono_ns);
  void PollTimeouts();
  void PollCommands(int64_t unix_ms);
  // Takes the watch's news: window notices now, the rest for the polls at the end of Tick.
  MasterNews TakeNews(uint64_t mono_ns);
  // The polls of what the master publishes: at once for what a notice named, the rest at
  // their fallback rate (quick while no notice can be heard, slow while they can).
  void PollMaster(uint64_t mono_ns, int64_t unix_ms, const MasterNews& news);
  // The hardware signals read since the last tick, each with the ranks it concerns, as events.
  void ReportHardware(int64_t unix_ms);
  // Which progress tables and summaries go out at this tick (report_pacing.h).
  void Report(uint64_t mono_ns, int64_t unix_ms);
  // Whether Redis still holds this node's memberships (one HMGET, every kMembershipCheckNs);
  // when one is missing, Redis lost its data and everything is written again.
  void CheckMembershipInRedis(uint64_t mono_ns);
  // Every kArenaGcPollNs while Redis answers: the job's state (ReadJobGcFacts) and the ranks
  // alive on this node go to the keeper, which removes the arenas the rule lets go.
  void PollArenaGc(uint64_t mono_ns);

  DaemonOptions options_;
  NodeMonitor* monitor_;
  proto::Keys keys_;
  Reporter reporter_;
  CommandRunner runner_;
  std::unique_ptr<CkptKeeper> keeper_;
  RestorePlanSync plan_sync_;
  std::unique_ptr<Replicator> replicator_;  // before transfer_: the server resolves replica regions through it
  std::unique_ptr<TransferService> transfer_;
  std::unique_ptr<Prefetcher> prefetcher_;  // the plan file's gate: after plan_sync_
  std::unique_ptr<redis::Store> store_;
  std::unique_ptr<MasterWatch> watch_;  // null: no notices (tests on a FakeStore)
  health::RankDevices rank_devices_;
  ProgressPacer progress_pacer_;
  SummaryPacer summary_pacer_;
  bool window_open_ = false;          // the master's window notice: its ranks' tables are written
  std::optional<proto::RankRanges> window_ranks_;  // the ranks it names; none: every rank
  uint64_t window_until_ns_ = 0;      // a lost "closed" notice ends it here
  double smallest_timeout_ms_ = 0;    // of the table in use; 0: none published yet
  bool was_connected_ = false;
  bool cursor_read_failing_ = false;  // warned once until the read succeeds
  bool resend_membership_ = false;
  uint64_t next_report_ns_ = 0;
  uint64_t next_summary_ns_ = 0;
  uint64_t next_heartbeat_ns_ = 0;
  uint64_t next_master_poll_ns_ = 0;
  int arena_huge_pages_ = -1;  // the arena directory's page size (Run reads it once): DaemonFigures
  uint64_t next_membership_check_ns_ = 0;
  uint64_t next_arena_gc_ns_ = 0;
  bool arena_gc_failed_ = false;  // said once until it works again
  std::string timeouts_version_;
  std::string command_cursor_;  // empty until read from Redis after a connect
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_DAEMON_H_
