#include "tests/model/model_draw.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace ft::model {

const char* FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill: return "kill";
    case FaultKind::kFailingExit: return "failing-exit";
    case FaultKind::kPreempt: return "preempt";
    case FaultKind::kDelayReports: return "delay-reports";
    case FaultKind::kWorkerRestart: return "worker-restart";
    case FaultKind::kMasterFailover: return "master-failover";
    case FaultKind::kKillDuringRecovery: return "kill-during-recovery";
  }
  return "?";
}

Draw MakeDraw(uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Draw d;
  d.seed = seed;
  d.dp = static_cast<int>(pick(2, 3));
  d.tp = static_cast<int>(pick(1, 2));
  d.nodes = static_cast<int>(pick(2, 3));
  d.ranks_per_node = (d.world() + d.nodes - 1) / d.nodes;
  d.nodes = (d.world() + d.ranks_per_node - 1) / d.ranks_per_node;
  d.sharded = pick(0, 2) == 0;
  const int every[] = {0, 1, 3};
  d.periodic_every = every[pick(0, 2)];
  d.step_ms = pick(6, 14) * 100;
  d.update_ms = pick(1, 4) * 50;
  d.save_ms = pick(1, 4) * 25;
  d.relaunch_delay_ms = pick(0, 100) * 100;
  d.teardown_grace_ms = pick(3, 10) * 1000;

  // The incident: a crash, a failing exit, a preemption, or none (a schedule of benign faults
  // only, where any stop is a false stop).
  const int64_t fault_at = pick(4000, 12000);
  const int moment = static_cast<int>(pick(0, 2));
  const int64_t primary = pick(0, 9);
  auto any_rank = [&] { return static_cast<int>(pick(0, d.world() - 1)); };
  auto any_node = [&] { return fmt::format("n{}", pick(0, d.nodes - 1)); };
  if (primary <= 3) {
    d.faults.push_back(Fault{FaultKind::kKill, fault_at, any_rank(), "", 0, true, moment});
  } else if (primary <= 4) {
    d.faults.push_back(Fault{FaultKind::kFailingExit, fault_at, any_rank(), "", 0, true, moment});
  } else if (primary <= 7) {
    d.faults.push_back(Fault{FaultKind::kPreempt, fault_at, -1, "", 0, true, moment});
  }
  // 1-3 faults in all: the rest benign or a second fault during recovery.
  const int64_t total = pick(1, 3);
  bool failover = false;
  while (static_cast<int64_t>(d.faults.size()) < total) {
    const int64_t extra = pick(0, 3);
    const int64_t at = pick(2000, fault_at + 8000);
    if (extra == 0) {
      d.faults.push_back(Fault{FaultKind::kDelayReports, at, -1, any_node(), pick(5, 40) * 100, true, 0});
    } else if (extra == 1) {
      d.faults.push_back(Fault{FaultKind::kWorkerRestart, at, -1, any_node(), pick(0, 30) * 100, pick(0, 1) == 0, 0});
    } else if (extra == 2 && !failover) {
      failover = true;  // one standby: a second failover would leave the job without a master
      d.faults.push_back(Fault{FaultKind::kMasterFailover, at, -1, "", 0, true, 0});
    } else if (!d.faults.empty() && d.faults[0].kind != FaultKind::kDelayReports &&
               d.faults[0].kind != FaultKind::kWorkerRestart && d.faults[0].kind != FaultKind::kMasterFailover) {
      d.faults.push_back(Fault{FaultKind::kKillDuringRecovery, pick(0, 40) * 100, any_rank(), "", 0, true,
                               static_cast<int>(pick(0, 2))});
    }
  }
  std::stable_sort(d.faults.begin(), d.faults.end(), [](const Fault& a, const Fault& b) {
    const bool ar = a.kind == FaultKind::kKillDuringRecovery, br = b.kind == FaultKind::kKillDuringRecovery;
    return ar != br ? br : a.at_ms < b.at_ms;
  });
  return d;
}

std::string Draw::Describe() const {
  std::string out = fmt::format("seed={} dp={} tp={} nodes={} sharded={} periodic_every={} step_ms={} update_ms={} "
                                "save_ms={} relaunch_delay_ms={} teardown_grace_ms={} faults=[",
                                seed, dp, tp, nodes, sharded ? 1 : 0, periodic_every, step_ms, update_ms, save_ms,
                                relaunch_delay_ms, teardown_grace_ms);
  for (size_t i = 0; i < faults.size(); ++i) {
    const Fault& f = faults[i];
    out += fmt::format("{}{}@{}ms", i ? " " : "", FaultName(f.kind), f.at_ms);
    if (f.rank >= 0) out += fmt::format(" rank={}", f.rank);
    if (!f.node.empty()) out += fmt::format(" node={}", f.node);
    if (f.length_ms > 0) out += fmt::format(" for={}ms", f.length_ms);
    if (f.kind == FaultKind::kWorkerRestart) out += f.clean ? " clean" : " killed";
    if (f.moment != 0) out += f.moment == 1 ? " in-update" : " between-steps";
  }
  return out + "]";
}

}  // namespace ft::model
