#include "ftmaster/core/slow_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>
#include <vector>

namespace ft::master {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

constexpr double kGpuKernelRatio = 1.25;

// SlowCase::where from the kernel samples of the rank and its peers.
void LocateExcess(const proto::RankSummary& own, std::span<const proto::RankSummary> summaries,
                  const std::set<int>& peers, SlowCase* c) {
  std::unordered_map<std::string, std::vector<double>> peer_p50;  // kernel -> its peers' p50s
  for (const proto::RankSummary& s : summaries) {
    if (!peers.count(s.rank)) continue;
    for (const proto::KernelSummary& k : s.kernel_samples) {
      if (k.count > 0 && k.p50_ms > 0) peer_p50[k.name].push_back(k.p50_ms);
    }
  }
  // Time-weighted: one slow kernel that takes most of the step counts for most of it.
  double own_ms = 0, peers_ms = 0;
  for (const proto::KernelSummary& k : own.kernel_samples) {
    auto it = peer_p50.find(k.name);
    if (k.count == 0 || k.p50_ms <= 0 || it == peer_p50.end()) continue;
    own_ms += k.p50_ms;
    peers_ms += Median(it->second);
  }
  if (peers_ms <= 0 || c->median_compute_ms <= 0) {
    c->where_why = "no kernel samples to tell its GPU from its host (FT_KERNEL_SAMPLE=N samples every Nth launch)";
    return;
  }
  const double kernels = own_ms / peers_ms;
  const double compute = c->compute_ms / c->median_compute_ms;
  // The compute ratio overstates when communication overlaps compute (DDP's buckets): a peer's
  // compute running while it waits in an all-reduce counts as communication, so its compute
  // looks short. Kernels a quarter slower than the same kernels elsewhere are its GPU whatever
  // the compute ratio says.
  if (kernels - 1 >= 0.5 * (compute - 1) || kernels >= kGpuKernelRatio) {
    c->where = "gpu";
    c->where_why = fmt::format("its GPU: the same kernels run {:.2f}x its peers' (clocks, thermals, power "
                               "capping, a failing GPU)", kernels);
  } else {
    c->where = "host";
    c->where_why = fmt::format("its host: its kernels run at its peers' speed ({:.2f}x) while its compute "
                               "takes {:.2f}x: the time goes between them (CPU contention, the input "
                               "pipeline, host-side work)", kernels, compute);
  }
}

// SlowCase::job_step and job_total_steps: the fewest steps left over every summary that says
// both. The ranks of a job step together (their collectives hold them to one pace), so where
// they all say, they agree within a step or a summary window. Any rank's word counts for the
// job: a job may declare its total on one rank only (rank 0's setup code), and the named rank
// may be the one that did not. Where they disagree, the shorter horizon errs toward reporting:
// an eviction stops every rank for a recovery, so one that does not pay is the costlier mistake.
void JobStepsLeft(std::span<const proto::RankSummary> summaries, SlowCase* c) {
  int64_t fewest = INT64_MAX;
  for (const proto::RankSummary& s : summaries) {
    if (s.total_steps <= 0 || s.declared_step < 0) continue;
    const int64_t left = std::max<int64_t>(0, s.total_steps - s.declared_step);
    if (left < fewest) {
      fewest = left;
      c->job_step = s.declared_step;
      c->job_total_steps = s.total_steps;
    }
  }
}

}  // namespace

std::optional<SlowAction> ParseSlowAction(std::string_view text) {
  if (text == "report") return SlowAction::kReport;
  if (text == "evict") return SlowAction::kEvict;
  return std::nullopt;
}

SlowPolicy SlowPolicy::FromConfig(const Config& config) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  SlowPolicy p;
  // ftmaster refuses to start with any other value (main.cc), so report is never a silent typo.
  p.action = ParseSlowAction(config.slow_action).value_or(SlowAction::kReport);
  p.horizon_steps = std::max<int64_t>(0, config.slow_horizon);
  p.recovery_estimate_s = duration_cast<milliseconds>(config.slow_recovery_cost).count() / 1000.0;
  p.confirm_ms = duration_cast<milliseconds>(config.slow_confirm).count();
  p.evictions_per_hour = std::max<int64_t>(0, config.slow_evictions_per_hour);
  p.min_nodes = std::max<int64_t>(0, config.slow_min_nodes);
  return p;
}

std::optional<SlowCase> MeasureSlow(int rank, std::span<const proto::RankSummary> summaries,
                                    std::span<const proto::Membership> membership) {
  std::set<uint64_t> comms;  // the rank's collective communicators (as the straggler detector's)
  for (const proto::Membership& m : membership) {
    if (m.rank != rank) continue;
    for (const proto::CommMember& c : m.comms) {
      if (c.comm_size >= 2 && !c.p2p) comms.insert(c.comm_id);
    }
  }
  std::set<int> peers;
  for (const proto::Membership& m : membership) {
    if (m.rank == rank) continue;
    for (const proto::CommMember& c : m.comms) {
      if (comms.count(c.comm_id)) peers.insert(m.rank);
    }
  }
  const proto::RankSummary* own = nullptr;
  std::vector<double> peer_compute, steps;
  for (const proto::RankSummary& s : summaries) {
    if (s.step_p50_ms > 0) steps.push_back(s.step_p50_ms);
    if (s.rank == rank) {
      own = &s;
    } else if (peers.count(s.rank) && s.compute_ms > 0) {
      peer_compute.push_back(s.compute_ms);
    }
  }
  if (own == nullptr || peer_compute.empty()) return std::nullopt;
  SlowCase c;
  c.rank = rank;
  c.node = own->node;
  c.compute_ms = own->compute_ms;
  c.median_compute_ms = Median(std::move(peer_compute));
  c.step_ms = Median(std::move(steps));
  LocateExcess(*own, summaries, peers, &c);
  JobStepsLeft(summaries, &c);
  return c;
}

