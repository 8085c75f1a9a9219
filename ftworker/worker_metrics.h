// ft::worker::WorkerMetrics: ftworker's Prometheus figures (README "Metrics"), kept in a
// metrics::Registry that metrics::Exporter serves. The daemon's loop feeds it what it already
// handles — each event raised, each rank summary closed, each checkpoint copy reported — and
// calls Refresh every tick (it reads the node's state once per FT_METRICS_INTERVAL); the server
// thread only renders. Two seams count what happens on other threads: the persist function
// (the keeper's persist thread) and the transfer server (its copies served to peers).
// Labels: job, node, rank, comm (16 hex digits, as ftworker status shows it), op, kind, tier,
// place (where libft.so swallowed a failure: shm::HookPlaceName).
#ifndef FT_FTWORKER_WORKER_METRICS_H_
#define FT_FTWORKER_WORKER_METRICS_H_

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <utility>

#include "ftworker/ckpt/ckpt_keeper.h"
#include "ftworker/monitor/node_monitor.h"
#include "ftworker/transfer/transfer_service.h"
#include "metrics/registry.h"
#include "proto/messages.h"

namespace ft::worker {

// What the daemon's loop knows of itself, handed to each Refresh (the metrics read no daemon).
struct DaemonFigures {
  bool redis_connected = false;
  int arena_huge_pages = -1;    // 1: the arena directory gives huge pages, 0: 4 KiB, -1: unknown
  uint64_t redis_dropped = 0;   // reports the outbox dropped
  bool replicating = false;     // a replicator runs (buddy copies): the pull figures below
  uint64_t pulled_bytes = 0;
  double pulling_seconds = 0;
};

class WorkerMetrics {
 public:
  // Declares the families in `registry` (which must outlive this). `interval_ns`: how often
  // Refresh reads the node's state.
  WorkerMetrics(metrics::Registry* registry, std::string job, std::string node, uint64_t interval_ns);

  // Daemon loop.
  void OnEvent(const proto::Event& event);
  void OnSummary(const proto::RankSummary& summary);
  // `buddy`: a copy of another node's rank (the replicator's), else this node's own.
  void OnCkptReport(const CkptReport& report, bool buddy);
  void Refresh(uint64_t mono_ns, const NodeMonitor& monitor, const DaemonFigures& daemon);
  // The hook failures the segments count (NodeMonitor::HookFailures; Refresh passes them):
  // each incarnation's growth is added to ft_worker_hook_failures_total, so a restarted rank's
  // counts add to its earlier ones.
  void OnHookFailures(const std::vector<NodeMonitor::RankHookFailures>& now);

  // The persist function counted: ft_worker_ckpt_persist_* by tier and result. Any thread.
  PersistFn WrapPersist(PersistFn inner);
  // The transfer server counted: its stats() read at each Refresh. The servers it makes must
  // live on the daemon's loop thread (they do: TransferService is the loop's).
  TransferServerFactory WrapTransferServer(TransferServerFactory inner);

 private:
  friend class MeteredTransferServer;
  metrics::LabelValues Rank(int rank) const { return {job_, node_, std::to_string(rank)}; }
  void ServerGone(const rdma::ServerStats& last);

  metrics::Registry* registry_;
  const std::string job_, node_;
  const uint64_t interval_ns_;
  uint64_t next_refresh_ns_ = 0;
  // (step, rank, tier) already counted in ft_worker_ckpt_copies_total; a copy no tier holds
  // any more leaves it, so it stays as small as retention keeps the tiers.
  std::set<std::tuple<int64_t, int, std::string>> counted_;
  // (rank, incarnation, place) -> the count already added; incarnations no longer read leave.
  std::map<std::tuple<int, uint64_t, uint32_t>, uint64_t> hook_failures_seen_;
  // Loop thread: the live transfer server and the totals of the ones stopped before it.
  TransferServer* server_ = nullptr;
  rdma::ServerStats gone_{};
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_WORKER_METRICS_H_
