#include "ftworker/report_pacing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace ft::worker {
namespace {

// Below this a change in a typical time is noise whatever its ratio (a 0.2 ms op).
constexpr double kNoiseFloorMs = 0.5;

// What, when it changes, is news by itself: not the ages and counters that move every report.
std::string Signature(const proto::RankProgress& p) {
  std::string s = fmt::format("{}|{}|{}|{}|{}|{}", p.state, p.node, p.pid, p.incarnation, p.busy, p.frozen);
  for (const proto::CommRow& row : p.comms) s += fmt::format("|{:x}", row.comm_id);
  return s;
}

// The same op of a summary (comm, kind, size bucket): what smoothing, pacing and counting key on.
bool SameOp(const proto::OpSummary& a, const proto::OpSummary& b) {
  return a.comm_id == b.comm_id && a.op == b.op && a.bucket == b.bucket;
}

std::string OpKey(const proto::OpSummary& op) {
  return fmt::format("{:x}/{}/{}", op.comm_id, proto::OpKindName(op.op), op.bucket);
}

}  // namespace

bool Attentive(const proto::RankProgress& p, double attention_ms) {
  if (p.frozen) return true;  // busy is the norm of a working rank: a change of it is news, not the state
  if (p.blocked_ms >= attention_ms || p.last_call_age_ms >= attention_ms) return true;
  for (const proto::CommRow& row : p.comms) {
    if (row.entered_seq > row.completed_seq && row.entered_age_ms >= attention_ms) return true;
  }
  return false;
}

bool ProgressPacer::ShouldWrite(const proto::RankProgress& progress, double attention_ms,
                                bool asked, int64_t unix_ms) {
  // Turning attentive (or calm again) is a change of state: written once, not every report.
  std::string signature = Signature(progress) + (Attentive(progress, attention_ms) ? "|attentive" : "");
  auto it = last_.find(progress.rank);
  const bool due = asked || it == last_.end() || it->second.signature != signature ||
                   unix_ms - it->second.unix_ms >= refresh_ms_;
  if (!due) return false;
  last_[progress.rank] = Written{std::move(signature), unix_ms};
  return true;
}

bool SummaryPacer::Moved(double written, double now, double ratio) {
  const double delta = std::fabs(now - written);
  return delta > kNoiseFloorMs && delta > ratio * std::max(std::fabs(written), std::fabs(now));
}

bool SummaryPacer::Rose(double written, double now, double ratio) {
  return now - written > kNoiseFloorMs && now > (1 + ratio) * written;
}

bool SummaryPacer::Changed(const proto::RankSummary& was, const proto::RankSummary& now) const {
  // The worker's slowdown verdict, at once: the master's job-wide view counts a rank by it.
  if (was.node != now.node || was.slowdown != now.slowdown) return true;
  // What the straggler detector compares, at the ratio; the step, which bounds only the
  // timeouts of ops never seen, at twice it; the tails, which the timeouts multiply by
  // FT_TIMEOUT_MULTIPLIER, when they rose by half (a timeout of 4x a tail under-reported by
  // half is still 2.7x the real one).
  if (Moved(was.compute_ms, now.compute_ms, change_ratio_) ||
      Moved(was.step_p50_ms, now.step_p50_ms, 2 * change_ratio_)) {
    return true;
  }
  for (const proto::OpSummary& op : now.ops) {
    auto same = std::find_if(was.ops.begin(), was.ops.end(), [&](const proto::OpSummary& o) { return SameOp(o, op); });
    if (same == was.ops.end()) return true;
    if (Moved(same->p50_ms, op.p50_ms, change_ratio_) || Moved(same->p10_ms, op.p10_ms, change_ratio_) ||
        Rose(same->p99_ms, op.p99_ms, kTailRise) ||
        Rose(same->max_ms, op.max_ms, kTailRise)) {
      return true;
    }
  }
  // Sampled kernels are asked for explicitly (FT_KERNEL_SAMPLE): every window of them counts.
  return !now.kernel_samples.empty();
}

