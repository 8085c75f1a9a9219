#include "ftworker/slowdown_detector.h"

#include <algorithm>

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

SlowdownDetector::SlowdownDetector(const MonitorSettings& settings)
    : warmup_steps_(std::max(settings.warmup_steps, 0)),
      baseline_steps_(std::max(settings.baseline_steps, 1)),
      factor_(1 + std::max(settings.slowdown_pct, 0.0) / 100),
      consecutive_(std::max(settings.slowdown_steps, 1)) {}

void SlowdownDetector::Reset(uint64_t generation) {
  generation_ = generation;
  seen_ = 0;
  baseline_samples_.clear();
  baseline_compute_.clear();
  baseline_ms_ = 0;
  baseline_compute_ms_ = 0;
  slow_ = false;
  run_ = 0;
  slow_steps_.clear();
  slow_compute_.clear();
}

std::optional<Slowdown> SlowdownDetector::OnStep(const StepSample& step) {
  if (step.generation != generation_) Reset(step.generation);
  ++seen_;
  if (seen_ <= warmup_steps_) return std::nullopt;
  if (baseline_ms_ <= 0) {
    baseline_samples_.push_back(step.step_ms);
    baseline_compute_.push_back(step.compute_ms);
    if (static_cast<int>(baseline_samples_.size()) >= baseline_steps_) {
      baseline_ms_ = Median(baseline_samples_);
      baseline_compute_ms_ = Median(baseline_compute_);
    }
    return std::nullopt;
  }
  bool over = step.step_ms > baseline_ms_ * factor_;
  if (over == slow_) {
    run_ = 0;
    slow_steps_.clear();
    slow_compute_.clear();
    return std::nullopt;
  }
  ++run_;
  if (!slow_) {
    slow_steps_.push_back(step.step_ms);
    slow_compute_.push_back(step.compute_ms);
  }
  if (run_ < consecutive_) return std::nullopt;
  run_ = 0;
  slow_ = !slow_;
  if (!slow_) return std::nullopt;  // cleared
  Slowdown s;
  s.step_ms = Median(slow_steps_);
  s.compute_ms = Median(slow_compute_);
  s.baseline_ms = baseline_ms_;
  s.baseline_compute_ms = baseline_compute_ms_;
  s.step_index = step.index;
  slow_steps_.clear();
  slow_compute_.clear();
  return s;
}

}  // namespace ft::worker
