#include "ftworker/monitor/slowdown_detector.h"

#include <algorithm>
#include <cmath>

namespace ft::worker {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  auto mid = values.begin() + static_cast<ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (values.size() % 2 == 1) return *mid;
  double upper = *mid;
  double lower = *std::max_element(values.begin(), mid);
  return (lower + upper) / 2;
}

void SlowdownDetector::Signal::Reset() { *this = Signal(); }

void SlowdownDetector::Signal::AddBaseline(double value) { baseline_.push_back(value); }

void SlowdownDetector::Signal::Seal(double relative_margin, double floor_ms) {
  median_ = Median(baseline_);
  std::vector<double> deviations;
  deviations.reserve(baseline_.size());
  for (double v : baseline_) deviations.push_back(std::fabs(v - median_));
  const double noise = 1.4826 * Median(std::move(deviations));
  margin_ = std::max({relative_margin * median_, kNoiseSigmas * noise, floor_ms});
  judged_ = median_ >= floor_ms;
  baseline_.clear();
  ready_ = true;
}

void SlowdownDetector::Signal::AddRecent(double value, size_t window) {
  recent_.push_back(value);
  while (recent_.size() > window) recent_.pop_front();
}

double SlowdownDetector::Signal::recent_median() const {
  return Median(std::vector<double>(recent_.begin(), recent_.end()));
}

SlowdownDetector::SlowdownDetector(const MonitorSettings& settings)
    : warmup_steps_(std::max(settings.warmup_steps, 0)),
      baseline_steps_(std::max(settings.baseline_steps, 3)),
      relative_margin_(std::max(settings.slowdown_pct, 0.0) / 100),
      floor_ms_(std::max(settings.slowdown_floor_ms, 0.0)),
      window_(static_cast<size_t>(std::max(settings.slowdown_steps, 1))) {}

bool SlowdownDetector::OtherBytes(uint64_t bytes) const {
  if (bytes == pattern_bytes_) return false;
  const double lo = static_cast<double>(std::min(bytes, pattern_bytes_));
  const double hi = static_cast<double>(std::max(bytes, pattern_bytes_));
  return hi > kBytesRatio * lo;
}

void SlowdownDetector::Reset(uint64_t generation, uint64_t bytes) {
  generation_ = generation;
  pattern_bytes_ = bytes;
  seen_ = 0;
  step_.Reset();
  compute_.Reset();
  slow_ = false;
}

std::optional<Slowdown> SlowdownDetector::OnStep(const StepSample& step) {
  if (step.generation != generation_ || seen_ == 0 || OtherBytes(step.bytes)) {
    if (seen_ > 0) ++restarts_;
    Reset(step.generation, step.bytes);
  }
  ++seen_;
  if (seen_ <= warmup_steps_) return std::nullopt;
  if (!step_.ready()) {
    step_.AddBaseline(step.step_ms);
    compute_.AddBaseline(step.compute_ms);
    if (seen_ - warmup_steps_ >= baseline_steps_) {
      step_.Seal(relative_margin_, floor_ms_);
      compute_.Seal(relative_margin_, floor_ms_);
    }
    return std::nullopt;
  }
  step_.AddRecent(step.step_ms, window_);
  compute_.AddRecent(step.compute_ms, window_);
  if (seen_ - warmup_steps_ - baseline_steps_ < static_cast<int>(window_)) return std::nullopt;
  if (slow_) {
    if (step_.under_clear() && compute_.under_clear()) slow_ = false;
    return std::nullopt;
  }
  const bool step_over = step_.over();
  const bool compute_over = compute_.over();
  if (!step_over && !compute_over) return std::nullopt;
  slow_ = true;
  Slowdown s;
  s.step_ms = step_.recent_median();
  s.compute_ms = compute_.recent_median();
  s.baseline_ms = step_.median();
  s.baseline_compute_ms = compute_.median();
  s.step_slow = step_over;
  s.compute_slow = compute_over;
  s.step_index = step.index;
  return s;
}

}  // namespace ft::worker
