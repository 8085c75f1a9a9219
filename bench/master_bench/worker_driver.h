// master_bench: the synthetic workers' clocks: when each node's worker writes what
// SyntheticJob renders, and sending it to Redis. Used by the trial's one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/master_bench/common.h"
#include "bench/master_bench/synthetic_job.h"
#include "proto/rank_ranges.h"
#include "redis/store.h"

namespace ft::bench {

// Sends `commands` in one pipeline; any error reply ends the bench, naming `what`.
void Pipeline(redis::Commands& db, const std::vector<redis::Argv>& commands, std::string_view what);

// The workers' clocks, as ftworker paces its writes (ftworker/report_pacing.h; issue 19: a
// calm job writes only what changed, at the rate decisions need). Each node's worker reports
// every FT_REPORT_INTERVAL (200 ms); a rank's progress table goes out at a report when
//   - the master's incident window is open and names the rank (a window notice on
//     ft:{J}:notify, read here at every driver tick as a worker's blocking XREAD would hear
//     it; it names the members of the window's communicators), or names no one: every table —
//     at once when the notice asks for new tables (as the worker answers at its next tick),
//     then at every report;
//   - its state changed (running → hung: its table stops showing it busy);
//   - it turned attentive: hung and waiting (or, the stopped rank, silent) for half the
//     timeout — once;
//   - FT_PROGRESS_REFRESH (60 s) passed since its last write.
// Summaries go out every FT_SUMMARY_REFRESH (10 s: the synthetic times never move by 10 %),
// the worker heartbeat (`worker:<node>` with a 5 s TTL, and the `workers` set) every second.
// Real workers are independent processes, so their phases are spread evenly over each period.
//
// `every_report`: the model before issue 19 (every table every report, every summary every
// second), for comparison.
//
// One Tick sends at most kMaxTickCommands and continues with the next nodes at the next
// call, each value carrying the time it is rendered: when the bench cannot write as fast as
// thousands of workers would (131k ranks' tables every report are ~650 MB/s), the tables come
// late but are never older than they say, and events (written between ticks) are not held up
// behind a whole pass.
class Driver {
 public:
  static constexpr size_t kMaxTickCommands = 2048;

  Driver(SyntheticJob* job, redis::Commands* db, int64_t now, bool every_report);

  // Everything at once (before the master starts: the state a running job has in Redis).
  void WriteAll(int64_t now);

  void Tick(int64_t now);
  void SetHung() { hung_ = true; }
  // The longest one tick's writes took (they delay the next events by as much).
  double max_write_ms() const { return max_write_ms_; }
  // Window notices seen (opened, closed).
  int windows_opened() const { return windows_opened_; }
  bool window_open() const { return window_open_; }

  // The progress writes of `rank` are recorded from now on: when each table was observed (the
  // time it carries) and when its write was answered (it was in Redis).
  struct Written {
    int64_t observed_unix_ms = 0;
    int64_t in_redis_unix_ms = 0;
  };
  void Watch(int rank);
  const std::vector<Written>& watched() const { return watched_; }

 private:
  // Reads the notices after notify_cursor_ (cheap when there are none).
  void ReadNotices();
  void NodeReport(int node, int64_t now, std::vector<redis::Argv>* cmds);

  SyntheticJob* job_;
  redis::Commands* db_;
  bool every_report_;
  bool hung_ = false;
  std::vector<int64_t> next_report_, next_refresh_, next_summary_, next_heartbeat_;
  std::vector<char> hung_written_;  // per node: its tables were written since the hang
  std::vector<char> attentive_written_;  // per rank: written once it became attentive
  int cursor_ = 0;                  // the node the next tick starts with
  std::string notify_cursor_ = "0";
  bool window_open_ = false;
  std::optional<proto::RankRanges> window_ranks_;  // the ranks the open window names; none: all
  bool answer_window_ = false;  // a notice asked for tables: written at the next tick
  int windows_opened_ = 0;
  double max_write_ms_ = 0;
  int watch_rank_ = -1;
  std::vector<Written> watched_;
};

// Sleeps to the next driver tick.
void Pace(Clock::time_point* next);

}  // namespace ft::bench
