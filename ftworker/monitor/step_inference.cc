#include "ftworker/monitor/step_inference.h"

#include <algorithm>
#include <unordered_map>

#include "common/hash.h"

namespace ft::worker {
namespace {

// The rotation of `cycle` that starts at its anchor (see the header): returns its offset r,
// canonical[i] = cycle[(r + i) % P].
size_t CanonicalRotation(const std::vector<uint64_t>& cycle) {
  const size_t p = cycle.size();
  std::unordered_map<uint64_t, size_t> counts;
  for (uint64_t s : cycle) ++counts[s];
  uint64_t anchor = cycle[0];
  size_t anchor_count = counts[anchor];
  for (const auto& [sig, count] : counts) {
    if (count < anchor_count || (count == anchor_count && sig < anchor)) {
      anchor = sig;
      anchor_count = count;
    }
  }
  size_t best = p;
  for (size_t r = 0; r < p; ++r) {
    if (cycle[r] != anchor) continue;
    if (best == p) {
      best = r;
      continue;
    }
    for (size_t i = 1; i < p; ++i) {
      uint64_t a = cycle[(r + i) % p], b = cycle[(best + i) % p];
      if (a != b) {
        if (a < b) best = r;
        break;
      }
    }
  }
  return best;
}

}  // namespace

StepInference::StepInference(StepInferenceOptions options) : options_(options) {
  options_.max_period = std::max<size_t>(options_.max_period, 1);
  options_.confirm_cycles = std::max(options_.confirm_cycles, 2);
  options_.detect_every = std::max<size_t>(options_.detect_every, 1);
  history_limit_ = (static_cast<size_t>(options_.confirm_cycles) + 1) * options_.max_period;
  runs_.assign(options_.max_period + 1, 0);
  dormant_next_ = 4 * history_limit_;
}

uint64_t StepInference::Signature(uint64_t comm_id, uint32_t op_kind, int bucket) {
  return SplitMix64(comm_id ^ SplitMix64((uint64_t{op_kind} << 8) | static_cast<uint8_t>(bucket)));
}

void StepInference::Append(uint64_t signature, uint64_t time_ns, uint64_t bytes) {
  sigs_.push_back(signature);
  times_.push_back(time_ns);
  bytes_.push_back(bytes);
  if (sigs_.size() > 2 * history_limit_) {
    size_t drop = sigs_.size() - history_limit_;
    sigs_.erase(sigs_.begin(), sigs_.begin() + static_cast<ptrdiff_t>(drop));
    times_.erase(times_.begin(), times_.begin() + static_cast<ptrdiff_t>(drop));
    bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<ptrdiff_t>(drop));
  }
}

void StepInference::OnEnter(uint64_t signature, uint64_t time_ns, uint64_t bytes) {
  bytes_since_anchor_ += bytes;
  ++total_ops_;
  if (state_ == State::kDeclared) return;  // the app's marks are the steps
  Append(signature, time_ns, bytes);
  switch (state_) {
    case State::kLocked:
      if (pattern_[phase_] == signature) {
        if (phase_ == 0) Anchor(time_ns, bytes);
        phase_ = (phase_ + 1) % pattern_.size();
      } else if (!SwitchPeriod()) {
        StartResync();
        ResyncWith(signature);
      }
      break;
    case State::kResync:
      ResyncWith(signature);
      break;
    case State::kSearching:
      Search();
      break;
    case State::kDeclared:
      break;
  }
}

void StepInference::OnDeclaredStep(uint64_t time_ns) {
  if (state_ != State::kDeclared) {
    // From inferred steps to declared ones: the step begun at the last inferred anchor would
    // end at a mark, a step of neither kind. Start over at this mark.
    state_ = State::kDeclared;
    ++generation_;
    pattern_.clear();
    last_pattern_.clear();
    candidates_.clear();
    sigs_.clear();
    times_.clear();
    bytes_.clear();
    runs_valid_ = false;
    pending_.clear();
    have_anchor_ = false;
    bytes_since_anchor_ = 0;
  }
  Anchor(time_ns, 0);
}

void StepInference::OnOpInterval(uint64_t begin_ns, uint64_t end_ns) {
  if (end_ns < begin_ns) return;
  // Bounded even if no anchor ever comes to prune them.
  if (intervals_.size() >= (size_t{1} << 16)) {
    intervals_.erase(intervals_.begin(), intervals_.begin() + (ptrdiff_t{1} << 15));
  }
  intervals_.push_back(Interval{begin_ns, end_ns});
}

