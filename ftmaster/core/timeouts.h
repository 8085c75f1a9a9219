// Adaptive collective timeouts from the ranks' summaries. Pure logic: summaries in, a
// TimeoutTable out; the caller reads summaries from Redis and publishes the table.
//
// The formula, per key (comm, op, size bucket):
//   op_tail   = max over the recent window of every summary's max(p99_ms, max_ms) for the key
//   step      = max over the recent window of every summary's step_ms and step_p50_ms (0 while
//               no rank knows its step)
//   timeout   = clamp(multiplier * op_tail, floor, ceiling)
//   default_ms = clamp(multiplier * step, floor, ceiling) once a step is known, else
//               clamp(warmup, floor, ceiling)
// Before the job has a history (the first steps, no step time known) the default is the
// warm-up timeout (FT_TIMEOUT_WARMUP, 50 s), not the ceiling: attribution needs no history to
// tell a hang (peers wait on a member that never entered and is idle) from a slow first step
// (the member is busy: compiling, loading data), so the timeout only decides how soon the
// master looks. The ceiling would name a hang in the first steps after 10 minutes.
// The step bounds only ops never seen yet (default_ms): an op with a history is timed by its
// own tail, which already holds any legitimate wait for a slow peer's compute (a pipeline
// bubble shows in the p2p ops' durations). Bounding every op by the step would put a 1 s-step
// job's timeouts at 4 s and its detection far past the ~2 s target.
// A key is published only after min_samples of its ops completed (the largest cumulative
// count any one rank reported); before that workers use default_ms. Entries equal to
// default_ms are left out (workers fall back to it anyway), which keeps the table small.
// "Recent" is the last window_ms of summary time (the newest summary's unix_ms, not the wall
// clock: no data, no expiry), kept as kWindowBuckets maxima per key.
//
// Churn: the table is compared with the last published one by effective value (an entry, or
// default_ms where none); the version increases, and table() changes, only when default_ms
// or some effective value differs by more than change_ratio (10%), or on the first Update.
//
// Not thread-safe: one thread (the master's loop) owns a TimeoutModel.
#ifndef FT_FTMASTER_TIMEOUTS_H_
#define FT_FTMASTER_TIMEOUTS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common/config.h"
#include "proto/messages.h"

namespace ft::master {

struct TimeoutOptions {
  double floor_ms = 1000;
  double ceiling_ms = 600000;
  double warmup_ms = 50000;  // default_ms until a step time is known
  double multiplier = 4;
  uint64_t min_samples = 20;
  double change_ratio = 0.10;
  int64_t window_ms = 10 * 60 * 1000;

  // timeout_floor, timeout_ceiling, timeout_warmup, timeout_multiplier, timeout_min_samples.
  static TimeoutOptions FromConfig(const Config& config);
};

class TimeoutModel {
 public:
  static constexpr int kWindowBuckets = 10;

  explicit TimeoutModel(TimeoutOptions options);

  // Continues from a table published earlier (read back after a master restart): its version
  // and values stand until the data moves them by more than change_ratio.
  void Restore(const proto::TimeoutTable& published);

  // One rank's summary. A summary not newer than the last one taken from that rank is
  // ignored, so the caller may pass the whole summary hash every round.
  void Add(const proto::RankSummary& summary);

  // Recomputes the table. True when it changed enough to publish: table() then holds the new
  // values with version + 1 and unix_ms = now_unix_ms.
  bool Update(int64_t now_unix_ms);

  // The table to publish (version 0: never computed).
  const proto::TimeoutTable& table() const { return published_; }

 private:
  struct Window {
    std::array<int64_t, kWindowBuckets> bucket{};  // bucket number held in each slot, 0 none
    std::array<double, kWindowBuckets> max{};
    void Put(int64_t bucket_number, double value);
    double Max(int64_t newest_bucket) const;
  };
  struct KeyState {
    Window tail;
    std::unordered_map<int, uint64_t> count_by_rank;
    uint64_t samples = 0;
  };
  using Key = std::tuple<uint64_t, proto::OpKind, int>;

  double Clamp(double ms) const;

  TimeoutOptions options_;
  std::map<Key, KeyState> keys_;
  Window step_;
  int64_t newest_bucket_ = 0;
  std::unordered_map<int, int64_t> last_summary_ms_;
  proto::TimeoutTable published_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_TIMEOUTS_H_
