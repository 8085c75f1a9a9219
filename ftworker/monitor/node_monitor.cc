#include "ftworker/monitor/node_monitor.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <span>

#include "common/log.h"
#include "ftworker/monitor/op_names.h"

namespace ft::worker {

NodeMonitorOptions NodeMonitorOptions::FromConfig(const Config& config, std::string job, std::string node) {
  NodeMonitorOptions o;
  o.job = std::move(job);
  o.node = std::move(node);
  o.settings = MonitorSettings::FromConfig(config);
  o.segment_uid = config.segment_uid;
  return o;
}

namespace {

// A stopped rank's SIGKILL comes this long after its termination-save grace: the save's end,
// the app's handler, the process's exit.
constexpr double kAfterTermGraceS = 5;

DiscoveryOptions MakeDiscovery(const NodeMonitorOptions& o) {
  return DiscoveryOptions{.job = o.job, .node = o.node, .dir = o.shm_dir,
                          .scan_interval_ns = o.scan_interval_ns, .settle_ns = o.settle_ns,
                          .owner_uid = o.segment_uid, .probe = o.probe};
}

}  // namespace

NodeMonitor::NodeMonitor(NodeMonitorOptions options)
    : options_(std::move(options)),
      probe_(options_.probe != nullptr ? options_.probe : SystemProcessProbe()),
      discovery_(MakeDiscovery(options_)),
      timeouts_(static_cast<double>(options_.settings.timeout_warmup_ns) / 1e6,
                static_cast<double>(options_.settings.restore_wait_ns) / 1e6) {}

void NodeMonitor::SetTimeouts(const proto::TimeoutTable& table) { timeouts_.Set(table); }

RankMonitor* NodeMonitor::Current(int rank) const {
  auto it = current_.find(rank);
  return it != current_.end() ? it->second : nullptr;
}

void NodeMonitor::RefreshCurrent() {
  current_.clear();
  for (const auto& m : monitors_) {
    RankMonitor*& best = current_[m->rank()];
    if (best == nullptr || m->incarnation() >= best->incarnation()) best = m.get();
  }
}

RankMonitor* NodeMonitor::CurrentAlive(int rank) const {
  RankMonitor* m = Current(rank);
  return m != nullptr && !m->finished() ? m : nullptr;
}

void NodeMonitor::Tick(uint64_t now_mono_ns, int64_t now_unix_ms, std::vector<proto::Event>* out) {
  now_ns_ = now_mono_ns;
  for (AttachedSegment& found : discovery_.Scan(now_mono_ns)) {
    auto monitor = std::make_unique<RankMonitor>(std::move(found.segment), found.inode, options_.node,
                                                 options_.settings, probe_, std::move(found.process),
                                                 std::move(found.unverified));
    RankMonitor* previous = Current(monitor->rank());
    if (previous != nullptr && previous->incarnation() != monitor->incarnation()) {
      FT_LOG(Info, Worker, "rank {} has a new incarnation: pid {} (segment {}), before pid {}",
             monitor->rank(), monitor->pid(), monitor->name(), previous->pid());
    } else {
      FT_LOG(Info, Worker, "monitoring rank {} (pid {}, segment {})", monitor->rank(), monitor->pid(),
             monitor->name());
    }
    monitors_.push_back(std::move(monitor));
    RefreshCurrent();
    membership_changed_ = true;
  }
  for (auto& m : monitors_) m->Tick(now_mono_ns, now_unix_ms, timeouts_, out);
  RaiseBusy(now_unix_ms, out);
  SendKills(now_mono_ns);
  Reclaim();
  Retire(now_mono_ns);
}

void NodeMonitor::RaiseBusy(int64_t now_unix_ms, std::vector<proto::Event>* out) {
  std::set<std::tuple<int, uint64_t, uint64_t, uint64_t>> waiting;
  for (const auto& a : monitors_) {
    if (a->finished()) continue;
    for (const ActiveTimeout& t : a->active_timeouts()) {
      if (t.p2p) continue;  // p2p numbers are not comparable across ranks
      for (const auto& [rank, b] : current_) {
        if (b == a.get() || b->finished()) continue;
        if (b->rank() == a->rank() || !b->IsMember(t.comm_id)) continue;
        auto entered = b->EnteredSeq(t.comm_id);
        if (!entered || *entered >= t.seq) continue;
        auto key = std::make_tuple(b->rank(), b->incarnation(), t.comm_id, t.seq);
        waiting.insert(key);
        const proto::RankProgress& p = b->progress();
        if (!p.busy || busy_raised_.count(key) > 0) continue;
        busy_raised_.insert(key);
        proto::Event e = proto::NewEvent(proto::EventKind::kBusy, b->rank(), p.node, now_unix_ms);
        e.comm_id = t.comm_id;
        e.op = t.op;
        e.seq = t.seq;
        e.message = fmt::format(
            "rank {} has not reached {} #{} on comm {}, which rank {} waits on, but it is busy on "
            "the host (last CUDA/NCCL call {:.0f} ms ago, CPU {:.0f}%{}): it is working (a "
            "checkpoint, data loading, host compute), not stuck",
            b->rank(), proto::OpKindName(t.op), t.seq, CommHex(t.comm_id), a->rank(), p.last_call_age_ms, p.cpu_pct,
            p.blocked_ms > 0 ? fmt::format(", blocked in a CUDA call for {:.0f} ms", p.blocked_ms) : "");
        e.progress = p;
        FT_LOG(Info, Worker, "{}", e.message);
        out->push_back(std::move(e));
      }
    }
  }
  // An episode ends when the wait does (or the rank reached the op): a later one raises again.
  std::erase_if(busy_raised_, [&](const auto& key) { return waiting.count(key) == 0; });
}

void NodeMonitor::SendKills(uint64_t now_ns) {
  std::erase_if(kills_, [&](const PendingKill& kill) {
    if (now_ns < kill.deadline_ns) return false;
    for (const auto& m : monitors_) {
      if (m->name() != kill.segment || m->pid() != kill.pid || m->finished()) continue;
      Status s = m->Signal(SIGKILL);
      if (s.ok()) {
        FT_LOG(Warn, Worker, "rank {} (pid {}) outlived its stop grace period: SIGKILL sent", m->rank(), kill.pid);
      } else {
        FT_LOG(Warn, Worker, "rank {} (pid {}): SIGKILL failed: {}", m->rank(), kill.pid, s.ToString());
      }
    }
    return true;
  });
}

void NodeMonitor::Reclaim() {
  for (const auto& m : monitors_) {
    if (!m->finished() || reclaimed_.count(m->name()) > 0) continue;
    // A clean exit removes its own segment; one left behind is removed once the pid is gone.
    if (m->exited_itself() && !m->pid_gone()) continue;
    Status s = discovery_.Reclaim(m->name(), m->inode());
    if (!s.ok()) {
      FT_LOG(Warn, Worker, "cannot remove segment {} of rank {} (pid {}, gone): {}; remove it by hand",
             m->name(), m->rank(), m->pid(), s.ToString());
    }
    reclaimed_.insert(m->name());
  }
}

void NodeMonitor::Retire(uint64_t now_ns) {
  std::set<const RankMonitor*> retire;
  for (const auto& m : monitors_) {
    if (!m->finished()) continue;
    bool replaced = Current(m->rank()) != m.get();
    bool expired = now_ns - m->finished_ns() >= options_.retain_ns;
    if (!replaced && !expired) continue;
    if (m->exited_itself() && !m->pid_gone() && !expired) continue;
    retire.insert(m.get());
  }
  if (retire.empty()) return;
  std::erase_if(monitors_, [&](const std::unique_ptr<RankMonitor>& m) {
    if (retire.count(m.get()) == 0) return false;
    reclaimed_.erase(m->name());
    return true;
  });
  RefreshCurrent();
  membership_changed_ = true;
}

std::vector<proto::RankProgress> NodeMonitor::Progress() const {
  std::vector<proto::RankProgress> out;
  for (const auto& [rank, m] : current_) out.push_back(m->progress());
  return out;
}

std::vector<proto::RankSummary> NodeMonitor::TakeSummaries(int64_t now_unix_ms) {
  std::vector<proto::RankSummary> out;
  for (const auto& [rank, m] : current_) out.push_back(m->TakeSummary(now_unix_ms));
  return out;
}

std::vector<proto::Membership> NodeMonitor::Memberships() const {
  std::vector<proto::Membership> out;
  for (const auto& [rank, m] : current_) out.push_back(m->membership());
  return out;
}

bool NodeMonitor::TakeMembershipChanged() {
  bool changed = membership_changed_;
  membership_changed_ = false;
  for (auto& m : monitors_) {
    changed = changed || m->membership_changed();
    m->clear_membership_changed();
  }
  return changed;
}

std::vector<int> NodeMonitor::Ranks() const {
  std::vector<int> ranks;
  for (const auto& [rank, m] : current_) {
    if (!m->finished()) ranks.push_back(rank);
  }
  return ranks;
}

std::vector<NodeMonitor::RankHardware> NodeMonitor::Hardware() const {
  std::vector<RankHardware> out;
  for (const auto& [rank, m] : current_) out.push_back({rank, m->pid(), m->gpu_bus_id()});
  return out;
}

std::vector<NodeMonitor::RankHookFailures> NodeMonitor::HookFailures() const {
  std::vector<RankHookFailures> out;
  for (const auto& m : monitors_) {
    if (!m->hook_failures().empty()) out.push_back({m->rank(), m->incarnation(), m->hook_failures()});
  }
  return out;
}

Status NodeMonitor::StopRank(int rank, double grace_s) {
  RankMonitor* m = CurrentAlive(rank);
  if (m == nullptr) {
    return Status::NotFound(fmt::format("no live process of rank {} on node {}", rank, options_.node));
  }
  FT_RETURN_IF_ERROR(m->Signal(SIGTERM));
  m->MarkStopSignalled();
  // The rank saves before it ends (FT_CKPT_TERM_GRACE, published in its segment): a SIGKILL
  // inside that grace would cut the save this stop asked for.
  const double save_s = m->term_grace_ms() > 0 ? m->term_grace_ms() / 1000.0 + kAfterTermGraceS : 0;
  grace_s = std::max(grace_s, save_s);
  uint64_t grace_ns = grace_s > 0 ? static_cast<uint64_t>(grace_s * 1e9) : 0;
  uint64_t deadline = now_ns_ + grace_ns;
  FT_LOG(Info, Worker, "rank {} (pid {}): SIGTERM sent; SIGKILL after {} s if still alive", rank, m->pid(), grace_s);
  for (PendingKill& kill : kills_) {
    if (kill.segment == m->name()) {
      kill.deadline_ns = std::min(kill.deadline_ns, deadline);
      return Status::Ok();
    }
  }
  kills_.push_back(PendingKill{m->name(), m->pid(), deadline});
  return Status::Ok();
}

Status NodeMonitor::PostCommand(int rank, MailboxCommand type, std::string_view text, uint64_t* seq) {
  if (text.size() > shm::kMailboxPayloadBytes) {
    return Status::InvalidArgument(fmt::format("command text of {} bytes exceeds the {} a mailbox command carries",
                                               text.size(), shm::kMailboxPayloadBytes));
  }
  RankMonitor* m = CurrentAlive(rank);
  if (m == nullptr) {
    return Status::NotFound(fmt::format("no live process of rank {} on node {}", rank, options_.node));
  }
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  return shm::PostCommand(m->segment(), static_cast<uint32_t>(type), bytes, seq);
}

uint64_t NodeMonitor::LiveIncarnation(int rank) const {
  const RankMonitor* m = CurrentAlive(rank);
  return m != nullptr ? m->incarnation() : 0;
}

bool NodeMonitor::Ended(int rank, uint64_t incarnation) const {
  for (const auto& m : monitors_) {
    if (m->rank() == rank && m->incarnation() == incarnation) return m->finished();
  }
  return true;
}

std::optional<shm::Ack> NodeMonitor::PollAck(int rank, uint64_t seq) {
  RankMonitor* m = Current(rank);
  if (m == nullptr) return std::nullopt;
  return shm::PollAck(m->segment(), seq);
}

}  // namespace ft::worker
