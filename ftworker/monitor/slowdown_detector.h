// ft::worker::SlowdownDetector: has a rank's step time or compute time moved beyond its own
// noise? Per rank, fed with the steps StepInference reports. Two signals, judged alike:
// step time (the whole job slowed: network, input pipeline, a straggler holding everyone) and
// compute time (step time minus time in collectives: this rank's own work grew, the mark of a
// straggler; its collective waits shrink at the same time, so its step time may barely move).
//
//   warm-up    the first warmup_steps steps are ignored (compilation, allocator, caches);
//   baseline   over the next baseline_steps steps, per signal: the median m and the noise
//              s = 1.4826 * MAD (the standard deviation of normal noise, robust to outliers);
//   threshold  m + margin, margin = max(slowdown_pct% of m, kNoiseSigmas * s): a quiet rank
//              is judged by the relative bound, a noisy one by its own noise;
//   slow       the median of the last `slowdown_steps` steps is above the threshold: one
//              Slowdown (a single slow step moves a median of five by nothing);
//   cleared    the median of the last `slowdown_steps` steps is back below m + margin / 2 for
//              every signal (hysteresis: a rank hovering at the threshold raises one event,
//              not one every few steps); only then can another Slowdown be raised.
//   floor      a signal whose baseline median is below floor_ms (FT_SLOWDOWN_FLOOR, 5 ms) is
//              not judged at all, and the margin is never below floor_ms: a "step" of a
//              fraction of a millisecond is ops enqueued back to back, not a training step,
//              and +28000% over 0.0 ms says nothing.
// A new step pattern starts over from warm-up: a new generation (a different loop:
// evaluation, a new phase of training), or the same ops moving other amounts of data (bytes
// entered per step off the pattern's first step by more than kBytesRatio: a message-size
// sweep, a new sequence length), since either has a different step time. The baseline is not
// updated afterwards, so a slow drift is caught too.
//
// Not thread-safe: one per rank.
#ifndef FT_FTWORKER_SLOWDOWN_DETECTOR_H_
#define FT_FTWORKER_SLOWDOWN_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "ftworker/monitor/monitor_settings.h"
#include "ftworker/monitor/step_inference.h"

namespace ft::worker {

struct Slowdown {
  double step_ms = 0;      // median of the last slowdown_steps steps when it was raised
  double baseline_ms = 0;
  double compute_ms = 0;   // median compute time of those steps
  double baseline_compute_ms = 0;
  bool step_slow = false;     // which signal crossed its threshold (one or both)
  bool compute_slow = false;
  uint64_t step_index = 0;  // the step that raised it
};

class SlowdownDetector {
 public:
  // Noise multiples a window median must move before it counts (with normal noise, a median
  // of five beyond 4 sigma of single steps is far out of reach of chance).
  static constexpr double kNoiseSigmas = 4;
  // Bytes per step this far off the pattern's (either way) make it another pattern.
  static constexpr double kBytesRatio = 1.5;

  explicit SlowdownDetector(const MonitorSettings& settings);

  // One finished step; a Slowdown when this step makes the rank slow.
  std::optional<Slowdown> OnStep(const StepSample& step);

  bool has_baseline() const { return step_.ready(); }
  double baseline_ms() const { return step_.median(); }
  bool slow() const { return slow_; }
  // How many times a pattern change restarted the warm-up (not counting the first pattern).
  uint64_t restarts() const { return restarts_; }

 private:
  // One signal's baseline and recent window.
  class Signal {
   public:
    void Reset();
    void AddBaseline(double value);
    void Seal(double relative_margin, double floor_ms);  // median, noise and thresholds
    void AddRecent(double value, size_t window);
    bool ready() const { return ready_; }
    double median() const { return median_; }
    double recent_median() const;
    bool over() const { return judged_ && recent_median() > median_ + margin_; }
    bool under_clear() const { return !judged_ || recent_median() <= median_ + margin_ / 2; }

   private:
    std::vector<double> baseline_;
    std::deque<double> recent_;
    bool ready_ = false;
    bool judged_ = false;  // the baseline is at least the floor
    double median_ = 0;
    double margin_ = 0;
  };

  void Reset(uint64_t generation, uint64_t bytes);
  bool OtherBytes(uint64_t bytes) const;

  int warmup_steps_;
  int baseline_steps_;
  double relative_margin_;
  double floor_ms_;
  size_t window_;
  uint64_t generation_ = 0;
  uint64_t pattern_bytes_ = 0;  // bytes entered in the pattern's first step
  uint64_t restarts_ = 0;
  int seen_ = 0;  // steps of this generation
  Signal step_;
  Signal compute_;
  bool slow_ = false;
};

double Median(std::vector<double> values);

}  // namespace ft::worker

#endif  // FT_FTWORKER_SLOWDOWN_DETECTOR_H_