void SummaryPacer::Smooth(proto::RankSummary* s) {
  auto [it, first] = smoothed_.try_emplace(s->rank);
  Averages& a = it->second;
  proto::RankSummary& avg = a.typical;
  // A rank seen first, moved, or run again (its steps went back: relaunched in place, it pays its
  // start again) starts over.
  if (first || avg.node != s->node || s->steps < avg.steps) {
    a = Averages{*s, s->step_p50_ms > 0 ? 1 : 0, {}};
    for (const proto::OpSummary& op : s->ops) a.op_windows[OpKey(op)] = 1;
    return;
  }
  // One window counts within half to twice the average: a window that held one long step (a
  // 20 s host pause in a 100 ms job) would otherwise keep the average high for a dozen windows
  // and make a paused rank a straggler; a lasting change still moves it 30% per window.
  // An average of nothing yet (the windows so far ended no step: a rank starting, restoring)
  // starts at the first sample: mixed with 0 it began at 30% of the step and took windows to
  // climb, and the goodput ledger took that for the job's normal step. While it settles, a
  // lower window replaces it (report_pacing.h). An op's average of 0 is a time (ops seen
  // complete at the poller's first look): a window counts up to kNoiseFloorMs above it.
  auto mix = [](double* average, double sample, bool settling) {
    if (*average < 0 || (settling && sample < *average)) return *average = sample;
    const double hi = std::max(*average * kMaxStepPerWindow, *average + kNoiseFloorMs);
    sample = std::clamp(sample, *average / kMaxStepPerWindow, hi);
    *average = (1 - kSmoothing) * *average + kSmoothing * sample;
    return *average;
  };
  auto mix_step = [&](double* average, double sample, bool settling) {
    return *average <= 0 ? *average = sample : mix(average, sample, settling);
  };
  if (s->step_p50_ms > 0) {
    const bool settling = a.step_windows++ < kSettleWindows;
    s->step_p50_ms = mix_step(&avg.step_p50_ms, s->step_p50_ms, settling);
    s->compute_ms = mix_step(&avg.compute_ms, s->compute_ms, settling);
    s->comm_wait_ms = mix_step(&avg.comm_wait_ms, s->comm_wait_ms, settling);
  } else {
    // A window that ended no step (shorter than a step, a rank restoring, waiting or hung)
    // says nothing of the step's time: the averages stand. Mixed in as a step of half the
    // average, each such window took 15% off it.
    s->step_p50_ms = avg.step_p50_ms;
    s->compute_ms = avg.compute_ms;
    s->comm_wait_ms = avg.comm_wait_ms;
  }
  std::vector<proto::OpSummary> ops;
  for (proto::OpSummary& op : s->ops) {
    auto was = std::find_if(avg.ops.begin(), avg.ops.end(), [&](const proto::OpSummary& o) { return SameOp(o, op); });
    const bool settling = a.op_windows[OpKey(op)]++ < kSettleWindows;
    if (was != avg.ops.end()) {
      op.p50_ms = mix(&was->p50_ms, op.p50_ms, settling);
      op.p10_ms = mix(&was->p10_ms, op.p10_ms, settling);
    }
    ops.push_back(op);
  }
  // Ops of earlier windows stay averaged until they come back.
  for (const proto::OpSummary& o : avg.ops) {
    if (std::none_of(ops.begin(), ops.end(), [&](const proto::OpSummary& n) { return SameOp(n, o); })) {
      ops.push_back(o);
    }
  }
  avg.ops = std::move(ops);
  avg.steps = s->steps;
}

namespace {

// To the microsecond: an average printed to 17 digits would be a third of the summary's bytes.
double Microseconds(double ms) { return std::round(ms * 1000) / 1000; }

void RoundTimes(proto::RankSummary* s) {
  for (double* ms : {&s->step_ms, &s->step_p50_ms, &s->compute_ms, &s->comm_wait_ms}) *ms = Microseconds(*ms);
  for (proto::OpSummary& op : s->ops) {
    for (double* ms : {&op.p10_ms, &op.p50_ms, &op.p99_ms, &op.max_ms}) *ms = Microseconds(*ms);
  }
}

}  // namespace

bool SummaryPacer::Next(proto::RankSummary* summary, int64_t unix_ms) {
  Smooth(summary);
  // Since the last summary written: every op counted once (the master's timeout model sums
  // the counts) and the largest tails (it takes the largest), whichever window goes out.
  std::map<std::string, Pending>& pending = pending_[summary->rank];
  for (proto::OpSummary& op : summary->ops) {
    Pending& p = pending[OpKey(op)];
    p.count += op.count;
    p.p99_ms = std::max(p.p99_ms, op.p99_ms);
    p.max_ms = std::max(p.max_ms, op.max_ms);
    op.count = p.count;
    op.p99_ms = p.p99_ms;
    op.max_ms = p.max_ms;
  }
  RoundTimes(summary);
  auto it = written_.find(summary->rank);
  const bool due = it == written_.end() || unix_ms - it->second.unix_ms >= refresh_ms_ ||
                   Changed(it->second, *summary);
  if (!due) return false;
  pending_.erase(summary->rank);
  proto::RankSummary& kept = written_[summary->rank];
  kept = *summary;
  kept.unix_ms = unix_ms;
  return true;
}

}  // namespace ft::worker