void StepInference::OnGap() {
  if (state_ == State::kDeclared) {
    // A mark may be lost: the next one begins a step, it ends none.
    have_anchor_ = false;
    bytes_since_anchor_ = 0;
    return;
  }
  if (state_ == State::kSearching) {
    // Periods must not be matched across lost ops.
    sigs_.clear();
    times_.clear();
    bytes_.clear();
    std::fill(runs_.begin(), runs_.end(), 0);
    since_detect_ = 0;
    return;
  }
  StartResync();
}

void StepInference::Flush() {
  if (state_ == State::kSearching && since_detect_ > 0 && dormant_ == 0) Detect();
  // Locked or declared, a step is finalized at the next anchor, once its ops' intervals are in.
  if (state_ != State::kLocked && state_ != State::kDeclared) FinalizeBefore(UINT64_MAX);
}

void StepInference::Search() {
  if (dormant_ > 0) {
    // A rank whose ops do not repeat would cost max_period compares per op forever: after a
    // long unsuccessful search, look again only now and then.
    if (--dormant_ == 0) runs_valid_ = false;
    return;
  }
  const size_t n = sigs_.size();
  if (!runs_valid_) {
    RebuildRuns();
  } else {
    const uint64_t s = sigs_[n - 1];
    const size_t limit = std::min(options_.max_period, n - 1);
    const uint64_t* h = sigs_.data() + (n - 1);
    uint32_t* runs = runs_.data();
    for (size_t p = 1; p <= limit; ++p) runs[p] = s == *(h - p) ? runs[p] + 1 : 0;
  }
  if (++searched_ > 2 * history_limit_) {
    searched_ = 0;
    dormant_ = dormant_next_;
    dormant_next_ = std::min<size_t>(dormant_next_ * 2, 64 * history_limit_);
    return;
  }
  if (++since_detect_ >= options_.detect_every) Detect();
}

void StepInference::RebuildRuns() {
  // Runs of every period ending at the newest op, from the history (once per search).
  const size_t n = sigs_.size();
  std::fill(runs_.begin(), runs_.end(), 0);
  for (size_t p = 1; p <= options_.max_period && p < n; ++p) {
    uint32_t run = 0;
    while (run + p < n && sigs_[n - 1 - run] == sigs_[n - 1 - run - p]) ++run;
    runs_[p] = run;
  }
  runs_valid_ = true;
}

size_t StepInference::BestPeriod() const {
  const size_t n = sigs_.size();
  const size_t k = static_cast<size_t>(options_.confirm_cycles);
  const size_t limit = std::min(options_.max_period, n > 0 ? n - 1 : 0);
  // Runs are compared only over the ops since this search began: after a change of pattern,
  // ops before it must not make a period look longer than the new one (an "echo" of the old
  // pattern at the distance between the two). Whether a period is confirmed uses its whole run.
  const size_t cap = static_cast<size_t>(std::min<uint64_t>(total_ops_ - search_start_ops_, SIZE_MAX));
  size_t best_period = 0;
  size_t best_run = 0;
  size_t longest = 0;  // the longest run of any period, confirmed or not
  for (size_t p = 1; p <= limit; ++p) {
    const size_t run = runs_[p];
    const size_t capped = std::min(run, cap);
    longest = std::max(longest, capped);
    if (capped > best_run && run >= std::max((k - 1) * p, options_.min_run)) {
      best_period = p;
      best_run = capped;
    }
  }
  // A longer run at a period not yet confirmed means the shorter one is a part of the step
  // (identical per-layer ops, say): wait for more cycles.
  return longest > best_run ? 0 : best_period;
}

void StepInference::Detect() {
  since_detect_ = 0;
  if (size_t p = BestPeriod(); p != 0) Lock(p);
}

bool StepInference::SwitchPeriod() {
  // A mismatch is noise, or the sign that the cycle was only a part of the step (a run of
  // identical ops seen before the first whole step ended): the runs decide.
  RebuildRuns();
  size_t p = BestPeriod();
  runs_valid_ = false;
  if (p == 0 || p == pattern_.size()) return false;
  Lock(p);
  return true;
}

void StepInference::Lock(size_t period) {
  const size_t n = sigs_.size();
  std::vector<uint64_t> cycle(sigs_.end() - static_cast<ptrdiff_t>(period), sigs_.end());
  size_t r = CanonicalRotation(cycle);
  pattern_.resize(period);
  for (size_t i = 0; i < period; ++i) pattern_[i] = cycle[(r + i) % period];
  if (pattern_ != last_pattern_) {
    ++generation_;
    last_pattern_ = pattern_;
  }
  phase_ = (period - r) % period;
  // The newest anchor is already in the history: the first step ends at the next one.
  have_anchor_ = true;
  last_anchor_ns_ = times_[n - period + r];
  bytes_since_anchor_ = 0;
  for (size_t i = n - period + r; i < n; ++i) bytes_since_anchor_ += bytes_[i];
  state_ = State::kLocked;
  runs_valid_ = false;
  searched_ = 0;
  dormant_ = 0;
  dormant_next_ = 4 * history_limit_;
}

