// ft::worker::StepInference: finds a rank's training step from the repeating sequence of the
// ops it enters, with no annotation from the user, and measures each step.
//
// Input: one signature per op entered (kOpEnter records, collectives and p2p alike; see
// Signature()), in order, with its host enter time; the GPU interval (start..end) of each op
// that completed; and OnGap() when records were lost.
//
// Period: while searching, for every P <= max_period the run of P (how many of the newest ops
// equal the op P before them) is kept up to date, O(max_period) per op. The period is the P
// whose run covers confirm_cycles cycles (and min_run ops) and is the longest of all runs
// (ties: the smallest P); while a longer run belongs to a period not yet confirmed, it waits.
// Taking the longest run, not the first period that repeats, keeps a run of identical
// per-layer ops (or one micro-batch) from being taken for the step once a whole step was seen
// twice. Its price: an extra op every N steps makes the repeating unit N steps long, and that
// unit is the inferred step when it fits in max_period ops (rarer extra ops are noise).
// Runs are compared over the ops since the search began (see BestPeriod). A search that finds
// nothing for long (ops that never repeat) pauses for a growing number of ops between
// attempts, so it costs little. The cycle is
// stored in a canonical rotation that starts at its anchor: the op whose signature occurs the
// fewest times per cycle (ties: smallest signature; among its occurrences the rotation that is
// lexicographically smallest), so a pattern found again has the same anchor.
//
// Locked: each new op is checked against the cycle (O(1)); the anchor's enter times are the
// step boundaries. A mismatch first asks the runs whether another period is now confirmed
// (the cycle was a run of identical ops inside a step not yet seen whole: switch to it).
// Otherwise, and after a gap, a resync starts: the phases consistent with the ops
// since then are narrowed until one is left (noise such as an extra or a lost op costs only
// the steps it touched). A resync that finds no phase within max(2P, 64) ops means the
// pattern changed: searching starts again. Each new pattern gets
// a new generation number (an identical cycle found again keeps its number), so detectors
// built on step times can start their baselines over.
//
// Declared steps: once the app marks its steps itself (ft_step_done: a kStepDone record, fed to
// OnDeclaredStep), the marks are the step boundaries from then on and the op pattern is no longer
// searched (a new generation begins). The job's word beats any inference: a step whose ops all
// look alike — DDP's equal gradient buckets, one all-reduce per layer — repeats every op, so the
// longest run is one op long and no anchor tells the steps apart. A gap (lost records) may
// have lost a mark: the step it spans is not reported.
//
// Step = anchor enter time to the next anchor enter time. Comm time of a step = the union of
// the GPU intervals (observed start .. observed completion) of the rank's ops, clipped to the
// step; compute = step - comm. The GPU interval is used rather than enter..end because a host
// that runs ahead enqueues ops long before the GPU reaches them: that queueing is the rank's
// own compute. A step is reported one step late, when the intervals of its ops are in.
//
// Not thread-safe: one per rank, driven by its RankMonitor.
#ifndef FT_FTWORKER_STEP_INFERENCE_H_
#define FT_FTWORKER_STEP_INFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ft::worker {

struct StepSample {
  uint64_t index = 0;        // steps reported so far by this inference, 1-based
  uint64_t begin_ns = 0;     // enter time of the anchor op that began the step
  uint64_t end_ns = 0;       // enter time of the next one
  double step_ms = 0;
  double comm_ms = 0;        // union of the GPU intervals of the rank's ops inside the step
  double compute_ms = 0;     // step_ms - comm_ms
  uint64_t generation = 0;   // the pattern the step belongs to
  uint64_t bytes = 0;        // bytes of the ops entered in the step (anchor included)
};

struct StepInferenceOptions {
  size_t max_period = 4096;  // ops per step, at most
  int confirm_cycles = 3;    // identical cycles seen before a period is believed
  size_t min_run = 32;       // and at least this many ops repeating
  size_t detect_every = 8;   // ops between two looks at the runs while searching
};

class StepInference {
 public:
  explicit StepInference(StepInferenceOptions options = {});

  // The signature of an op: (communicator, op kind, size bucket).
  static uint64_t Signature(uint64_t comm_id, uint32_t op_kind, int bucket);

  // bytes: the op's size (0 when unknown); summed per step, never part of the signature.
  void OnEnter(uint64_t signature, uint64_t time_ns, uint64_t bytes = 0);
  // The GPU interval of a completed op (observed start .. observed completion).
  void OnOpInterval(uint64_t begin_ns, uint64_t end_ns);
  // Records were lost before the next OnEnter: the position in the cycle is unknown.
  void OnGap();
  // The app ended a step at time_ns (its ft_step_done): see "Declared steps" above.
  void OnDeclaredStep(uint64_t time_ns);
  // End of a batch of records: runs a pending search.
  void Flush();

  // Steps finished since the last call, oldest first.
  std::vector<StepSample> TakeSteps();

  bool locked() const { return state_ == State::kLocked; }
  bool declared() const { return state_ == State::kDeclared; }
  size_t period() const { return pattern_.size(); }
  uint64_t generation() const { return generation_; }
  uint64_t steps() const { return steps_reported_; }

 private:
  enum class State { kSearching, kLocked, kResync, kDeclared };
  struct Interval {
    uint64_t begin;
    uint64_t end;
  };
  struct PendingStep {
    uint64_t begin;
    uint64_t end;
    uint64_t generation;
    uint64_t bytes;
  };

  void Append(uint64_t signature, uint64_t time_ns, uint64_t bytes);
  void Search();
  void RebuildRuns();
  void Detect();
  size_t BestPeriod() const;
  bool SwitchPeriod();
  void Lock(size_t period);
  void StartResync();
  void ResyncWith(uint64_t signature);
  void Anchor(uint64_t time_ns, uint64_t bytes);
  void FinalizeBefore(uint64_t time_ns);
  void PruneIntervals();

  StepInferenceOptions options_;
  State state_ = State::kSearching;

  // Recent ops (signatures and enter times), oldest first; trimmed in halves.
  std::vector<uint64_t> sigs_;
  std::vector<uint64_t> times_;
  std::vector<uint64_t> bytes_;
  size_t history_limit_;
  size_t since_detect_ = 0;
  uint64_t total_ops_ = 0;
  uint64_t search_start_ops_ = 0;  // total_ops_ when the current search began
  std::vector<uint32_t> runs_;  // runs_[P], valid while searching
  bool runs_valid_ = true;
  size_t searched_ = 0;         // ops searched without a lock
  size_t dormant_ = 0;          // ops left before searching again
  size_t dormant_next_ = 0;

  // The cycle, canonical rotation (pattern_[0] is the anchor), and where we are in it.
  std::vector<uint64_t> pattern_;
  size_t phase_ = 0;  // index of the next expected op
  uint64_t generation_ = 0;
  std::vector<uint64_t> last_pattern_;  // the last locked cycle (keeps its generation)

  // Resync: phases the next op may have; ops seen since the resync began.
  std::vector<uint32_t> candidates_;
  size_t resync_ops_ = 0;
  size_t resync_run_ = 0;

  bool have_anchor_ = false;
  uint64_t last_anchor_ns_ = 0;
  uint64_t bytes_since_anchor_ = 0;  // the anchor op's and every op's entered after it
  std::vector<PendingStep> pending_;
  std::vector<Interval> intervals_;
  std::vector<StepSample> ready_;
  uint64_t steps_reported_ = 0;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_STEP_INFERENCE_H_
