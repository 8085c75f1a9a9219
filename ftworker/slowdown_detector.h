// ft::worker::SlowdownDetector: is a rank's step time shifted beyond noise, against its own
// baseline? Per rank, fed with the steps StepInference reports.
//
//   warm-up      the first warmup_steps steps are ignored (compilation, allocator, caches);
//   baseline     the median step time of the next baseline_steps steps;
//   slow         step > baseline * (1 + slowdown_pct / 100) for slowdown_steps consecutive
//                steps: one Slowdown (the event carries the median of those steps);
//   cleared      after slowdown_steps consecutive steps at or below the threshold; only then
//                can another Slowdown be raised (hysteresis: a rank hovering at the threshold
//                raises one event, not one per step).
// A new step pattern (generation) starts over from warm-up: a different loop (evaluation, a
// new phase of training) has a different step time. The baseline is not updated afterwards,
// so a slow drift is caught too.
//
// Not thread-safe: one per rank.
#ifndef FT_FTWORKER_SLOWDOWN_DETECTOR_H_
#define FT_FTWORKER_SLOWDOWN_DETECTOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "ftworker/monitor_settings.h"
#include "ftworker/step_inference.h"

namespace ft::worker {

struct Slowdown {
  double step_ms = 0;      // median of the slow steps that raised it
  double baseline_ms = 0;
  double compute_ms = 0;   // median compute time of those steps
  double baseline_compute_ms = 0;
  uint64_t step_index = 0;  // the step that raised it
};

class SlowdownDetector {
 public:
  explicit SlowdownDetector(const MonitorSettings& settings);

  // One finished step; a Slowdown when this step completes a slow run.
  std::optional<Slowdown> OnStep(const StepSample& step);

  bool has_baseline() const { return baseline_ms_ > 0; }
  double baseline_ms() const { return baseline_ms_; }
  bool slow() const { return slow_; }

 private:
  void Reset(uint64_t generation);

  int warmup_steps_;
  int baseline_steps_;
  double factor_;
  int consecutive_;
  uint64_t generation_ = 0;
  int seen_ = 0;  // steps of this generation
  std::vector<double> baseline_samples_;
  std::vector<double> baseline_compute_;
  double baseline_ms_ = 0;
  double baseline_compute_ms_ = 0;
  bool slow_ = false;
  int run_ = 0;   // consecutive steps on the other side of the threshold from `slow_`
  std::vector<double> slow_steps_;
  std::vector<double> slow_compute_;
};

double Median(std::vector<double> values);

}  // namespace ft::worker

#endif  // FT_FTWORKER_SLOWDOWN_DETECTOR_H_