void StepInference::StartResync() {
  state_ = State::kResync;
  candidates_.clear();
  resync_ops_ = 0;
  resync_run_ = 0;
  have_anchor_ = false;  // the step in progress is not measured
}

void StepInference::ResyncWith(uint64_t signature) {
  const size_t p = pattern_.size();
  ++resync_ops_;
  std::vector<uint32_t> next;
  if (resync_run_ > 0) {
    for (uint32_t c : candidates_) {
      if (pattern_[c] == signature) next.push_back(static_cast<uint32_t>((c + 1) % p));
    }
  }
  if (!next.empty()) {
    ++resync_run_;
  } else {
    // Start over from this op: every phase it can have.
    for (size_t j = 0; j < p; ++j) {
      if (pattern_[j] == signature) next.push_back(static_cast<uint32_t>((j + 1) % p));
    }
    resync_run_ = next.empty() ? 0 : 1;
  }
  candidates_ = std::move(next);
  if (candidates_.size() == 1 && resync_run_ >= std::min<size_t>(p, 2)) {
    phase_ = candidates_[0];
    state_ = State::kLocked;
    if ((phase_ + p - 1) % p == 0) Anchor(times_.back(), bytes_.back());
    return;
  }
  if (resync_ops_ > std::max<size_t>(2 * p, 64)) {
    // The pattern changed: search again. The history is kept: the runs that count are those
    // ending now, and what came before the change is what tells a part of a step (a run of
    // identical ops) from a whole one.
    state_ = State::kSearching;
    pattern_.clear();
    runs_valid_ = false;
    since_detect_ = 0;
    search_start_ops_ = total_ops_ - 1;
    Search();
  }
}

void StepInference::Anchor(uint64_t time_ns, uint64_t bytes) {
  // bytes_since_anchor_ already holds the new anchor's own bytes: they begin the next step.
  if (have_anchor_ && time_ns > last_anchor_ns_) {
    pending_.push_back(PendingStep{last_anchor_ns_, time_ns, generation_, bytes_since_anchor_ - bytes});
  }
  bytes_since_anchor_ = bytes;
  // Every step but the one just ended has had a whole step for its ops to complete.
  FinalizeBefore(time_ns);
  have_anchor_ = true;
  last_anchor_ns_ = time_ns;
  PruneIntervals();
}

void StepInference::FinalizeBefore(uint64_t time_ns) {
  size_t done = 0;
  for (const PendingStep& step : pending_) {
    if (step.end >= time_ns) break;
    std::vector<Interval> inside;
    for (const Interval& iv : intervals_) {
      if (iv.begin < step.end && iv.end > step.begin) {
        inside.push_back(Interval{std::max(iv.begin, step.begin), std::min(iv.end, step.end)});
      }
    }
    std::sort(inside.begin(), inside.end(),
              [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    uint64_t comm_ns = 0;
    uint64_t cur_begin = 0, cur_end = 0;
    bool open = false;
    for (const Interval& iv : inside) {
      if (open && iv.begin <= cur_end) {
        cur_end = std::max(cur_end, iv.end);
        continue;
      }
      if (open) comm_ns += cur_end - cur_begin;
      cur_begin = iv.begin;
      cur_end = iv.end;
      open = true;
    }
    if (open) comm_ns += cur_end - cur_begin;
    StepSample sample;
    sample.index = ++steps_reported_;
    sample.begin_ns = step.begin;
    sample.end_ns = step.end;
    sample.step_ms = static_cast<double>(step.end - step.begin) / 1e6;
    sample.comm_ms = static_cast<double>(comm_ns) / 1e6;
    sample.compute_ms = sample.step_ms - sample.comm_ms;
    sample.generation = step.generation;
    sample.bytes = step.bytes;
    ready_.push_back(sample);
    ++done;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done));
}

void StepInference::PruneIntervals() {
  uint64_t oldest = pending_.empty() ? last_anchor_ns_ : pending_.front().begin;
  std::erase_if(intervals_, [oldest](const Interval& iv) { return iv.end <= oldest; });
}

std::vector<StepSample> StepInference::TakeSteps() {
  std::vector<StepSample> out;
  out.swap(ready_);
  return out;
}

}  // namespace ft::worker