SlowVerdict DecideSlow(const SlowCase& slow, const SlowContext& context, const SlowPolicy& policy) {
  SlowVerdict v;
  v.excess_ms = std::max(0.0, slow.compute_ms - slow.median_compute_ms);
  v.job_horizon = slow.job_total_steps > 0 && slow.job_step >= 0;
  v.horizon_steps = v.job_horizon ? std::max<int64_t>(0, slow.job_total_steps - slow.job_step) : policy.horizon_steps;
  v.keep_s = static_cast<double>(v.horizon_steps) * v.excess_ms / 1000.0;
  const bool measured = context.measured_recovery_s.has_value();
  const double recovery_s = measured ? *context.measured_recovery_s : policy.recovery_estimate_s;
  v.replace_s = recovery_s + slow.step_ms / 1000.0;
  const std::string horizon_from =
      v.job_horizon ? fmt::format("the job's: {} of {} done", slow.job_step, slow.job_total_steps)
                    : std::string("FT_SLOW_HORIZON");
  v.arithmetic = fmt::format(
      "excess {:.1f} ms/step (compute {:.1f} ms vs peers' {:.1f} ms; step {:.1f} ms) x horizon {} steps "
      "({}) = keep {:.1f} s; replace = recovery {:.1f} s ({}) + 1 step = {:.1f} s",
      v.excess_ms, slow.compute_ms, slow.median_compute_ms, slow.step_ms, v.horizon_steps, horizon_from,
      v.keep_s, recovery_s, measured ? "the job's last, measured" : "FT_SLOW_RECOVERY_COST", v.replace_s);

  const int64_t age_ms = context.now_unix_ms - slow.named_unix_ms;
  v.confirmed = age_ms >= policy.confirm_ms;
  const int64_t recent = std::count_if(
      context.recent_evictions_unix_ms.begin(), context.recent_evictions_unix_ms.end(),
      [&](int64_t at) { return at > context.now_unix_ms - kHourMs && at <= context.now_unix_ms; });
  const int64_t left_after = context.job_nodes - context.evicted_job_nodes - 1;

  if (policy.action == SlowAction::kReport) {
    v.why = "report: FT_SLOW_ACTION=report (evict to replace it automatically)";
  } else if (context.job_slow) {
    v.why = "report: the whole job is slowed (job-slow): no one node is the cause";
  } else if (v.keep_s <= v.replace_s && v.job_horizon) {
    // The job said how far it goes: near its end, a stop and a relaunch cost more than the
    // slow steps left.
    const std::string end = v.horizon_steps > 0
        ? fmt::format("the job ends in {} steps ({} of {} done)", v.horizon_steps, slow.job_step, slow.job_total_steps)
        : fmt::format("the job has done the {} steps it said it runs ({} done)", slow.job_total_steps, slow.job_step);
    v.why = fmt::format("report: {}: keeping the rank to its end costs {:.1f} s, replacing it {:.1f} s", end,
                        v.keep_s, v.replace_s);
  } else if (v.keep_s <= v.replace_s) {
    v.why = fmt::format("report: keeping the rank costs {:.1f} s over the horizon, replacing it {:.1f} s",
                        v.keep_s, v.replace_s);
  } else if (recent >= policy.evictions_per_hour) {
    v.why = fmt::format("report: {} slow eviction{} in the last hour already (FT_SLOW_EVICTIONS_PER_HOUR={})",
                        recent, recent == 1 ? "" : "s", policy.evictions_per_hour);
  } else if (left_after < policy.min_nodes) {
    v.why = fmt::format("report: evicting {} would leave {} healthy node{} of {} (FT_SLOW_MIN_NODES={})",
                        slow.node, std::max<int64_t>(0, left_after), left_after == 1 ? "" : "s",
                        context.job_nodes, policy.min_nodes);
  } else if (slow.node.empty()) {
    v.why = "report: the rank's node is not known";
  } else if (!v.confirmed) {
    v.why = fmt::format("evict {} if the rank still qualifies {:.0f} s after it was named (FT_SLOW_CONFIRM)",
                        slow.node, static_cast<double>(policy.confirm_ms) / 1000.0);
  } else {
    v.evict = true;
    v.why = fmt::format("evict {}: replacing it saves {:.1f} s over the horizon; the ranks save as they stop, "
                        "the relaunch restores on a spare",
                        slow.node, v.keep_s - v.replace_s);
  }
  return v;
}

}  // namespace ft::master
