#include "ftworker/worker_metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.h"
#include "ftworker/monitor/node_monitor.h"
#include "ftworker/monitor/op_names.h"
#include "jitckpt/tier.h"
#include "shm/hook_failures.h"

namespace ft::worker {

namespace {

using metrics::Kind;

constexpr const char* kRanks = "ft_worker_ranks";
constexpr const char* kRedisConnected = "ft_worker_redis_connected";
constexpr const char* kRedisDropped = "ft_worker_redis_dropped_total";
constexpr const char* kArenaHugePages = "ft_worker_arena_huge_pages";
constexpr const char* kEvents = "ft_worker_events_total";
constexpr const char* kOps = "ft_worker_ops_total";
constexpr const char* kOpDuration = "ft_worker_op_duration_seconds";
constexpr const char* kCollectiveSeconds = "ft_worker_collective_seconds_total";
constexpr const char* kSteps = "ft_worker_steps_total";
constexpr const char* kStep = "ft_worker_step_seconds";
constexpr const char* kCompute = "ft_worker_compute_seconds";
constexpr const char* kCollectiveWait = "ft_worker_collective_wait_seconds";
constexpr const char* kRecords = "ft_worker_ring_records_total";
constexpr const char* kRingDropped = "ft_worker_ring_dropped_total";
constexpr const char* kInflightAge = "ft_worker_inflight_age_seconds";
constexpr const char* kHookFailures = "ft_worker_hook_failures_total";
constexpr const char* kCopies = "ft_worker_ckpt_copies_total";
constexpr const char* kCopyBytes = "ft_worker_ckpt_copy_bytes_total";
constexpr const char* kNewestStep = "ft_worker_ckpt_newest_step";
constexpr const char* kPersists = "ft_worker_ckpt_persist_total";
constexpr const char* kPersistBytes = "ft_worker_ckpt_persist_bytes_total";
constexpr const char* kPersistSeconds = "ft_worker_ckpt_persist_seconds_total";
constexpr const char* kServedConnections = "ft_worker_transfer_connections_total";
constexpr const char* kServedBytes = "ft_worker_transfer_sent_bytes_total";
constexpr const char* kServedReads = "ft_worker_transfer_reads_total";
constexpr const char* kServedRefused = "ft_worker_transfer_refused_total";
constexpr const char* kPulledBytes = "ft_worker_replica_pulled_bytes_total";
constexpr const char* kPulledSeconds = "ft_worker_replica_pull_seconds_total";

void Must(Status s) {
  if (!s.ok()) FT_LOG(Error, Worker, "metrics: {} (a bug in ft)", s.ToString());
}

}  // namespace

// Forwards to the real server; tells the metrics which server is live.
class MeteredTransferServer : public TransferServer {
 public:
  MeteredTransferServer(std::unique_ptr<TransferServer> inner, WorkerMetrics* metrics)
      : inner_(std::move(inner)), metrics_(metrics) {
    metrics_->server_ = this;
  }
  ~MeteredTransferServer() override {
    metrics_->ServerGone(inner_->stats());
    if (metrics_->server_ == this) metrics_->server_ = nullptr;
  }
  Status Start() override { return inner_->Start(); }
  uint16_t port() const override { return inner_->port(); }
  void Stop() override { inner_->Stop(); }
  rdma::ServerStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<TransferServer> inner_;
  WorkerMetrics* metrics_;
};

WorkerMetrics::WorkerMetrics(metrics::Registry* registry, std::string job, std::string node,
                             uint64_t interval_ns)
    : registry_(registry), job_(std::move(job)), node_(std::move(node)), interval_ns_(interval_ns) {
  const std::vector<std::string> n = {"job", "node"}, r = {"job", "node", "rank"};
  auto with = [](std::vector<std::string> base, std::initializer_list<const char*> more) {
    for (const char* m : more) base.emplace_back(m);
    return base;
  };
  auto& reg = *registry_;
  Must(reg.Declare(kRanks, Kind::kGauge, "Ranks of the job this worker reads on its node (alive).", n));
  Must(reg.Declare(kRedisConnected, Kind::kGauge, "1 while the worker's Redis connection is up.", n));
  Must(reg.Declare(kArenaHugePages, Kind::kGauge,
                   "1 when the node's checkpoint arena directory (FT_CKPT_ARENA_DIR) is a tmpfs that gives the "
                   "arenas huge pages, 0 when they get 4 KiB pages (docs/checkpoints.md, \"Arenas on huge pages\").",
                   n));
  Must(reg.Declare(kRedisDropped, Kind::kCounter,
                   "Events and acknowledgements dropped while Redis was away (FT_REDIS_BUFFER full).", n));
  Must(reg.Declare(kEvents, Kind::kCounter, "Events raised, by kind (timeout, error, exit, slowdown, busy, frozen).",
                   with(r, {"kind"})));
  Must(reg.Declare(kOps, Kind::kCounter, "Collective and p2p ops completed, by communicator and op kind.",
                   with(r, {"comm", "op"})));
  Must(reg.Declare(kOpDuration, Kind::kGauge,
                   "Op durations over the last summary window (FT_SUMMARY_INTERVAL): quantile 0.1, 0.5, 0.99 and 1 (max).",
                   with(r, {"comm", "op", "quantile"})));
  Must(reg.Declare(kCollectiveSeconds, Kind::kCounter,
                   "Seconds spent in completed collective and p2p ops (their durations added up), by "
                   "communicator and op kind.", with(r, {"comm", "op"})));
  Must(reg.Declare(kSteps, Kind::kCounter, "Training steps observed (inferred from the repeating op sequence).", r));
  Must(reg.Declare(kStep, Kind::kGauge, "Duration of the rank's last step (0: not known yet).", r));
  Must(reg.Declare(kCompute, Kind::kGauge, "Median time per step outside collectives over the last window.", r));
  Must(reg.Declare(kCollectiveWait, Kind::kGauge, "Median time per step inside collectives over the last window.", r));
  Must(reg.Declare(kRecords, Kind::kCounter, "Records read from the rank's ring.", r));
  Must(reg.Declare(kRingDropped, Kind::kCounter, "Records libft.so dropped because the rank's ring was full.", r));
  Must(reg.Declare(kInflightAge, Kind::kGauge,
                   "Age of the oldest op the rank has in flight on any communicator (0: none).", r));
  Must(reg.Declare(kHookFailures, Kind::kCounter,
                   "Failures libft.so swallowed to stay fail-open (monitoring has a hole there), by place.",
                   with(r, {"place"})));
  Must(reg.Declare(kCopies, Kind::kCounter,
                   "Committed checkpoint copies this node came to hold, by tier (arena, local, remote; replica: "
                   "buddy copies of another node's ranks).", with(n, {"tier"})));
  Must(reg.Declare(kCopyBytes, Kind::kCounter, "Data bytes of those copies, by tier.", with(n, {"tier"})));
  Must(reg.Declare(kNewestStep, Kind::kGauge, "The newest step of the rank's committed copies on this node.", r));
  Must(reg.Declare(kPersists, Kind::kCounter, "Copies persisted from the arena to a tier, by tier and result (ok, error, dropped).",
                   with(n, {"tier", "result"})));
  Must(reg.Declare(kPersistBytes, Kind::kCounter, "Bytes persisted, by tier.", with(n, {"tier"})));
  Must(reg.Declare(kPersistSeconds, Kind::kCounter, "Seconds spent persisting, by tier.", with(n, {"tier"})));
  Must(reg.Declare(kServedConnections, Kind::kCounter, "Peer connections accepted by the transfer server.", n));
  Must(reg.Declare(kServedBytes, Kind::kCounter, "Checkpoint bytes served to peers (pulls served).", n));
  Must(reg.Declare(kServedReads, Kind::kCounter, "Read requests served to peers.", n));
  Must(reg.Declare(kServedRefused, Kind::kCounter,
                   "Peer connections refused: failed authentication, over a cap, forged frames.", n));
  Must(reg.Declare(kPulledBytes, Kind::kCounter, "Bytes of buddy copies pulled from other nodes (pulls received).", n));
  Must(reg.Declare(kPulledSeconds, Kind::kCounter, "Seconds spent pulling buddy copies.", n));
}

void WorkerMetrics::OnEvent(const proto::Event& event) {
  (void)registry_->Add(kEvents, {job_, node_, std::to_string(event.rank), event.kind}, 1);
}

void WorkerMetrics::OnSummary(const proto::RankSummary& s) {
  const metrics::LabelValues rank = Rank(s.rank);
  (void)registry_->Set(kSteps, rank, static_cast<double>(s.steps));
  (void)registry_->Set(kStep, rank, s.step_ms / 1e3);
  (void)registry_->Set(kCompute, rank, s.compute_ms / 1e3);
  (void)registry_->Set(kCollectiveWait, rank, s.comm_wait_ms / 1e3);
  (void)registry_->Add(kRecords, rank, static_cast<double>(s.records));
  (void)registry_->Add(kRingDropped, rank, static_cast<double>(s.dropped));
  for (const proto::OpSummary& op : s.ops) {
    metrics::LabelValues labels = rank;
    labels.push_back(CommHex(op.comm_id));
    labels.push_back(proto::OpKindName(op.op));
    (void)registry_->Add(kOps, labels, static_cast<double>(op.count));
    (void)registry_->Add(kCollectiveSeconds, labels, op.sum_ms / 1e3);
    if (op.count == 0) continue;
    labels.emplace_back();
    // 0.1: the op's undisturbed time, on which ftmaster compares links (a busy host only adds).
    for (auto [q, ms] : {std::pair{"0.1", op.p10_ms}, std::pair{"0.5", op.p50_ms}, std::pair{"0.99", op.p99_ms},
                         std::pair{"1", op.max_ms}}) {
      if (ms < 0) continue;  // p10 -1: not reported
      labels.back() = q;
      (void)registry_->Set(kOpDuration, labels, ms / 1e3);
    }
  }
}

void WorkerMetrics::OnCkptReport(const CkptReport& report, bool buddy) {
  const proto::CkptCopy& c = report.copy;
  if (report.removed) {
    for (auto it = counted_.lower_bound({c.step, c.rank, ""});
         it != counted_.end() && std::get<0>(*it) == c.step && std::get<1>(*it) == c.rank;) {
      it = counted_.erase(it);
    }
    return;
  }
  if (c.torn) return;
  for (const std::string& tier : c.tiers) {
    if (!counted_.insert({c.step, c.rank, tier}).second) continue;
    (void)registry_->Add(kCopies, {job_, node_, tier}, 1);
    (void)registry_->Add(kCopyBytes, {job_, node_, tier}, static_cast<double>(c.bytes));
  }
  if (!buddy) {
    const double newest = registry_->Value(kNewestStep, Rank(c.rank));
    if (!(newest >= static_cast<double>(c.step))) {
      (void)registry_->Set(kNewestStep, Rank(c.rank), static_cast<double>(c.step));
    }
  }
}

void WorkerMetrics::Refresh(uint64_t mono_ns, const NodeMonitor& monitor, const DaemonFigures& daemon) {
  if (mono_ns < next_refresh_ns_) return;
  next_refresh_ns_ = mono_ns + interval_ns_;
  const metrics::LabelValues own = {job_, node_};
  (void)registry_->Set(kRanks, own, static_cast<double>(monitor.Ranks().size()));
  (void)registry_->Set(kRedisConnected, own, daemon.redis_connected ? 1 : 0);
  if (daemon.arena_huge_pages >= 0) (void)registry_->Set(kArenaHugePages, own, daemon.arena_huge_pages);
  (void)registry_->Set(kRedisDropped, own, static_cast<double>(daemon.redis_dropped));
  for (const proto::RankProgress& p : monitor.Progress()) {
    double oldest_ms = 0;
    for (const proto::CommRow& row : p.comms) {
      if (row.entered_seq > row.completed_seq && row.entered_age_ms > oldest_ms) oldest_ms = row.entered_age_ms;
    }
    (void)registry_->Set(kInflightAge, Rank(p.rank), oldest_ms / 1e3);
  }
  OnHookFailures(monitor.HookFailures());
  rdma::ServerStats served = gone_;
  if (server_ != nullptr) served += server_->stats();
  (void)registry_->Set(kServedConnections, own, static_cast<double>(served.connections));
  (void)registry_->Set(kServedBytes, own, static_cast<double>(served.bytes_sent));
  (void)registry_->Set(kServedReads, own, static_cast<double>(served.reads));
  (void)registry_->Set(kServedRefused, own,
                       static_cast<double>(served.auth_refused + served.over_limit + served.forged));
  if (daemon.replicating) {
    (void)registry_->Set(kPulledBytes, own, static_cast<double>(daemon.pulled_bytes));
    (void)registry_->Set(kPulledSeconds, own, daemon.pulling_seconds);
  }
}

void WorkerMetrics::OnHookFailures(const std::vector<NodeMonitor::RankHookFailures>& now) {
  std::map<std::tuple<int, uint64_t, uint32_t>, uint64_t> seen;
  for (const NodeMonitor::RankHookFailures& r : now) {
    for (const shm::HookFailureCount& c : r.counts) {
      const auto key = std::make_tuple(r.rank, r.incarnation, c.place);
      auto was = hook_failures_seen_.find(key);
      const uint64_t before = was == hook_failures_seen_.end() ? 0 : was->second;
      // The segment's bytes are the process's to write: a count that went down adds nothing.
      const uint64_t count = std::max(before, c.count);
      seen[key] = count;
      if (count == before) continue;
      const char* name = shm::HookPlaceName(c.place);
      metrics::LabelValues labels = Rank(r.rank);
      labels.push_back(name != nullptr ? std::string(name) : fmt::format("place_{}", c.place));
      (void)registry_->Add(kHookFailures, labels, static_cast<double>(count - before));
    }
  }
  hook_failures_seen_ = std::move(seen);
}

void WorkerMetrics::ServerGone(const rdma::ServerStats& last) { gone_ += last; }

PersistFn WorkerMetrics::WrapPersist(PersistFn inner) {
  if (!inner) {
    inner = [](ckpt::TierKind kind, std::string_view dir, const ckpt::Manifest& m, const uint8_t* data,
               const std::function<bool()>& still_valid, ckpt::PersistStats* stats) {
      return ckpt::PersistCopy(kind, dir, m, data, still_valid, stats);
    };
  }
  return [this, inner = std::move(inner)](ckpt::TierKind kind, std::string_view dir, const ckpt::Manifest& m,
                                          const uint8_t* data, const std::function<bool()>& still_valid,
                                          ckpt::PersistStats* stats) {
    Status s = inner(kind, dir, m, data, still_valid, stats);
    const std::string tier = ckpt::TierName(kind);
    // kNotReady: the arena was overwritten meanwhile and the copy dropped (a newer one follows).
    const char* result = s.ok() ? "ok" : (s.code() == StatusCode::kNotReady ? "dropped" : "error");
    (void)registry_->Add(kPersists, {job_, node_, tier, result}, 1);
    if (s.ok() && stats != nullptr) {
      (void)registry_->Add(kPersistBytes, {job_, node_, tier}, static_cast<double>(stats->bytes));
      (void)registry_->Add(kPersistSeconds, {job_, node_, tier}, stats->seconds);
    }
    return s;
  };
}

TransferServerFactory WorkerMetrics::WrapTransferServer(TransferServerFactory inner) {
  if (!inner) inner = MakeRdmaServer;
  return [this, inner = std::move(inner)](const rdma::ServerOptions& options) -> std::unique_ptr<TransferServer> {
    std::unique_ptr<TransferServer> server = inner(options);
    if (!server) return server;
    return std::make_unique<MeteredTransferServer>(std::move(server), this);
  };
}

}  // namespace ft::worker
